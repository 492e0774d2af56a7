"""The Projection protocol: a read model built from the log by a pure, idempotent fold.

A projection owns its state (in memory, a SQL database, a FAISS index...). The runners in
:mod:`spade_engine.consumers.runner` (embedded, SQLite log) and
:mod:`spade_engine.consumers.faust_app` (Kafka) feed it records and decide when to flush; the
projection decides what an event means. Rules:

* ``apply`` is idempotent on ``event_id`` and does not depend on the interleaving of events of
  different keys (environments), so a replay from offset 0 rebuilds the same state;
* ``apply`` never raises on an event it does not understand (unknown type, newer schema, malformed
  payload): it counts it in ``skipped`` with a reason;
* ``flush(cursor)`` makes state durable *together with* the cursor it reflects (a snapshot), and
  ``position()`` returns that cursor, so a restart resumes there instead of replaying from zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from ..events.log import Cursor, Record

__all__ = ["Projection"]


@runtime_checkable
class Projection(Protocol):
    """A read model of the log."""

    #: Stable name; the runner commits offsets as consumer group ``projection:<name>``.
    name: str

    def apply(self, record: Record) -> None:
        """Fold one record into the state (idempotent; never raises on bad events)."""
        ...

    def flush(self, cursor: Mapping[int, int]) -> None:
        """Persist the state together with ``cursor`` (the position just past the last applied)."""
        ...

    def position(self) -> Cursor:
        """The cursor the persisted state reflects (empty = nothing applied yet)."""
        ...

    @property
    def skipped(self) -> dict[str, int]:
        """Events not applied, counted by reason (``unknown type X``, ``future version``...)."""
        ...
