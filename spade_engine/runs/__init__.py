"""Runs: assembling and driving whole runs from the engine, the sandbox, the policies and the
trainer.

``context`` (the one function that builds a run's stage context for every driver and role),
``engine`` (opening a runnable engine: log, lock, context, projections, in-process trainer),
``training`` (``build_trainer``: the one place a trainer is built), ``retrain`` (curriculum replay
into a new run with training), ``progress`` (the model's activity line of the live panel), and
the commands that drive runs: ``cli`` (``start``, ``status``, ``retrain``), ``train_cli``
(``train``) and ``worker_cli`` (``worker ROLE``). The engine and the trainer never reach each
other through any chain of imports; this package is where they meet.
"""
