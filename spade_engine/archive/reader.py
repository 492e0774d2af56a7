"""The one fold skeleton of the archive's projections: which records they read, how a record is
decoded, which handler applies it, and the skip rules, in one place.

A projection (:class:`~spade_engine.consumers.projection.Projection`), the trainer's
:class:`~spade_engine.trainer.batches.BatchAssembler` or the engine's
:class:`~spade_engine.engine.state.RunState`, built on :class:`LogReader`, declares the event types it reads (``WANTED``) and a handler per payload type (``HANDLERS``); its
``apply`` is :meth:`LogReader.apply`:

1. a current-version record of a type outside ``WANTED`` is passed over without decoding
   (:func:`~.records.irrelevant`; unknown types and versions are still decoded, so they are
   counted);
2. the record is decoded (:func:`~.records.decode_record`: plays as their summary, or whole
   where ``SUMMARY_PLAYS`` is false); one that cannot be (unknown type, newer version, malformed
   payload) is skipped with the reason;
3. its payload type's handler applies it (a type without a handler changes nothing);
4. a handler that raises skips the record as ``error <type>: <exception class>``; nothing is
   raised to the runner.

Skips are counted once per event id (:class:`~.records.Skipped`, persisted with the projection's
state), so a re-delivered bad event is counted once; :meth:`LogReader.skipped_changed` tells the
projection its skip record changed (to be written at its next flush).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from ..events.log import Record
from .records import Skipped, decode_record, irrelevant

__all__ = ["LogReader"]


class LogReader:
    """Base of a projection folded from the log (see the module docstring)."""

    #: the event types read (``None``: every record is decoded)
    WANTED: ClassVar[frozenset[str] | None] = None
    #: payload type -> ``handler(self, record, event)``
    HANDLERS: ClassVar[Mapping[type, Callable[..., None]]] = {}
    #: plays decoded as their summary (``False``: whole, with their turns)
    SUMMARY_PLAYS: ClassVar[bool] = True

    _skipped: Skipped

    @property
    def skipped(self) -> dict[str, int]:
        """Records not applied, counted by reason."""
        return self._skipped.counts

    def apply(self, record: Record) -> None:
        """Fold one record (idempotent per the projection's handlers; never raises)."""
        if self.WANTED is not None and irrelevant(record, self.WANTED):
            return
        event, reason = decode_record(record, summary_plays=self.SUMMARY_PLAYS)
        if reason is not None:
            self.skip(record, reason)
            return
        handler = self.HANDLERS.get(type(event))
        if handler is None:
            return  # an event this projection has nothing to say about
        try:
            handler(self, record, event)
        except Exception as exc:  # noqa: BLE001 - never crash on input
            self.skip(record, f"error {record.envelope.type}: {exc.__class__.__name__}")

    def skip(self, record: Record, reason: str) -> None:
        """Record that ``record`` was not applied, and why (once per event id)."""
        eid = record.envelope.event_id
        if eid not in self._skipped.by_event:
            self._skipped.add(eid, reason)
            self.skipped_changed()

    def skipped_changed(self) -> None:
        """Called when the skip record changed (a projection marks its state to be written)."""
