"""Events small by construction: large data of a stage output moves to content-addressed blobs
before the event is appended.

A play of an environment with 44 kB observations made a ``RolloutCompleted`` over Kafka's default
1 MiB; the append failed, and every resume failed at the same play. The design keeps large data
in blobs; :func:`fit_event` makes every event the engine writes at most
:data:`~spade_engine.events.sizes.ENGINE_EVENT_BYTES`:

* a ``Generation`` whose token ids (prompt and completion) are more than
  :data:`~spade_engine.events.sizes.INLINE_TOKENS` moves to a JSON blob (``Generation.ref``, with
  the same three lists; the trainer reads it back), in ``RolloutCompleted``,
  ``EnvironmentProposed`` and ``HintWritten``;
* in a ``RolloutCompleted``, an observation or action longer than
  :data:`~spade_engine.events.sizes.INLINE_TEXT_CHARS` moves to a text blob
  (``Turn.observation_ref``/``action_ref``); its start stays inline with the usual
  ``...[truncated N characters]`` marker, so dashboards and exports still show it;
* if the event is still over the limit (a play of thousands of turns), every generation moves
  to a blob and the inline starts get shorter, down to 200 characters; past that the text is
  only in the blobs, and a ``RolloutCompleted`` whose turns alone cannot fit (tens of thousands
  of turns) keeps the turns that fit, marks the play with an ``error`` saying so (its numbers,
  reward and end reason, stay as they were), and the run goes on.

Without a blob store (tests, tools that build an engine without a data directory) nothing can
move, so texts are cut (with the marker) and token ids dropped only when an event would be over
the limit. Numbers and flags never change: regret recomputed from the log is unaffected. The
blobs are written before the event that names them, so a reader never sees a reference to a blob
that is not there. Pure given its input and the store: the same play gives the same event.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec

from ..blobs import BlobStore
from ..events.catalogue import EnvironmentProposed, EventPayload, Generation, HintWritten, RolloutCompleted, Turn
from ..events.sizes import ENGINE_EVENT_BYTES, INLINE_TEXT_CHARS, INLINE_TOKENS, payload_bytes
from ..sandbox.limits import clip

__all__ = ["fit_event"]

log = logging.getLogger("spade_engine.engine")

_MIN_PREVIEW = 200


def _tokens(gen: Generation) -> int:
    return len(gen.prompt_token_ids) + len(gen.completion_token_ids) + len(gen.logprobs)


def _offload_generation(gen: Generation | None, blobs: BlobStore | None, *, always: bool = False) -> Generation | None:
    if gen is None or gen.ref is not None or blobs is None:
        return gen
    if not always and _tokens(gen) <= INLINE_TOKENS:
        return gen
    if _tokens(gen) == 0:
        return gen
    data = json.dumps(
        {"prompt_token_ids": list(gen.prompt_token_ids), "completion_token_ids": list(gen.completion_token_ids),
         "logprobs": list(gen.logprobs)},
        separators=(",", ":"),
    ).encode()
    ref = blobs.put_bytes(data, media_type="application/json")
    return msgspec.structs.replace(gen, prompt_token_ids=[], completion_token_ids=[], logprobs=[], ref=ref)


def _text_blob(text: str, blobs: BlobStore) -> Any:
    return blobs.put_bytes(text.encode("utf-8", "surrogatepass"), media_type="text/plain; charset=utf-8")


def _fit_turn(t: Turn, blobs: BlobStore | None, preview: int, *, all_generations: bool) -> Turn:
    changes: dict[str, Any] = {}
    gen = _offload_generation(t.generation, blobs, always=all_generations)
    if gen is not t.generation:
        changes["generation"] = gen
    for field, ref_field in (("observation", "observation_ref"), ("action", "action_ref")):
        text = getattr(t, field)
        if len(text) <= preview:
            continue
        if blobs is not None:
            if getattr(t, ref_field) is None:
                changes[ref_field] = _text_blob(text, blobs)
            changes[field] = clip(text, preview)
        elif preview < INLINE_TEXT_CHARS:  # no store: cut only when the event would be too large
            changes[field] = clip(text, preview)
    return msgspec.structs.replace(t, **changes) if changes else t


def _drop_tokens(t: Turn) -> Turn:
    g = t.generation
    if g is None or g.ref is not None or _tokens(g) == 0:
        return t
    return msgspec.structs.replace(t, generation=msgspec.structs.replace(g, prompt_token_ids=[], completion_token_ids=[], logprobs=[]))


def _fit_rollout(p: RolloutCompleted, blobs: BlobStore | None, limit: int) -> RolloutCompleted:
    turns = [_fit_turn(t, blobs, INLINE_TEXT_CHARS, all_generations=False) for t in p.turns]
    out = msgspec.structs.replace(p, turns=turns) if any(a is not b for a, b in zip(turns, p.turns)) else p
    if payload_bytes(out) <= limit:
        return out
    preview = INLINE_TEXT_CHARS
    while payload_bytes(out) > limit and preview > _MIN_PREVIEW:
        preview = max(_MIN_PREVIEW, preview // 2)
        turns = [_fit_turn(t, blobs, preview, all_generations=True) for t in out.turns]
        if blobs is None:
            turns = [_drop_tokens(t) for t in turns]
        out = msgspec.structs.replace(out, turns=turns)
    if payload_bytes(out) <= limit:
        return out
    turns = [_fit_turn(t, blobs, 0, all_generations=True) for t in out.turns]
    out = msgspec.structs.replace(out, turns=turns)
    if payload_bytes(out) <= limit:
        return out
    # the turns alone cannot fit: keep those that do, say so; numbers and the end reason stay
    total = len(out.turns)
    keep = total
    while keep > 0 and payload_bytes(msgspec.structs.replace(out, turns=out.turns[:keep])) > limit - 512:
        keep = keep * 3 // 4
    note = f"the play's {total} turns are too many to record; the first {keep} are kept"
    log.warning("%s: %s", p.play_id, note)
    error = f"{p.error}; {note}" if p.error else note
    return msgspec.structs.replace(out, turns=out.turns[:keep], error=error)


def _fit_generation_holder(p: Any, blobs: BlobStore | None, limit: int) -> Any:
    gen = _offload_generation(p.generation, blobs)
    out = msgspec.structs.replace(p, generation=gen) if gen is not p.generation else p
    if payload_bytes(out) <= limit:
        return out
    gen = _offload_generation(out.generation, blobs, always=True)
    if blobs is None and gen is not None:
        gen = msgspec.structs.replace(gen, prompt_token_ids=[], completion_token_ids=[], logprobs=[])
    out = msgspec.structs.replace(out, generation=gen)
    if isinstance(out, EnvironmentProposed):  # the designer's prompt is kept for audits only
        budget = max(1000, (limit - payload_bytes(msgspec.structs.replace(out, prompt=""))) // 6)
        if len(out.prompt) > budget:
            out = msgspec.structs.replace(out, prompt=clip(out.prompt, budget))
    return out


def fit_event(payload: EventPayload, blobs: BlobStore | None, *, limit: int = ENGINE_EVENT_BYTES) -> EventPayload:
    """``payload`` with its large data moved to ``blobs`` (see the module docstring); the same
    object when nothing had to move."""
    if isinstance(payload, RolloutCompleted):
        return _fit_rollout(payload, blobs, limit)
    if isinstance(payload, (EnvironmentProposed, HintWritten)):
        return _fit_generation_holder(payload, blobs, limit)
    return payload
