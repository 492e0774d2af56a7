"""JSON Schema export of the event catalogue: the envelope with each payload type.

``spade-engine events schema`` prints these; consumers in other languages validate against them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .catalogue import EVENT_TYPES
from .envelope import Envelope

__all__ = ["json_schemas"]


def json_schemas() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the envelope with each payload type, keyed by type name."""
    out: dict[str, Any] = {}
    for name, cls in EVENT_TYPES.items():
        payload_schema = msgspec.json.schema(cls)
        env_schema = msgspec.json.schema(Envelope)
        defs = {**env_schema.get("$defs", {}), **payload_schema.get("$defs", {})}
        envelope = defs.get("Envelope", {})
        props = dict(envelope.get("properties", {}))
        props["type"] = {"const": name}
        props["schema_version"] = {"const": cls.VERSION}
        props["payload"] = payload_schema.get("$ref") and {"$ref": payload_schema["$ref"]} or payload_schema
        defs.pop("Envelope", None)
        out[name] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": name,
            "description": (cls.__doc__ or "").strip().split("\n\n")[0],
            "type": "object",
            "properties": props,
            "required": envelope.get("required", []),
            "x-schema-version": cls.VERSION,
            "$defs": defs,
        }
    return out
