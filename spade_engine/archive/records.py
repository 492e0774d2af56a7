"""Typed decoding of log records for the projections, with the reason a record is skipped.

Every projection decodes the same record; the runner applies one record to all projections in
turn, so a one-slot cache means each record's payload is decoded once. Decoding never raises:
it returns ``(event, None)`` or ``(None, reason)`` where ``reason`` is what ``skipped`` counts.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..events.catalogue import EVENT_TYPES, RolloutCompleted, upcast
from ..events.errors import EventError, FutureSchemaVersion, MalformedEvent, UnknownEventType
from ..events.log import Record

__all__ = ["decode_record", "Skipped", "RolloutSummary", "irrelevant"]

_last: tuple[int, str, bool, Any, str | None] | None = None


def decode_record(record: Record, *, summary_plays: bool = True) -> tuple[Any, str | None]:
    """The record's typed payload, or ``None`` and why it cannot be applied. A play
    (``RolloutCompleted``) is decoded as its :class:`RolloutSummary` unless ``summary_plays`` is
    false (a reader that needs its turns: the trainer's batch assembler)."""
    global _last
    env = record.envelope
    cached = _last
    if cached is not None and cached[0] == id(record) and cached[1] == env.event_id and cached[2] == summary_plays:
        return cached[3], cached[4]
    event: Any = None
    reason: str | None = None
    if summary_plays and env.type == "RolloutCompleted" and 1 <= env.schema_version <= RolloutCompleted.VERSION:
        # the most frequent and largest event: projections need its summary, not its turns
        # (older versions are upcast first, so every version gives the same summary type)
        try:
            payload = env.payload if env.schema_version == RolloutCompleted.VERSION else upcast(
                env.type, env.schema_version, env.payload
            )
            event = _rollout_decoder(payload)
        except (msgspec.ValidationError, TypeError, ValueError, EventError):
            reason = "malformed RolloutCompleted"
    elif env.type not in EVENT_TYPES:
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
    _last = (id(record), env.event_id, summary_plays, event, reason)
    return event, reason


def irrelevant(record: Record, wanted: frozenset[str]) -> bool:
    """True for a well-known, current-version event type outside ``wanted``: a projection that
    does not use it may ignore it without decoding (unknown types and versions are still
    decoded, so they are counted as skipped)."""
    env = record.envelope
    cls = EVENT_TYPES.get(env.type)
    return env.type not in wanted and cls is not None and env.schema_version == cls.VERSION


class RolloutSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of :class:`RolloutCompleted` the projections use (validated by msgspec);
    ``turns`` is the number of turns, not their content."""

    env_id: str
    play_id: str
    hinted: bool
    seed: int
    policy_version: str
    episode_reward: float
    turns: int = 0
    terminated: bool = False
    truncated: bool = False
    step_timeout: bool = False
    error: str | None = None
    seconds: float = 0.0
    index: int = 0
    round: int = 0


def _rollout_decoder(payload: dict[str, Any]) -> RolloutSummary:
    turns = payload.get("turns", [])
    if not isinstance(turns, list):
        raise TypeError("turns is not a list")
    return msgspec.convert({**payload, "turns": len(turns)}, RolloutSummary, strict=False)


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
