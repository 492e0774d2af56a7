"""Rebuilding projections from the log, and checking live projections against a rebuild.

``open_live_projections(run_dir)`` opens the projections a run maintains while it runs (archive,
memory, difficulty under ``<data>/runs/<run_id>/``); ``replay_run(log, into)`` rebuilds the same
files from offset 0 in a fresh directory, optionally only up to an offset or a time;
``first_difference`` compares two sets of projections and names the first thing that differs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import EngineConfig, MemoryConfig
from ..errors import SpadeError
from ..events.log import Cursor, EventLog
from .db import ARCHIVE_FILENAME, resolve_url
from .fold import FoldError, bounds, finish_child, fold, log_opener, records, start_child
from .difficulty import DEFAULT_WINDOW, DIFFICULTY_FILENAME, DifficultySeries
from .memory import MEMORY_DIRNAME, EnvironmentMemory
from .projection import ArchiveProjection
from .queries import dump_archive

__all__ = [
    "Projections",
    "ReplayResult",
    "ReplayError",
    "open_projections",
    "open_live_projections",
    "projections_ahead",
    "open_checked_projections",
    "replay_run",
    "PARALLEL_MIN_EVENTS",
    "parse_until",
    "first_difference",
    "verify_projections",
]


class ReplayError(SpadeError):
    """A replay cannot be done as asked (target directory not empty, bad --until...)."""


@dataclass
class Projections:
    """The projections of one run kept in one directory."""

    directory: Path
    archive: ArchiveProjection
    memory: EnvironmentMemory
    difficulty: DifficultySeries

    @property
    def all(self) -> list[Any]:
        return [self.archive, self.memory, self.difficulty]

    def skipped(self) -> dict[str, dict[str, int]]:
        return {p.name: p.skipped for p in self.all}

    def dump(self) -> dict[str, Any]:
        return {
            "archive": dump_archive(self.archive.engine),
            "memory": self.memory.dump(),
            "difficulty": self.difficulty.dump(),
        }

    def close(self) -> None:
        self.archive.close()

    def __enter__(self) -> "Projections":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _memory_config(config: EngineConfig | MemoryConfig | None) -> MemoryConfig:
    if isinstance(config, EngineConfig):
        return config.memory
    return config or MemoryConfig()


def open_projections(
    directory: str | Path,
    config: EngineConfig | MemoryConfig | None = None,
    *,
    archive_url: str | None = None,
    window: int = DEFAULT_WINDOW,
) -> Projections:
    """Open (creating) archive, memory and difficulty projections stored in ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    archive = ArchiveProjection.open(archive_url or resolve_url(directory / ARCHIVE_FILENAME))
    return Projections(
        directory=directory,
        archive=archive,
        memory=EnvironmentMemory.open(directory, _memory_config(config)),
        difficulty=DifficultySeries.open(directory, window=window),
    )


def open_live_projections(
    run_dir: str | Path,
    config: EngineConfig | MemoryConfig | None = None,
    *,
    archive_url: str | None = None,
    window: int = DEFAULT_WINDOW,
) -> Projections:
    """The projections a run maintains live, in its run directory ``<data>/runs/<run_id>``."""
    return open_projections(run_dir, config, archive_url=archive_url, window=window)


def projections_ahead(projs: Projections, log: EventLog) -> list[str]:
    """Where the projections are ahead of the log (empty when none is): a projection that has
    folded events the log no longer holds (the log lost its last writes, e.g. a SQLite WAL file
    gone after a kill). Each entry names the projection, its offset and the log's end."""
    end = log.end_cursor()
    out = []
    for proj in projs.all:
        for partition, offset in sorted(proj.position().items()):
            if offset > end.get(partition, 0):
                out.append(f"{proj.name} at offset {offset} of partition {partition}, the log ends at {end.get(partition, 0)}")
    return out


def ahead_message(run_id: str, ahead: list[str]) -> str:
    return (
        f"the event log of run {run_id} ends before its projections ({'; '.join(ahead)}): the log lost its last "
        "writes (e.g. its WAL file after a kill), so the projections describe events it no longer holds"
    )


def open_checked_projections(
    run_dir: str | Path, config: EngineConfig | MemoryConfig | None, log: EventLog, *, catch_up: bool = False,
    on_rebuild: Any = None,
) -> Projections:
    """The live projections of a run, checked against its log on open: when they are ahead of it
    (:func:`projections_ahead`), they are moved aside to ``<run_dir>/stale-projections-<time>``
    (kept, never deleted), ``on_rebuild(message)`` is told (else a warning is logged) and fresh
    ones are opened, which fold the log from its start (at once with ``catch_up``, else by the
    caller's runner)."""
    import logging
    import shutil

    run_dir = Path(run_dir)
    projs = open_live_projections(run_dir, config)
    ahead = projections_ahead(projs, log)
    if not ahead:
        return projs
    projs.close()
    stale = run_dir / f"stale-projections-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S-%f')}"
    stale.mkdir(parents=True)
    for name in os.listdir(run_dir):
        if name.startswith(ARCHIVE_FILENAME) or name in (MEMORY_DIRNAME, DIFFICULTY_FILENAME):
            shutil.move(str(run_dir / name), str(stale / name))
    message = ahead_message(log.run_id, ahead) + f"; rebuilding them from the log (the stale ones are kept in {stale})"
    if on_rebuild is not None:
        on_rebuild(message)
    else:
        logging.getLogger("spade_engine.archive").warning("%s", message)
    projs = open_live_projections(run_dir, config)
    if catch_up:
        from ..consumers.runner import EmbeddedRunner

        # the rebuilt projections' snapshots hold their positions; the log's group offsets (for
        # tooling) are not committed here: the commands that catch up this way only read the log
        EmbeddedRunner(log, projs.all, commit_offsets=False).catch_up()
    return projs


def parse_until(text: str | None) -> int | str | None:
    """``--until``: an integer offset (replay events with offset < it) or an ISO time
    (replay events up to the first one recorded after it), normalised to the log's format."""
    if text is None or text == "":
        return None
    if text.isdigit():
        return int(text)
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReplayError(f"--until {text!r} is neither an offset nor an ISO time (2026-01-31T12:00:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class ReplayResult:
    """What a replay did."""

    directory: Path
    events: int
    seconds: float
    cursor: Cursor
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    #: 2 when memory and difficulty were rebuilt by a child process beside the archive
    processes: int = 1

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


#: logs with at least this many events are replayed in two processes (see :func:`replay_run`)
PARALLEL_MIN_EVENTS = 50_000


def replay_run(
    log: EventLog,
    into: str | Path,
    config: EngineConfig | MemoryConfig | None = None,
    *,
    until: int | str | Mapping[int, int] | None = None,
    archive_url: str | None = None,
    window: int = DEFAULT_WINDOW,
    flush_every: int = 100_000,
    parallel: bool | None = None,
) -> ReplayResult:
    """Rebuild every projection of ``log`` from offset 0 into the fresh directory ``into``.

    The replay covers the log as it is when the replay starts (bounded further by ``until``: an
    offset, a per-partition cursor or an ISO time). With ``parallel`` (default: on for logs of at
    least :data:`PARALLEL_MIN_EVENTS` events that another process can reopen, on a machine with
    more than one CPU) the archive, the most expensive projection, is rebuilt by a child process
    that reads the log itself while this process rebuilds memory and difficulty; both stop at the
    same cursor, so the result is the same as a sequential replay.
    """
    into = Path(into)
    if into.exists() and any(into.iterdir()):
        raise ReplayError(f"replay target {into} is not empty; give a new directory")
    t0 = time.perf_counter()
    stop, until_time = bounds(log, until)
    projs = open_projections(into, config, archive_url=archive_url, window=window)
    if any(p.position() for p in projs.all):
        projs.close()
        raise ReplayError(f"replay target archive {archive_url} is not empty; give an empty database")
    opener = log_opener(log)
    if parallel is None:
        parallel = opener is not None and (os.cpu_count() or 1) > 1 and sum(stop.values()) >= PARALLEL_MIN_EVENTS
    elif parallel and opener is None:
        raise ReplayError(f"a parallel replay needs a log another process can open; {type(log).__name__} cannot be")
    try:
        if not parallel:
            n, cursor = fold(records(log, stop, until_time), projs.all, flush_every)
            return ReplayResult(into, n, time.perf_counter() - t0, cursor, projs.skipped())
        # the child rebuilds memory and difficulty from its own reading of the log while this
        # process rebuilds the archive; both stop at ``stop``
        mem_cfg = projs.memory.config.model_dump()
        child = start_child(opener, into, mem_cfg, window, stop, until_time, flush_every)  # type: ignore[arg-type]
        try:
            n, cursor = fold(records(log, stop, until_time), [projs.archive], flush_every)
        except BaseException:
            child.kill()
            child.wait()
            raise
        try:
            n_child, cursor_child, child_skipped = finish_child(child)
        except FoldError as exc:
            raise ReplayError(str(exc)) from None
        if (n_child, cursor_child) != (n, cursor):
            raise ReplayError(f"the replay child read {n_child} events up to {cursor_child}, this process {n} up to {cursor}")
        skipped = {"archive": projs.archive.skipped, **child_skipped}
        return ReplayResult(into, n, time.perf_counter() - t0, cursor, skipped, processes=2)
    finally:
        projs.close()


def _ident(item: Any) -> str:
    if isinstance(item, dict):
        for key in ("env_id", "event_id", "version"):
            if key in item:
                return f"{key}={item[key]}"
        if "window" in item and "skill" in item:
            return f"window={item['window']},skill={item['skill']}"
    return ""


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first place where ``a`` (live) and ``b`` (replayed) differ, or ``None`` when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a:
                return f"{path}.{key}: missing in live"
            if key not in b:
                return f"{path}.{key}: missing in replay"
            diff = first_difference(a[key], b[key], f"{path}.{key}" if path else str(key))
            if diff:
                return diff
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            ident = _ident(x) or _ident(y)
            diff = first_difference(x, y, f"{path}[{ident or i}]")
            if diff:
                return diff
        if len(a) != len(b):
            return f"{path}: {len(a)} items live, {len(b)} replayed"
        return None
    if a != b:
        return f"{path}: live {_short(a)} != replay {_short(b)}"
    return None


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def verify_projections(live: Projections, replayed: Projections) -> str | None:
    """Compare every projection; ``None`` when equal, else the first difference."""
    return first_difference(live.dump(), replayed.dump())

