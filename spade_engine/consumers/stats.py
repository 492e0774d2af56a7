"""Per-run statistics: events counted by type, first and last event time.

Two parts, as every projection:

* :func:`reduce_stats` — the reducer: ``(state, envelope) -> state``, deterministic, no I/O,
  idempotent on ``event_id`` (an event seen twice counts once) and independent of how events of
  different keys interleave (first/last are the min/max ``occurred_at``). Events this engine
  cannot read (unknown type, newer schema version) are counted in ``skipped``, never raised;
* :class:`RunStatsProjection` — the :class:`~spade_engine.consumers.projection.Projection` that
  holds the state and snapshots it, together with the cursor it reflects, to a JSON file
  (written to a temporary file, fsynced, then renamed: a crash leaves the old or the new snapshot).

Both consumer drivers (the embedded runner and the faust app) call this same code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ..events.catalogue import EVENT_TYPES
from ..events.envelope import Envelope
from ..events.log import Cursor, Record

__all__ = ["RunStats", "reduce_stats", "RunStatsProjection", "SNAPSHOT_NAME", "load_summary"]

SNAPSHOT_NAME = "stats.json"


class RunStats(msgspec.Struct, kw_only=True):
    """The state: counts by type, first/last ``occurred_at``, and the ids already counted."""

    counts: dict[str, int] = msgspec.field(default_factory=dict)
    first_at: str | None = None
    last_at: str | None = None
    skipped: dict[str, int] = msgspec.field(default_factory=dict)
    event_ids: set[str] = msgspec.field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> dict:
        """The figures without the id set (what the CLI prints)."""
        return {
            "counts": dict(sorted(self.counts.items())),
            "total": self.total,
            "first_at": self.first_at,
            "last_at": self.last_at,
            "skipped": dict(sorted(self.skipped.items())),
        }


def reduce_stats(state: RunStats, envelope: Envelope) -> RunStats:
    """Fold one event into ``state`` (updated in place for speed, and returned)."""
    if envelope.event_id in state.event_ids:
        return state
    state.event_ids.add(envelope.event_id)
    cls = EVENT_TYPES.get(envelope.type)
    if cls is None:
        reason = f"unknown type {envelope.type}"
    elif envelope.schema_version > cls.VERSION:
        reason = f"future version {envelope.type} v{envelope.schema_version}"
    else:
        reason = None
    if reason is not None:
        state.skipped[reason] = state.skipped.get(reason, 0) + 1
        return state
    state.counts[envelope.type] = state.counts.get(envelope.type, 0) + 1
    t = envelope.occurred_at
    if state.first_at is None or t < state.first_at:
        state.first_at = t
    if state.last_at is None or t > state.last_at:
        state.last_at = t
    return state


class _Snapshot(msgspec.Struct, kw_only=True):
    run_id: str
    cursor: dict[int, int]
    state: RunStats


class RunStatsProjection:
    """:class:`Projection` of :class:`RunStats`, snapshotted to ``path`` (None: memory only)."""

    name = "stats"

    def __init__(self, run_id: str, path: str | Path | None = None):
        self.run_id = run_id
        self.path = Path(path) if path is not None else None
        self.state = RunStats()
        self._position: Cursor = {}
        if self.path is not None and self.path.exists():
            snap = msgspec.json.decode(self.path.read_bytes(), type=_Snapshot)
            if snap.run_id != run_id:
                raise ValueError(f"{self.path} is a snapshot of run {snap.run_id!r}, not {run_id!r}")
            self.state = snap.state
            self._position = dict(snap.cursor)

    def apply(self, record: Record) -> None:
        reduce_stats(self.state, record.envelope)

    def flush(self, cursor: Mapping[int, int]) -> None:
        self._position = {int(p): int(o) for p, o in cursor.items()}
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = msgspec.json.encode(_Snapshot(run_id=self.run_id, cursor=self._position, state=self.state))
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def position(self) -> Cursor:
        return dict(self._position)

    @property
    def skipped(self) -> dict[str, int]:
        return dict(self.state.skipped)

    def summary(self) -> dict:
        return {"run_id": self.run_id, "cursor": {str(p): o for p, o in sorted(self._position.items())}, **self.state.summary()}


def load_summary(path: str | Path) -> dict:
    """The figures of a stats snapshot file, as JSON-ready builtins."""
    snap = msgspec.json.decode(Path(path).read_bytes(), type=_Snapshot)
    return {"run_id": snap.run_id, "cursor": {str(p): o for p, o in sorted(snap.cursor.items())}, **snap.state.summary()}
