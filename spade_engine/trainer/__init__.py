"""The replay-driven trainer: events -> batches -> GRPO update -> checkpoint -> PolicyUpdated.

* :mod:`.losses`       pure functions: group advantages, per-skill centring, TIS weights, clipped loss
* :mod:`.batches`      events -> ready groups -> training samples (staleness, zero variance)
* :mod:`.scoring`      token log-probs of sequences (chunked vocabulary projection)
* :mod:`.model`        the trainable model: precision, LoRA, gradient checkpointing, DeepSpeed
* :mod:`.update`       one optimizer step on a list of samples
* :mod:`.checkpoints`  safetensors in the blob store, PolicyUpdated lookup, policy sync
* :mod:`.loop`         :class:`~.loop.Trainer`: the crash-safe consume/update/publish loop
* :mod:`.cli`          ``spade-engine train``

Curriculum replay with a fresh model (``retrain``) drives the engine, so it lives with the
other run drivers in :mod:`spade_engine.runs`.
"""
