"""The engine: the self-play loop and its parts.

``corpus`` (grounding documents), ``designer`` (prompts, code extraction, repairs), ``hints``,
``rollouts`` (episode runner), ``regret`` (pure reward functions and their variants),
``regret_replay`` (recomputing a log's regrets), ``stages`` (one function per pipeline stage),
``pipeline`` (the stage table both drivers use), ``state`` (the run folded from its log), ``loop``
(the resumable single-process engine), ``worker`` (the distributed role workers). Running
model-written code is :mod:`spade_engine.sandbox`; the policies are :mod:`spade_engine.policy`;
assembling a run is :mod:`spade_engine.runs`.
"""
