"""The engine: the self-play loop and its parts.

``corpus`` (grounding documents), ``designer`` (prompts, code extraction, repairs), ``hints``,
``rollouts`` (episode runner), ``regret`` (pure reward functions), ``stages`` (one function per
pipeline stage), ``state`` (the run folded from its log), ``loop`` (the resumable single-process
engine), ``runtime`` (assembling an engine for a run), ``cli`` (``start``, ``status``),
``sandbox``/``validator`` (running model-written code), ``policy`` (policy backends).
"""
