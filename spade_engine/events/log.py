"""The EventLog protocol: the one interface every log backend (SQLite, Kafka) implements.

A log holds the events of one run. Positions are *cursors*: a mapping partition -> next offset
to read (the embedded SQLite log has a single partition 0; Kafka has one per topic partition).
Order is guaranteed within a partition, and all events with the same key are in one partition.

Contract (tested by ``tests/eventlog_contract.py`` against every backend):

* ``append`` is batched and idempotent on ``event_id``: re-appending an event is a no-op and a
  reader sees every event id once;
* ``read`` yields records from a cursor in partition order; ``follow`` keeps yielding new records
  as they are appended until stopped;
* consumer groups commit cursors explicitly (after processing) and read them back; a group
  member (``group_consumer``) reads only the partitions its group assigns it;
* ``has_event`` answers from the backend's id index; ``reopen_args`` says how another process
  opens the same log (:func:`spade_engine.events.backends.reopen_log`);
* ``count_by_type`` counts distinct events by type;
* malformed input is never silently lost: it goes to the dead-letter store with a reason.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .codec import decode_envelope
from .envelope import Envelope

if TYPE_CHECKING:  # pragma: no cover
    from .group import GroupConsumer

__all__ = ["Record", "Cursor", "EventLog", "advance", "earliest", "DeadLetter"]

Cursor = dict[int, int]
"""Partition -> next offset to read. An empty cursor means 'from the beginning'."""


class Record:
    """An event as read back from a log: where it is, its stored bytes, and the envelope.

    The envelope is decoded from ``raw`` on first access when a backend passes ``None``, so
    consumers that only route or copy records (export, dead-lettering, type filters on
    ``raw``) do not pay for decoding. Records are values: treat them as immutable.
    """

    __slots__ = ("partition", "offset", "raw", "_envelope")

    def __init__(self, partition: int, offset: int, envelope: Envelope | None, raw: bytes):
        self.partition = partition
        self.offset = offset
        self.raw = raw
        self._envelope = envelope

    @property
    def envelope(self) -> Envelope:
        env = self._envelope
        if env is None:
            env = self._envelope = decode_envelope(self.raw)
        return env

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self.partition, self.offset, self.raw) == (other.partition, other.offset, other.raw)

    def __hash__(self) -> int:
        return hash((self.partition, self.offset, self.raw))

    def __repr__(self) -> str:
        return f"Record(partition={self.partition}, offset={self.offset}, raw={self.raw[:60]!r}...)"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Input that could not be decoded, kept with the reason it was rejected."""

    reason: str
    raw: bytes
    received_at: str
    source: str = ""
    #: the record key the input had (Kafka keeps it on the dead-letter record), if any
    key: bytes | None = None


def earliest(a: Mapping[int, int], b: Mapping[int, int]) -> Cursor:
    """The cursor from which one read gives every record either ``a`` or ``b`` still needs
    (per partition the smaller position; an empty cursor, "from the start", wins)."""
    if not a or not b:
        return {}
    return {p: min(a.get(p, 0), b.get(p, 0)) for p in set(a) | set(b)}


def advance(cursor: Mapping[int, int], record: Record) -> Cursor:
    """Cursor just past ``record`` (a new dict; cursors are treated as values)."""
    out = dict(cursor)
    out[record.partition] = max(out.get(record.partition, 0), record.offset + 1)
    return out


@runtime_checkable
class EventLog(Protocol):
    """An append-only, immutable log of one run's events."""

    run_id: str
    #: the name the backend is registered under (:mod:`spade_engine.events.backends`)
    backend: str

    def append(self, envelopes: Iterable[Envelope]) -> int:
        """Append a batch atomically (per partition); return how many were new.

        Envelopes whose ``event_id`` is already recorded are skipped. Every envelope must belong
        to this log's run.
        """
        ...

    def append_raw(self, items: Iterable[tuple[Envelope, bytes]]) -> int:
        """:meth:`append` for envelopes with their already-encoded bytes, stored exactly (import
        keeps the bytes of an exported log)."""
        ...

    def read(self, cursor: Mapping[int, int] | None = None, *, limit: int | None = None) -> Iterator[Record]:
        """Yield records at or after ``cursor`` that exist now, then stop."""
        ...

    def follow(
        self,
        cursor: Mapping[int, int] | None = None,
        *,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        poll_interval: float = 0.05,
    ) -> Iterator[Record]:
        """Yield records from ``cursor`` and keep waiting for new ones.

        Ends when ``stop`` is set, or after ``idle_timeout`` seconds without a new record.
        """
        ...

    def end_cursor(self) -> Cursor:
        """The cursor just past the last record now in the log."""
        ...

    def commit(self, group: str, cursor: Mapping[int, int]) -> None:
        """Record ``cursor`` as consumer group ``group``'s position (call after processing)."""
        ...

    def committed(self, group: str) -> Cursor:
        """The last committed cursor of ``group`` (empty when it never committed)."""
        ...

    def group_consumer(self, group: str, *, session_timeout_s: float = 10.0, client_id: str = ...) -> "GroupConsumer":
        """Join consumer group ``group`` as one member (see :mod:`spade_engine.events.group`).

        ``session_timeout_s``: how long the group waits for a silent member before giving its
        partitions to the others; ``client_id``: the member's name on the broker.
        """
        ...

    def has_event(self, event_id: str) -> bool:
        """Whether an event with this id is recorded."""
        ...

    def reopen_args(self) -> dict[str, Any] | None:
        """What another process needs to open this log with ``reopen_log(log.backend, args)``;
        ``None`` for a log no other process can open (an in-memory one)."""
        ...

    def count_by_type(self) -> dict[str, int]:
        """Number of distinct events of each type."""
        ...

    def scan_counts(self) -> tuple[dict[str, int], list[tuple[int, int, str]] | None]:
        """:meth:`count_by_type` with every record decoded, and the records that do not decode as
        ``(partition, offset, reason)``, each also kept as a dead letter. The list is ``None`` for
        a backend that decodes every event before it stores it (nothing undecodable can be in its
        log, so there is nothing to scan)."""
        ...

    def dead_letter(self, raw: bytes, reason: str, *, source: str = "") -> None:
        """Keep undecodable input with the reason it was rejected."""
        ...

    def dead_letters(self) -> list[DeadLetter]:
        """Everything sent to the dead-letter store, oldest first."""
        ...

    def close(self) -> None:
        """Release connections; the log stays on disk (or on the broker)."""
        ...
