"""How large an event may be, everywhere: what the engine writes, what a backend stores, what an
import accepts.

Events are small by construction (:mod:`spade_engine.engine.offload`): the engine moves long
observations and actions, and token ids, into content-addressed blobs before it appends, so no
event it writes is over :data:`ENGINE_EVENT_BYTES`. Every backend and tool accepts far more,
:data:`MAX_EVENT_BYTES`, so that a run written by an older engine (whose plays could hold tens of
megabytes) still moves between backends and through export and import:

* the Kafka backend creates (and on open raises) its topics' ``max.message.bytes`` to it and its
  producer's ``max_request_size`` is set to match;
* ``spade-engine events import`` accepts lines up to it by default (``--max-event-bytes``).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ENGINE_EVENT_BYTES",
    "MAX_EVENT_BYTES",
    "KAFKA_REQUEST_BYTES",
    "INLINE_TEXT_CHARS",
    "INLINE_TOKENS",
    "payload_bytes",
]

#: the most an event the engine writes holds (its payload as JSON): large data goes to blobs first;
#: under a broker's default record limit (about 1 MiB) with its envelope, so even a topic whose
#: limit could not be raised takes it
ENGINE_EVENT_BYTES = 768 * 1024
#: the most any backend stores and an import accepts (older engines wrote larger plays)
MAX_EVENT_BYTES = 64 * 1024 * 1024
#: the Kafka producer's request size: one event of MAX_EVENT_BYTES plus its envelope and headers
KAFKA_REQUEST_BYTES = MAX_EVENT_BYTES + 1024 * 1024
#: an observation or action longer than this is kept as a blob (its start stays inline)
INLINE_TEXT_CHARS = 4_000
#: a generation with more token ids than this (prompt and completion together) is kept as a blob
INLINE_TOKENS = 4_096


def payload_bytes(payload: Any) -> int:
    """The size of a payload as the JSON an envelope holds (what the size limits measure)."""
    return len(msgspec.json.encode(payload))
