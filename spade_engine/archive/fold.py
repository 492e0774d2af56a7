"""Folding a bounded stretch of a log into projections, in this process or in a child process.

``bounds`` fixes where a replay ends (the log's end when it starts, an offset, a cursor or a
time) so that every reader of the same replay stops at the same event; ``records`` yields the
log's records up to that end; ``fold`` applies them to projections and flushes.

A parallel replay splits the projections over two processes that each read the log themselves:
``log_opener`` describes how another process reopens a log, and running this module
(``python -m spade_engine.archive.fold JOB``) folds the run's memory and difficulty series into a
directory and prints what it read as JSON. It imports only what those two projections need, so
the child starts quickly; see :func:`spade_engine.archive.replay.replay_run`.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import SpadeError
from ..events.log import Cursor, EventLog

__all__ = ["FoldError", "bounds", "records", "fold", "log_opener", "open_log", "start_child", "finish_child"]


class FoldError(SpadeError):
    """A child fold process failed or read something else than its parent."""


def bounds(log: EventLog, until: int | str | Mapping[int, int] | None) -> tuple[Cursor, str | None]:
    """The end of a replay: a cursor (never past the log's end now, so events appended during the
    replay are left out and every reader stops at the same place) and an optional ISO time."""
    end: Cursor = dict(log.end_cursor() or {})
    if isinstance(until, str):
        return end, until
    if isinstance(until, int):
        return {p: min(o, until) for p, o in end.items()}, None
    if until is not None:
        return {p: min(o, int(until.get(p, 0))) for p, o in end.items()}, None
    return end, None


def records(log: EventLog, stop: Mapping[int, int], until_time: str | None = None) -> Iterator[Any]:
    """The log's records before ``stop`` (per partition) and not recorded after ``until_time``."""
    remaining = {p for p, o in stop.items() if o > 0}
    if not remaining:
        return
    for rec in log.read({}):
        if until_time is not None and rec.envelope.occurred_at > until_time:
            return
        if rec.offset >= stop.get(rec.partition, 0):
            remaining.discard(rec.partition)
            if not remaining:
                return
            continue
        yield rec
        if rec.offset + 1 >= stop[rec.partition]:
            remaining.discard(rec.partition)
            if not remaining:
                return


def fold(recs: Iterator[Any], projections: list[Any], flush_every: int = 100_000) -> tuple[int, Cursor]:
    """Apply every record to every projection (flushing every ``flush_every`` events and at the
    end); returns the number of records and the cursor after the last one."""
    cursor: Cursor = {}
    n = 0
    # bulk rebuild: the projections build no reference cycles, so the cyclic GC's repeated scans
    # of the growing state are pure overhead here (restored afterwards)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        apply_fns = [p.apply for p in projections]
        for rec in recs:
            for fn in apply_fns:
                fn(rec)
            cursor[rec.partition] = rec.offset + 1
            n += 1
            if n % flush_every == 0:
                for p in projections:
                    p.flush(cursor)
        for p in projections:
            p.flush(cursor)
    finally:
        if gc_was_enabled:
            gc.enable()
    return n, cursor


def log_opener(log: EventLog) -> tuple[str, dict[str, Any]] | None:
    """How another process can open the same log (``None`` for a log it cannot reopen)."""
    args = log.reopen_args()
    return None if args is None else (log.backend, dict(args))


def open_log(opener: tuple[str, Mapping[str, Any]]) -> EventLog:
    """Open the log an opener from :func:`log_opener` describes."""
    from ..events.backends import reopen_log
    from ..events.errors import EventLogError

    kind, args = opener
    try:
        return reopen_log(kind, args)
    except EventLogError as exc:
        raise FoldError(str(exc)) from None


# -- the child process ---------------------------------------------------------------------------


def start_child(opener: tuple[str, Mapping[str, Any]], directory: Path, memory_config: Mapping[str, Any], window: int,
                stop: Mapping[int, int], until_time: str | None, flush_every: int) -> subprocess.Popen:
    """Start a child that folds memory and difficulty into ``directory``.

    A plain subprocess, not multiprocessing: spawn would re-run the caller's main script."""
    job = {
        "opener": [opener[0], dict(opener[1])], "directory": str(directory), "memory": dict(memory_config),
        "window": window, "stop": {str(p): o for p, o in stop.items()}, "until_time": until_time,
        "flush_every": flush_every,
    }
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    # stderr goes to a file: a chatty child must never block on a full pipe while this process
    # is still folding (stdout carries one line of JSON, written at the very end)
    errors = tempfile.TemporaryFile(mode="w+")
    child = subprocess.Popen(
        [sys.executable, "-m", "spade_engine.archive.fold", json.dumps(job)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True,
    )
    child.errors_file = errors  # type: ignore[attr-defined]
    return child


def finish_child(child: subprocess.Popen) -> tuple[int, Cursor, dict[str, dict[str, int]]]:
    """Wait for a child from :func:`start_child`: (events read, cursor, skipped per projection)."""
    out, _ = child.communicate()
    errors = getattr(child, "errors_file", None)
    err = ""
    if errors is not None:
        errors.seek(0)
        err = errors.read()
        errors.close()
    if child.returncode != 0:
        lines = (err or "").strip().splitlines()
        raise FoldError(f"the replay child process failed: {lines[-1] if lines else f'exit status {child.returncode}'}")
    res = json.loads(out)
    return int(res["events"]), {int(p): int(o) for p, o in res["cursor"].items()}, res["skipped"]


def _child_main(job: Mapping[str, Any]) -> dict[str, Any]:
    from ..config import MemoryConfig
    from .difficulty import DifficultySeries
    from .memory import EnvironmentMemory

    log = open_log(job["opener"])
    try:
        memory = EnvironmentMemory.open(job["directory"], MemoryConfig.model_validate(job["memory"]))
        difficulty = DifficultySeries.open(job["directory"], window=int(job["window"]))
        stop = {int(p): int(o) for p, o in job["stop"].items()}
        n, cursor = fold(records(log, stop, job["until_time"]), [memory, difficulty], int(job["flush_every"]))
    finally:
        log.close()
    return {
        "events": n, "cursor": {str(p): o for p, o in cursor.items()},
        "skipped": {memory.name: memory.skipped, difficulty.name: difficulty.skipped},
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_child_main(json.loads(sys.argv[1]))))
