"""The replay-driven trainer: events -> batches -> GRPO update -> checkpoint -> PolicyUpdated.

* :mod:`.losses`       pure functions: group advantages, per-skill centring, TIS weights, clipped loss
* :mod:`.batches`      events -> ready groups -> training samples (staleness, zero variance)
* :mod:`.scoring`      token log-probs of sequences (chunked vocabulary projection)
* :mod:`.model`        the trainable model: precision, LoRA, gradient checkpointing, DeepSpeed
* :mod:`.update`       one optimizer step on a list of samples
* :mod:`.checkpoints`  checkpoints in the blob store (written with the safetensors helpers of
                       :mod:`spade_engine.policy.hf`), PolicyUpdated lookup, policy sync
* :mod:`.loop`         :class:`~.loop.Trainer`: the crash-safe consume/update/publish loop

The trainer depends on ``policy`` (never on ``engine`` or ``sandbox``). What wires it to the rest
lives with the other run drivers in :mod:`spade_engine.runs`: ``build_trainer`` (the one place a
trainer is built), the ``spade-engine train`` command (it attaches the periodic held-out
evaluation, which plays episodes with the engine's code) and curriculum replay with a fresh model
(``retrain``).
"""
