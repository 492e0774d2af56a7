"""The validate stage: the verdict (``EnvironmentValidated``) on proposed environments.

A completion the token limit or the context window cut is rejected first (error kind
``truncated``), and one without code (``no_code``); the rest run through the sandboxed validator
at once, one per sandbox worker (:func:`validation_seed` draws their reset seeds and probes from
the run seed and the env key); the valid ones are embedded in one batched call and judged for
novelty and copies (:mod:`.novelty_copies`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from ...events.catalogue import EnvironmentProposed, EnvironmentValidated, ValidationCheck
from ..at_once import at_once
from ..bounds import bound_validated
from ..designer import novelty_text
from ..seeds import derive_seed, env_key
from .context import StageContext
from .novelty_copies import judge_novelty

if TYPE_CHECKING:
    from ...sandbox.validator import ValidationReport

__all__ = ["validate", "validate_batch", "validation_seed"]


def _truncated(proposed: EnvironmentProposed) -> EnvironmentValidated | None:
    """The verdict on a completion the token limit or the context window cut (never validated)."""
    g = proposed.generation
    if g is None or g.finish_reason not in ("length", "context"):
        return None
    # the token ids may be offloaded to a blob (``g.ref``): then the count is not at hand here
    n = len(g.completion_token_ids)
    known = bool(n) or g.ref is None
    why = (
        f"the completion reached its token limit{f' after {n} tokens' if known else ''} (finish reason length)"
        if g.finish_reason == "length"
        else f"the prompt and the completion{f' ({n} tokens)' if known else ''} filled the model's context window "
        "(finish reason context)"
    )
    return EnvironmentValidated(
        env_id=proposed.env_id, valid=False, error_kind="truncated", failed_check="generation",
        checks=[ValidationCheck(name="generation", passed=False, detail=why + ", so the code is incomplete")],
    )


def validate(ctx: StageContext, proposed: EnvironmentProposed) -> EnvironmentValidated:
    """Validate one proposal (see :func:`validate_batch`)."""
    return validate_batch(ctx, [proposed])[0]


def validate_batch(ctx: StageContext, proposals: Sequence[EnvironmentProposed]) -> list[EnvironmentValidated]:
    """Verdicts on ``proposals``, in order: truncated completions and completions without code are
    rejected first; the rest run in the sandbox at once (one validation per sandbox worker); the
    valid ones are embedded in one batched call and judged for novelty against the memory and the
    earlier proposals of the batch (so two near-copies in one batch are not both accepted)."""
    out: list[EnvironmentValidated | None] = [None] * len(proposals)
    todo: list[int] = []
    for i, p in enumerate(proposals):
        cut = _truncated(p)
        if cut is not None:
            out[i] = msgspec.structs.replace(cut, sandbox_layers=dict(ctx.sandbox_layers))
        elif not p.code.strip():
            out[i] = EnvironmentValidated(
                env_id=p.env_id,
                valid=False,
                error_kind="no_code",
                failed_check="extract",
                checks=[ValidationCheck(name="extract", passed=False, detail="the completion has no Python code block defining a class")],
                sandbox_layers=ctx.sandbox_layers,
            )
        else:
            todo.append(i)
    if todo:
        ctx.activity(f"validating {len(todo)} environment(s) in the sandbox")
    reports = _sandbox_reports(ctx, [(proposals[i].code, validation_seed(ctx.seed, proposals[i].env_id)) for i in todo])
    # the sandbox's verdict, bounded; not accepted until novelty says so
    checked = {i: bound_validated(EnvironmentValidated(env_id=proposals[i].env_id, **report.payload_fields()))
               for i, report in zip(todo, reports)}
    valid = [i for i in todo if checked[i].valid]
    vecs = ctx.embed_many([novelty_text(proposals[i].code) for i in valid]) if valid else None
    batch_vecs: list[tuple[str, np.ndarray]] = []
    for i in todo:
        verdict = checked[i]
        if not verdict.valid:
            out[i] = verdict
        elif vecs is None or ctx.memory is None:
            out[i] = msgspec.structs.replace(verdict, accepted=True, novel=None)
        else:
            out[i] = judge_novelty(ctx, proposals[i], vecs[valid.index(i)], verdict, batch_vecs)
    return [v for v in out if v is not None]


def _sandbox_reports(ctx: StageContext, jobs: list[tuple[str, int]]) -> list[ValidationReport]:
    """Validator reports for ``(code, validation seed)`` jobs, run concurrently on the sandbox
    pool's workers."""
    if not jobs:
        return []
    validator = ctx.validator
    if validator is None:
        raise RuntimeError("validating runs environments in the sandbox, and the stage context has no validator")
    t0 = time.perf_counter()
    try:
        return at_once([functools.partial(validator.validate, code, seed=seed) for code, seed in jobs], ctx.cfg.sandbox.workers)
    finally:
        ctx.timings.sandbox += time.perf_counter() - t0


def validation_seed(seed: int, env_id: str) -> int:
    """The seed the validator draws an environment's reset seeds and probe actions from."""
    return derive_seed(seed, env_key(env_id), "validate")
