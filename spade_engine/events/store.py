"""Where runs live: the data directory, run ids, and opening a run's event log on a backend.

Data directory resolution is the same for every command: ``--data-dir``, then the
``SPADE_DATA`` environment variable, then ``./spade-data``. Layout::

    <data>/runs/<run_id>/events.sqlite     embedded event log of the run
    <data>/runs/<run_id>/...               projections, snapshots (archive.sqlite, memory/...)
    <data>/blobs/sha256/ab/<hex>           content-addressed blobs (checkpoints, token traces)

Run ids sort by creation time (``run-YYYYMMDD-HHMMSS-xxxxxx``), so the latest run is the
greatest id. The Kafka backend keeps one topic per run; see :mod:`spade_engine.events.kafka.log`.
Backends are found through :mod:`spade_engine.events.backends`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .errors import RunNotFound
from .log import EventLog
from .sqlite.log import LOG_FILENAME

__all__ = ["resolve_data_dir", "new_run_id", "DataDir", "open_event_log", "Backend", "list_runs", "resolve_run"]

Backend = str
"""A registered backend name (:mod:`spade_engine.events.backends`)."""
DEFAULT_DATA_DIR = "spade-data"


def resolve_data_dir(flag: str | Path | None = None) -> Path:
    """``--data-dir`` flag, else ``$SPADE_DATA``, else ``./spade-data``."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get("SPADE_DATA")
    if env:
        return Path(env).expanduser()
    return Path(DEFAULT_DATA_DIR)


def new_run_id() -> str:
    """A new run id that sorts after every earlier one."""
    now = datetime.now(timezone.utc)
    return f"run-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class DataDir:
    """A data directory holding runs and the shared blob store."""

    root: Path

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def blobs_dir(self) -> Path:
        return self.root / "blobs"

    def run_dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or run_id in (".", ".."):
            raise RunNotFound(f"invalid run id {run_id!r}")
        return self.runs_dir / run_id

    def runs(self) -> list[str]:
        """Run ids with an embedded event log, oldest first."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(p.name for p in self.runs_dir.iterdir() if (p / LOG_FILENAME).exists())

    def latest_run(self) -> str:
        runs = self.runs()
        if not runs:
            raise RunNotFound(f"no runs in {self.root} (start one with `spade-engine start`)")
        return runs[-1]

    def resolve(self, run_id: str | None) -> str:
        """``run_id`` if given and present (a unique prefix is accepted), else the latest run."""
        if run_id is None:
            return self.latest_run()
        runs = self.runs()
        if run_id in runs:
            return run_id
        matches = [r for r in runs if r.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RunNotFound(f"no run {run_id!r} in {self.root}")
        raise RunNotFound(f"run prefix {run_id!r} is ambiguous: {', '.join(matches)}")

    def log_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / LOG_FILENAME


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
    from .backends import log_backend

    return log_backend(backend).open(run_id, data_dir=data_dir, bootstrap=bootstrap, create=create, partitions=partitions)


def list_runs(*, data_dir: Path, backend: Backend = "sqlite", bootstrap: str | None = None) -> list[str]:
    """Run ids on a backend, oldest first."""
    from .backends import log_backend

    return log_backend(backend).list_runs(data_dir=data_dir, bootstrap=bootstrap)


def resolve_run(
    run_id: str | None, *, data_dir: Path, backend: Backend = "sqlite", bootstrap: str | None = None
) -> str:
    """The given run (or a unique prefix of it), else the latest run on the backend."""
    if backend == "sqlite":
        return DataDir(data_dir).resolve(run_id)
    runs = list_runs(data_dir=data_dir, backend=backend, bootstrap=bootstrap)
    if run_id is None:
        if not runs:
            raise RunNotFound(f"no runs on the {backend} backend")
        return runs[-1]
    matches = [r for r in runs if r == run_id or r.startswith(run_id)]
    if len(matches) != 1:
        raise RunNotFound(f"no unique run {run_id!r} on the {backend} backend")
    return matches[0]
