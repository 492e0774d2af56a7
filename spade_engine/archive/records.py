"""Typed decoding of log records for the projections, with the reason a record is skipped.

Every projection decodes the same record; the runner applies one record to all projections in
turn, so a one-slot cache means each record's payload is decoded once. Decoding never raises:
it returns ``(event, None)`` or ``(None, reason)`` where ``reason`` is what ``skipped`` counts.
"""

from __future__ import annotations

from typing import Any

from ..events.catalogue import EVENT_TYPES
from ..events.errors import EventError, FutureSchemaVersion, MalformedEvent, UnknownEventType
from ..events.log import Record

__all__ = ["decode_record", "Skipped"]

_last: tuple[int, str, Any, str | None] | None = None


def decode_record(record: Record) -> tuple[Any, str | None]:
    """The record's typed payload, or ``None`` and why it cannot be applied."""
    global _last
    env = record.envelope
    cached = _last
    if cached is not None and cached[0] == id(record) and cached[1] == env.event_id:
        return cached[2], cached[3]
    event: Any = None
    reason: str | None = None
    if env.type not in EVENT_TYPES:
        reason = f"unknown type {env.type}"
    else:
        try:
            event = env.event()
        except UnknownEventType:
            reason = f"unknown type {env.type}"
        except FutureSchemaVersion:
            reason = f"future version {env.type} v{env.schema_version}"
        except (MalformedEvent, EventError) as exc:
            reason = f"malformed {env.type}"
            del exc
        except Exception:  # noqa: BLE001 - a projection never crashes on input
            reason = f"malformed {env.type}"
    _last = (id(record), env.event_id, event, reason)
    return event, reason


class Skipped:
    """Records a projection did not apply: event id -> reason (idempotent: a re-delivered bad
    event is counted once). ``counts`` groups them by reason."""

    def __init__(self, by_event: dict[str, str] | None = None):
        self.by_event: dict[str, str] = dict(by_event or {})

    def add(self, event_id: str, reason: str) -> None:
        self.by_event[event_id] = reason

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for reason in self.by_event.values():
            out[reason] = out.get(reason, 0) + 1
        return dict(sorted(out.items()))

    def total(self) -> int:
        return len(self.by_event)
