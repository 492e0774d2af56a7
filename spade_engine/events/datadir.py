"""The data directory and run ids.

Data directory resolution is the same for every command: ``--data-dir``, then the
``SPADE_DATA`` environment variable, then ``./spade-data``. Layout::

    <data>/runs/<run_id>/events.sqlite     embedded event log of the run
    <data>/runs/<run_id>/log.json          where the log of a run kept elsewhere lives (backend,
                                           bootstrap), so later commands on the run need no flags
    <data>/runs/<run_id>/...               projections, snapshots (archive.sqlite, memory/...)
    <data>/blobs/sha256/ab/<hex>           content-addressed blobs (checkpoints, token traces)

Run ids sort by creation time (``run-YYYYMMDD-HHMMSS-xxxxxx``), so the latest run is the
greatest id.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import SpadeError
from .errors import RunNotFound
from .sqlite.log import LOG_FILENAME

__all__ = [
    "DEFAULT_DATA_DIR", "resolve_data_dir", "check_data_dir", "DataDirError", "new_run_id", "DataDir", "RunLogPlace",
    "PLACE_FILENAME",
]

DEFAULT_DATA_DIR = "spade-data"
#: in a run's directory: where its log lives when that is not the directory itself (Kafka)
PLACE_FILENAME = "log.json"


@dataclass(frozen=True)
class RunLogPlace:
    """Where a run's log lives: its backend and, for a broker, the bootstrap address."""

    backend: str
    bootstrap: str | None = None


class DataDirError(SpadeError):
    """The data directory cannot be a directory (it, or a folder above it, is a file)."""


def check_data_dir(path: Path) -> Path:
    """``path`` if it is, or can become, a directory: it and the nearest existing folder above it
    must be directories (``--data-dir /etc/passwd/x`` is an error naming ``/etc/passwd``)."""
    for p in (path, *path.parents):
        try:
            if not p.exists():
                continue
        except (OSError, ValueError) as exc:
            raise DataDirError(f"data directory {path}: {exc}") from None
        if not p.is_dir():
            what = "is" if p == path else f"cannot hold it: {p} is"
            raise DataDirError(f"data directory {path} {what} a file, not a directory")
        break
    return path


def resolve_data_dir(flag: str | Path | None = None) -> Path:
    """``--data-dir`` flag, else ``$SPADE_DATA``, else ``./spade-data`` (checked: see
    :func:`check_data_dir`)."""
    if flag:
        return check_data_dir(Path(flag).expanduser())
    env = os.environ.get("SPADE_DATA")
    if env:
        return check_data_dir(Path(env).expanduser())
    return check_data_dir(Path(DEFAULT_DATA_DIR))


def new_run_id() -> str:
    """A new run id that sorts after every earlier one: ``run-YYYYmmdd-HHMMSS-FFFRRR`` with FFF the
    fraction of the second in 1/4096ths and RRR random (two runs started within one second once
    sorted by their random suffix alone, so "the latest run" could name the earlier one)."""
    now = datetime.now(timezone.utc)
    fraction = now.microsecond * 4096 // 1_000_000
    return f"run-{now:%Y%m%d-%H%M%S}-{fraction:03x}{secrets.randbelow(4096):03x}"


@dataclass(frozen=True)
class DataDir:
    """A data directory holding runs and the shared blob store. ``root`` may be given as a string
    (a script's ``open_event_log(run, data_dir="...")`` once failed with a TypeError deep inside)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

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

    def known_runs(self) -> list[str]:
        """Run ids this directory knows, oldest first: those with an embedded log and those whose
        log lives elsewhere (``log.json``)."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(
            p.name for p in self.runs_dir.iterdir() if (p / LOG_FILENAME).exists() or (p / PLACE_FILENAME).exists()
        )

    def resolve_known(self, run_id: str | None) -> str:
        """Like :meth:`resolve`, over :meth:`known_runs` (embedded logs and remembered places)."""
        return self._resolve(run_id, self.known_runs())

    def remember_place(self, run_id: str, place: RunLogPlace) -> None:
        """Write ``log.json`` for a run whose log lives elsewhere (atomically; kept when unchanged)."""
        if self.place(run_id) == place:
            return
        d = self.run_dir(run_id)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{PLACE_FILENAME}.{os.getpid()}"
        tmp.write_text(json.dumps({"backend": place.backend, "bootstrap": place.bootstrap}, sort_keys=True) + "\n")
        os.replace(tmp, d / PLACE_FILENAME)

    def place(self, run_id: str) -> RunLogPlace | None:
        """Where the run's log lives, as ``log.json`` remembers it; ``None`` when there is no such
        file (an embedded run, or a run this directory does not know)."""
        path = self.run_dir(run_id) / PLACE_FILENAME
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DataDirError(f"{path} is unreadable ({exc}): pass --backend and --bootstrap, or delete it") from None
        if not isinstance(data, dict) or not isinstance(data.get("backend"), str) or not (
            data.get("bootstrap") is None or isinstance(data.get("bootstrap"), str)
        ):
            raise DataDirError(f"{path} does not say where the run's log lives: pass --backend and --bootstrap, or delete it")
        return RunLogPlace(data["backend"], data.get("bootstrap"))

    def latest_run(self) -> str:
        runs = self.runs()
        if not runs:
            raise RunNotFound(f"no runs in {self.root} (start one with `spade-engine start`)")
        return runs[-1]

    def resolve(self, run_id: str | None) -> str:
        """``run_id`` if given and present (a unique prefix is accepted), else the latest run."""
        return self._resolve(run_id, self.runs())

    def _resolve(self, run_id: str | None, runs: list[str]) -> str:
        if run_id is None:
            if not runs:
                raise RunNotFound(f"no runs in {self.root} (start one with `spade-engine start`)")
            return runs[-1]
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
