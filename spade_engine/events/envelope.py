"""The event envelope: identity, routing and provenance shared by every event.

An :class:`Envelope` is an immutable value. Its payload is kept exactly as recorded (a JSON
object decoded into builtins), so that events written by a newer version of the engine keep
fields this version does not know, and export/import round-trips byte for byte. The typed
payload is obtained with :meth:`Envelope.event`, which upcasts old schema versions.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from datetime import datetime, timezone
from typing import Any

import msgspec

__all__ = ["Envelope", "new_event_id", "utc_now", "ENVELOPE_FIELDS", "encode_envelope"]

ENVELOPE_FIELDS = (
    "event_id",
    "type",
    "schema_version",
    "run_id",
    "key",
    "occurred_at",
    "producer",
    "causation_id",
    "payload",
)

_uuid_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_event_id() -> str:
    """Return a UUIDv7 string (RFC 9562): time-ordered, so ids sort by creation time.

    Within one millisecond a 12-bit counter in ``rand_a`` keeps ids from one process monotonic.
    """
    global _last_ms, _seq
    with _uuid_lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq > 0xFFF:
                ms += 1
                _seq = 0
        else:
            _seq = secrets.randbits(8)
        _last_ms = ms
        seq = _seq
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def utc_now() -> str:
    """Current UTC time as ISO 8601 with microseconds and a ``Z`` suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    """One immutable event as stored in the log.

    Attributes:
        event_id: UUIDv7; appends are idempotent on it.
        type: event type name from the catalogue, e.g. ``"RolloutCompleted"``.
        schema_version: version of the payload schema the producer wrote.
        run_id: the run this event belongs to.
        key: ordering key: the environment id for environment events, else the run id.
        occurred_at: UTC timestamp, ISO 8601 with a ``Z`` suffix.
        producer: which process or role wrote it (``"engine"``, ``"validator-2"``...).
        causation_id: the event_id this event was caused by, if any.
        payload: the payload exactly as recorded (JSON builtins).
    """

    event_id: str
    type: str
    schema_version: int
    run_id: str
    key: str
    occurred_at: str
    producer: str
    causation_id: str | None = None
    payload: dict[str, Any]

    def event(self) -> Any:
        """Decode the payload into its typed event, upcasting old schema versions.

        Raises :class:`~spade_engine.events.errors.UnknownEventType` or
        :class:`~spade_engine.events.errors.FutureSchemaVersion` when this engine cannot read it.
        """
        from .catalogue import decode_payload

        return decode_payload(self.type, self.schema_version, self.payload)

    def to_json(self) -> bytes:
        """Canonical JSON bytes of the whole envelope (see :mod:`spade_engine.events.codec`)."""
        return encode_envelope(self)


_encoder = msgspec.json.Encoder(order="sorted")


def encode_envelope(envelope: Envelope) -> bytes:
    """Canonical JSON bytes of ``envelope`` (sorted keys, no whitespace)."""
    return _encoder.encode(envelope)
