"""The event-log backends by name: the one registry that config, CLI, the run store and the replay
child all use to open, list and reopen a run's log.

A backend is a subpackage of :mod:`spade_engine.events` (``sqlite``, ``kafka``) whose log class
implements :class:`~spade_engine.events.log.EventLog`, plus one :class:`LogBackend` entry in
:data:`BACKENDS` (how to open, list, reopen, resolve and remove its runs, and which driver feeds
its projections). Nothing outside this module and the backend's own subpackage names a backend.
Modules are imported only when their backend is used, so the Kafka client is not loaded for an
embedded run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import EventLogError, RunNotFound
from .log import EventLog

__all__ = [
    "LogBackend", "BACKENDS", "backend_names", "log_backend", "reopen_log", "driver_backends", "default_backend",
    "bootstrap_backend",
]


@dataclass(frozen=True)
class LogBackend:
    """How to open, list and reopen the logs of one backend."""

    name: str
    #: ``open(run_id, *, data_dir, bootstrap, create, partitions, read_only) -> EventLog``;
    #: ``read_only``: the caller only reads (a backend that can opens the log so that nothing is
    #: written to it; the embedded one does, the Kafka one opens it as usual)
    open: Callable[..., EventLog]
    #: ``list_runs(*, data_dir, bootstrap) -> list[str]`` (oldest first)
    list_runs: Callable[..., list[str]]
    #: ``reopen(args) -> EventLog`` from a log's :meth:`~EventLog.reopen_args` (another process)
    reopen: Callable[[Mapping[str, Any]], EventLog]
    description: str = ""
    #: ``remove(run_id, *, data_dir, bootstrap)``: delete a run's log entirely (only used to undo
    #: a run that a failed ``events import`` created); ``None`` when the backend cannot
    remove: Callable[..., None] | None = None
    #: ``resolve(run_id_or_prefix_or_None, *, data_dir, bootstrap) -> run_id``: the backend's own
    #: way to find a run (:func:`~spade_engine.events.store.resolve_run`); ``None``: the unique
    #: run of :attr:`list_runs` starting with the prefix, or the latest run
    resolve: Callable[..., str] | None = None
    #: how ``consumers run --driver auto`` and ``worker consumers`` feed the projections:
    #: ``embedded`` (read through the EventLog, any backend) or ``faust`` (a stream processor on the
    #: backend's Kafka topics)
    consumer_driver: str = "embedded"
    #: whether the log lives in the run's directory (else the directory remembers where it lives,
    #: ``log.json``, when the run is created, so later commands on it need no flags)
    in_data_dir: bool = False
    #: whether the backend is reached at a bootstrap address (``--bootstrap``): the backend a
    #: bootstrap given without ``--backend`` selects
    takes_bootstrap: bool = False


def _sqlite_open(
    run_id: str, *, data_dir: Path, bootstrap: str | None, create: bool, partitions: int, read_only: bool = False
) -> EventLog:
    from .sqlite.log import LOG_FILENAME, SqliteEventLog
    from .datadir import DataDir

    path = DataDir(data_dir).run_dir(run_id) / LOG_FILENAME
    if not create and not path.exists():
        raise RunNotFound(f"no run {run_id!r} in {data_dir}")
    return SqliteEventLog(path, run_id, create=create, read_only=read_only)


def _sqlite_list(*, data_dir: Path, bootstrap: str | None) -> list[str]:
    from .datadir import DataDir

    return DataDir(data_dir).runs()


def _sqlite_reopen(args: Mapping[str, Any]) -> EventLog:
    from .sqlite.log import SqliteEventLog

    # ``read_only`` (optional): the log was opened read-only (:meth:`SqliteEventLog.reopen_args`)
    return SqliteEventLog(args["path"], args["run_id"], create=False, read_only=bool(args.get("read_only")))


def _sqlite_resolve(run_id: str | None, *, data_dir: Path, bootstrap: str | None) -> str:
    from .datadir import DataDir

    return DataDir(data_dir).resolve(run_id)


def _sqlite_remove(run_id: str, *, data_dir: Path, bootstrap: str | None) -> None:
    import shutil

    from .datadir import DataDir

    shutil.rmtree(DataDir(data_dir).run_dir(run_id), ignore_errors=True)


def _kafka_class() -> Any:
    try:
        from .kafka.log import KafkaEventLog
    except ImportError as exc:  # pragma: no cover - depends on installation
        raise EventLogError(f"the kafka backend is not available: {exc}") from None
    return KafkaEventLog


def _kafka_open(
    run_id: str, *, data_dir: Path, bootstrap: str | None, create: bool, partitions: int, read_only: bool = False
) -> EventLog:
    # ``read_only`` changes nothing here: opening an existing run's topics appends no event (it
    # may still create a missing dead-letter topic and raise the topics' max.message.bytes)
    if not bootstrap:
        raise EventLogError("the kafka backend needs --bootstrap HOST:PORT (or SPADE_KAFKA_BOOTSTRAP)")
    log = _kafka_class()(bootstrap, run_id, create=create, partitions=partitions)
    if create:  # the data directory remembers where the run's log lives
        from .datadir import DataDir, RunLogPlace

        DataDir(data_dir).remember_place(run_id, RunLogPlace("kafka", bootstrap))
    return log


def _kafka_list(*, data_dir: Path, bootstrap: str | None) -> list[str]:
    from .kafka.topics import list_kafka_runs

    return list_kafka_runs(bootstrap or "")


def _kafka_reopen(args: Mapping[str, Any]) -> EventLog:
    # ``connect_timeout_s`` (optional): how long to wait for the broker
    extra = {"connect_timeout_s": float(args["connect_timeout_s"])} if "connect_timeout_s" in args else {}
    return _kafka_class()(args["bootstrap"], args["run_id"], create=False, **extra)


def _kafka_remove(run_id: str, *, data_dir: Path, bootstrap: str | None) -> None:
    from .kafka.topics import admin_client, dlq_topic_for, topic_for

    admin = admin_client(bootstrap or "", 10.0)
    try:
        admin.delete_topics([topic_for(run_id), dlq_topic_for(run_id)])
    finally:
        admin.close()


BACKENDS: dict[str, LogBackend] = {
    b.name: b
    for b in (
        LogBackend("sqlite", _sqlite_open, _sqlite_list, _sqlite_reopen, "embedded default: one SQLite file per run",
                   remove=_sqlite_remove, resolve=_sqlite_resolve, in_data_dir=True),
        LogBackend("kafka", _kafka_open, _kafka_list, _kafka_reopen, "Apache Kafka: one topic per run", remove=_kafka_remove,
                   consumer_driver="faust", takes_bootstrap=True),
    )
}


def backend_names() -> list[str]:
    """Every backend name ``log.backend`` and ``--backend`` accept."""
    return list(BACKENDS)


def log_backend(name: str) -> LogBackend:
    """The backend registered as ``name``."""
    found = BACKENDS.get(name)
    if found is None:
        raise EventLogError(f"unknown backend {name!r} (expected {' or '.join(BACKENDS)})")
    return found


def default_backend() -> str:
    """The backend of a run nothing else chooses one for (the first registered: embedded)."""
    return next(iter(BACKENDS))


def bootstrap_backend() -> str:
    """The backend a bootstrap address given without a backend selects."""
    return next(b.name for b in BACKENDS.values() if b.takes_bootstrap)


def reopen_log(backend: str, args: Mapping[str, Any]) -> EventLog:
    """Open, in this process, the log another process described with ``(log.backend, log.reopen_args())``."""
    return log_backend(backend).reopen(args)


def driver_backends(driver: str) -> list[str]:
    """The backends whose projections ``driver`` can feed (``faust``: the Kafka ones)."""
    return [b.name for b in BACKENDS.values() if driver == "embedded" or b.consumer_driver == driver]
