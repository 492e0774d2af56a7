"""The embedded ``sqlite`` event-log backend (registered in :mod:`spade_engine.events.backends`):
``log`` (:class:`~.log.SqliteEventLog`, one SQLite file in WAL mode per run) and ``group`` (its
consumer group: one member per group, the log having one partition).

Nothing is imported here, so importing one module of the backend loads only that module.
"""
