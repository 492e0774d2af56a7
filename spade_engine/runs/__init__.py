"""Runs: assembling and driving whole runs from the engine, the sandbox, the policies and the
trainer.

``context`` (the one function that builds a run's stage context for every driver and role),
``engine`` (opening a runnable engine: log, lock, context, projections, in-process trainer),
``retrain`` (curriculum replay into a new run with training), and the commands that drive runs:
``cli`` (``start``, ``status``, ``retrain``) and ``worker_cli`` (``worker ROLE``). The engine and
the trainer never import each other; this package is where they meet.
"""
