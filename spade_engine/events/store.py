"""Where runs live: opening, listing and resolving a run's event log on a backend.

The data directory and run ids are :mod:`.datadir` (re-exported here). Backends are found through
:mod:`spade_engine.events.backends`; the Kafka backend keeps one topic per run
(:mod:`spade_engine.events.kafka.log`).
"""

from __future__ import annotations

from pathlib import Path

from dataclasses import dataclass

from .backends import bootstrap_backend, default_backend, log_backend
from .datadir import DEFAULT_DATA_DIR, DataDir, RunLogPlace, new_run_id, resolve_data_dir
from .errors import RunNotFound
from .log import EventLog

__all__ = [
    "resolve_data_dir", "new_run_id", "DataDir", "DEFAULT_DATA_DIR", "open_event_log", "Backend", "list_runs", "resolve_run",
    "RunLocation", "locate_run", "new_run_backend", "remember_run_place",
]

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
    read_only: bool = False,
) -> EventLog:
    """Open (or with ``create``, create) the event log of ``run_id`` on ``backend``.

    ``read_only``: for a caller that only reads (``status``, ``events tail``, ``audit``...): the
    embedded log is then opened so that nothing is written to it, and a log with missing tables
    is an error instead of being completed (:class:`~spade_engine.events.sqlite.log.SqliteEventLog`)."""
    if read_only and create:
        raise ValueError("a log opened read-only is never created")
    return log_backend(backend).open(
        run_id, data_dir=data_dir, bootstrap=bootstrap, create=create, partitions=partitions, read_only=read_only
    )


def list_runs(*, data_dir: Path, backend: Backend = "sqlite", bootstrap: str | None = None) -> list[str]:
    """Run ids on a backend, oldest first."""
    return log_backend(backend).list_runs(data_dir=data_dir, bootstrap=bootstrap)


#: the data directory's log of evaluations made outside any run (``spade-engine eval --model``):
#: listed with the runs, never the "latest run" a command picks by default
EVALUATIONS_RUN = "evaluations"


def engine_runs(runs: list[str]) -> list[str]:
    """``runs`` without the evaluations log (:data:`EVALUATIONS_RUN`)."""
    return [r for r in runs if r != EVALUATIONS_RUN]


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
        runs = engine_runs(runs)
        if not runs:
            raise RunNotFound(f"no runs on the {backend} backend")
        return runs[-1]
    matches = [r for r in runs if r == run_id or r.startswith(run_id)]
    if len(matches) != 1:
        raise RunNotFound(f"no unique run {run_id!r} on the {backend} backend")
    return matches[0]


@dataclass(frozen=True)
class RunLocation:
    """A resolved run and where its log lives."""

    run_id: str
    backend: Backend
    bootstrap: str | None


def locate_run(
    run_id: str | None, *, data_dir: Path, backend: Backend | None = None, bootstrap: str | None = None
) -> RunLocation:
    """Find a run (an id, a unique prefix, or ``None`` for the latest) and where its log lives.

    ``backend`` and ``bootstrap`` are what the user chose (a flag or the environment), ``None``
    where nothing was chosen. The data directory knows its runs: an embedded log in the run's
    directory, or ``log.json`` naming the backend and bootstrap of a log kept elsewhere (written
    when the run was created). So:

    * no backend chosen: a run this directory knows (the one named, else the latest) is opened
      where it lives; a given bootstrap replaces the remembered one. With no such run and a
      bootstrap given, the bootstrap's backend (Kafka) is asked; a bootstrap and no run named
      asks that backend for its latest run;
    * a backend chosen: that backend is asked, with the remembered bootstrap of the named run
      when none is given.
    """
    dd = DataDir(data_dir)
    if backend is None:
        if run_id is not None or bootstrap is None:
            try:
                local = dd.resolve_known(run_id)
            except RunNotFound:
                if bootstrap is None:
                    raise
            else:
                place = dd.place(local)
                if place is None:
                    return RunLocation(local, default_backend(), None)
                return RunLocation(local, place.backend, bootstrap or place.bootstrap)
        backend = bootstrap_backend()
    log_backend(backend)  # an unknown name: a clear error
    if bootstrap is None:  # the named (or latest) run's remembered bootstrap, if it lives there
        try:
            place = dd.place(dd.resolve_known(run_id))
        except RunNotFound:
            place = None
        if place is not None and place.backend == backend:
            bootstrap = place.bootstrap
    found = resolve_run(run_id, data_dir=data_dir, backend=backend, bootstrap=bootstrap)
    return RunLocation(found, backend, bootstrap)


def new_run_backend(backend: Backend | None, bootstrap: str | None) -> Backend:
    """The backend of a run about to be created: the chosen one, else the bootstrap's backend when
    a bootstrap is given, else the embedded default."""
    if backend is not None:
        log_backend(backend)
        return backend
    return bootstrap_backend() if bootstrap else default_backend()


def remember_run_place(run_id: str, *, data_dir: Path, backend: Backend, bootstrap: str | None) -> None:
    """Record in the data directory where a run's log lives, when it is not the directory itself."""
    if not log_backend(backend).in_data_dir:
        DataDir(data_dir).remember_place(run_id, RunLogPlace(backend, bootstrap))
