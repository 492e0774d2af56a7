"""Where runs live: opening, listing and resolving a run's event log on a backend.

The data directory and run ids are :mod:`.datadir` (re-exported here). Backends are found through
:mod:`spade_engine.events.backends`; the Kafka backend keeps one topic per run
(:mod:`spade_engine.events.kafka.log`).
"""

from __future__ import annotations

from pathlib import Path

from .backends import log_backend
from .datadir import DEFAULT_DATA_DIR, DataDir, new_run_id, resolve_data_dir
from .errors import RunNotFound
from .log import EventLog

__all__ = ["resolve_data_dir", "new_run_id", "DataDir", "DEFAULT_DATA_DIR", "open_event_log", "Backend", "list_runs", "resolve_run"]

Backend = str
"""A registered backend name (:mod:`spade_engine.events.backends`)."""
def open_event_log(
    run_id: str,
    *,
    data_dir: Path,
    backend: Backend = "sqlite",
    bootstrap: str | None = None,
    create: bool = False,
    partitions: int = 3,
) -> EventLog:
    """Open (or with ``create``, create) the event log of ``run_id`` on ``backend``."""
    return log_backend(backend).open(run_id, data_dir=data_dir, bootstrap=bootstrap, create=create, partitions=partitions)


def list_runs(*, data_dir: Path, backend: Backend = "sqlite", bootstrap: str | None = None) -> list[str]:
    """Run ids on a backend, oldest first."""
    return log_backend(backend).list_runs(data_dir=data_dir, bootstrap=bootstrap)


def resolve_run(
    run_id: str | None, *, data_dir: Path, backend: Backend = "sqlite", bootstrap: str | None = None
) -> str:
    """The given run (or a unique prefix of it), else the latest run on the backend (the backend's
    own ``resolve`` when it registers one)."""
    own = log_backend(backend).resolve
    if own is not None:
        return own(run_id, data_dir=data_dir, bootstrap=bootstrap)
    runs = list_runs(data_dir=data_dir, backend=backend, bootstrap=bootstrap)
    if run_id is None:
        if not runs:
            raise RunNotFound(f"no runs on the {backend} backend")
        return runs[-1]
    matches = [r for r in runs if r == run_id or r.startswith(run_id)]
    if len(matches) != 1:
        raise RunNotFound(f"no unique run {run_id!r} on the {backend} backend")
    return matches[0]
