"""Canonical JSON encoding of envelopes, and building envelopes from typed payloads.

Canonical form: UTF-8 JSON, object keys sorted at every level, no insignificant whitespace,
floats in shortest round-trip form. Encoding the same envelope always gives the same bytes, so
``kcat``/``jq`` can read a topic and export -> import -> export is byte-for-byte stable.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .catalogue import EventPayload, payload_to_builtins
from .envelope import ENVELOPE_FIELDS, Envelope, encode_envelope, new_event_id, utc_now
from .errors import MalformedEvent

__all__ = ["encode_envelope", "decode_envelope", "envelope_from_builtins", "make_envelope"]

_decoder = msgspec.json.Decoder(Envelope)
_any_decoder = msgspec.json.Decoder()


def decode_envelope(data: bytes | str) -> Envelope:
    """Parse canonical (or any valid) JSON into an :class:`Envelope`.

    Raises :class:`MalformedEvent` naming what is wrong: not JSON, not an object, a missing or
    mistyped envelope field.
    """
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError is a subclass
        # slow path, only for bad input: say whether it is not JSON or JSON of the wrong shape
        try:
            obj = _any_decoder.decode(data)
        except msgspec.DecodeError:
            raise MalformedEvent(f"not valid JSON: {exc}") from None
        return envelope_from_builtins(obj)


def envelope_from_builtins(obj: Any) -> Envelope:
    """Build an :class:`Envelope` from a decoded JSON object, with clear errors."""
    if not isinstance(obj, dict):
        raise MalformedEvent(f"envelope must be a JSON object, got {type(obj).__name__}")
    missing = [f for f in ENVELOPE_FIELDS if f not in obj and f != "causation_id"]
    if missing:
        raise MalformedEvent(f"envelope lacks field(s): {', '.join(missing)}")
    try:
        return msgspec.convert(obj, Envelope)
    except msgspec.ValidationError as exc:
        raise MalformedEvent(f"invalid envelope: {exc}") from None


def make_envelope(
    payload: EventPayload,
    *,
    run_id: str,
    producer: str,
    causation_id: str | None = None,
    key: str | None = None,
    event_id: str | None = None,
    occurred_at: str | None = None,
) -> Envelope:
    """Wrap a typed payload in a new envelope.

    The key defaults to the payload's environment id (``KEY_FIELD``), else the run id.
    """
    if key is None:
        key = getattr(payload, payload.KEY_FIELD) if payload.KEY_FIELD else run_id
    return Envelope(
        event_id=event_id or new_event_id(),
        type=payload.TYPE,
        schema_version=payload.VERSION,
        run_id=run_id,
        key=key,
        occurred_at=occurred_at or utc_now(),
        producer=producer,
        causation_id=causation_id,
        payload=payload_to_builtins(payload),
    )
