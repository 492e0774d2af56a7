"""Novelty and copies: whether a valid proposal is new enough to accept.

Two tests, both recorded on ``EnvironmentValidated``: embedding novelty against the novelty memory
and the earlier accepted proposals of the same batch (``memory.novelty_threshold``,
:func:`judge_novelty`), and a code-copy check against the run's seed archive
(``memory.copy_threshold``, :func:`copied_seed`): small models copy the seeds their prompt shows
with a new class name, which the embedding alone lets through. A proposal that fails either is a
``duplicate`` and goes back to the designer.
"""

from __future__ import annotations

import ast
import difflib

import msgspec
import numpy as np

from ...archive.novelty import novelty_of
from ...events.catalogue import EnvironmentProposed, EnvironmentValidated, ValidationCheck
from ...sandbox.scaffold import strip as strip_scaffold
from ..seeds import seed_env_id
from .context import StageContext

__all__ = ["judge_novelty", "code_lines", "copied_share", "copied_seed"]


def judge_novelty(
    ctx: StageContext,
    proposed: EnvironmentProposed,
    vec: np.ndarray,
    verdict: EnvironmentValidated,
    batch_vecs: list[tuple[str, np.ndarray]],
) -> EnvironmentValidated:
    """``verdict`` (the sandbox's, on a valid proposal) completed with whether ``proposed``,
    embedded as ``vec``, is novel and no copy of a seed, and so accepted; an accepted one joins
    ``batch_vecs``, the batch's accepted embeddings so far. Needs ``ctx.memory``."""
    assert ctx.memory is not None
    novelty, nearest = ctx.memory.novelty(vec)
    for other_id, other in batch_vecs:  # earlier accepted proposals of this batch
        n = novelty_of(float(np.dot(vec, other)))
        if n < novelty:
            novelty, nearest = n, other_id
    threshold = ctx.cfg.memory.novelty_threshold
    novel = bool(novelty >= threshold)
    copy_of, share = copied_seed(ctx, proposed) if novel else (None, 0.0)
    judged = msgspec.structs.replace(
        verdict,
        novel=novel and copy_of is None,
        novelty=float(novelty),
        novelty_threshold=threshold,
        nearest_env_id=copy_of if copy_of is not None else nearest,
        embedding_model=ctx.embedding_model or None,
        embedding_b64=ctx.encode_embedding(vec) if ctx.encode_embedding else None,
        accepted=novel and copy_of is None,
    )
    if judged.accepted:
        batch_vecs.append((proposed.env_id, vec))
        return judged
    if copy_of is not None:
        why = f"the code repeats {share:.0%} of the lines of {copy_of} (copy threshold {ctx.cfg.memory.copy_threshold:g})"
    else:
        why = f"novelty {novelty:.3f} is below the threshold {threshold:g}: nearest environment {nearest}"
    return msgspec.structs.replace(
        judged, error_kind="duplicate", failed_check="novelty",
        checks=[*judged.checks, ValidationCheck(name="novelty", passed=False, detail=why)],
    )


def code_lines(code: str) -> list[str]:
    """The lines of ``code`` that carry its logic: stripped, without blank lines, comments and
    docstrings (a copy that only renames the class or drops the docstring keeps them), and
    without an inlined scaffold base class (every scaffolded game carries the same one)."""
    code = strip_scaffold(code)
    doc_lines: set[int] = set()
    try:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            first = body[0] if isinstance(body, list) and body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    except (SyntaxError, ValueError):
        doc_lines = set()
    out = []
    for n, line in enumerate(code.splitlines(), 1):
        t = line.strip()
        if t and not t.startswith("#") and n not in doc_lines and not t.startswith("class "):
            out.append(t)
    return out


def copied_share(code: str, other: str) -> float:
    """The share of ``code``'s logic lines that appear, in order, in ``other`` (0..1)."""
    a, b = code_lines(code), code_lines(other)
    if not a or not b:
        return 0.0
    matched = sum(block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return matched / len(a)


def copied_seed(ctx: StageContext, proposed: EnvironmentProposed) -> tuple[str | None, float]:
    """The seed environment ``proposed`` is a code copy of (``memory.copy_threshold`` of its logic
    lines), and the share. Seeds are shown complete in designer prompts, so small models copy
    them with a new class name; the embedding alone lets such copies through. (Archived
    environments are compared by embedding only: the simulation's template instances share
    most of their lines by design.)"""
    limit = ctx.cfg.memory.copy_threshold
    if limit <= 0 or not ctx.seed_envs or proposed.designer.startswith("seed:"):
        return None, 0.0
    best: tuple[str | None, float] = (None, 0.0)
    for i, seed in enumerate(ctx.seed_envs):
        share = copied_share(proposed.code, seed.code)
        if share > best[1]:
            best = (seed_env_id(ctx.run_id, i), share)
    return best if best[1] >= limit else (None, best[1])

