"""The designer's prompt: which complete example environments it shows, in which format, and how
much of them and of the reference document fits the model's context window.

The examples of a slot are drawn from the run seed (:func:`code_examples`): one shared by the
slot's designer batch (``loop.designer_batch``, :func:`designer_batch`), so a prefix cache reuses
it, then others drawn for the slot. :func:`fit_prompt` drops examples and cuts the document until
the prompt leaves room for the completion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...config import LoopConfig
from ...sandbox.scaffold import code_format
from ..corpus import truncate_tokens
from ..designer import CodeExample
from ..designer_formats import designer_format
from ..seeds import derive_seed, env_key
from .context import StageContext

__all__ = ["code_examples", "prompt_builder", "DEFAULT_DESIGNER_BATCH", "designer_batch", "fit_prompt"]


def code_examples(ctx: StageContext, pool: Sequence[CodeExample], *, skill: str, env_id: str, index: int) -> list[CodeExample]:
    """Complete environments for the prompt of slot ``index``: one shared by the slot's batch
    (so a prefix cache reuses it), then others drawn for the slot. None is of the slot's own
    skill while other skills have examples: a small model shown an environment of the skill it
    must write copies it (measured with the 0.5B: the same-skill example came back renamed)."""
    k = ctx.cfg.loop.prompt_examples
    fmt = ctx.cfg.loop.designer_format  # examples in the format the designer writes
    pool = [e for e in pool if code_format(e.code) == fmt] or list(pool)
    if not pool or k <= 0:
        return []
    other = [e for e in pool if e.skill != skill] or list(pool)
    batch = max(1, designer_batch(ctx.cfg.loop))
    shared = pool[derive_seed(ctx.seed, "examples", index // batch) % len(pool)]  # the same for the whole batch
    chosen = [shared] if shared in other else []
    rest = [e for e in other if e not in chosen]
    while len(chosen) < k and rest:
        chosen.append(rest.pop(derive_seed(ctx.seed, env_key(env_id), "example", len(chosen)) % len(rest)))
    return chosen


def prompt_builder(loop: LoopConfig) -> Callable[..., list[dict[str, str]]]:
    """The designer prompt of ``loop.designer_format``: a standalone environment, a TextGame game
    or a puzzle."""
    return designer_format(loop.designer_format).messages


DEFAULT_DESIGNER_BATCH = 4


def designer_batch(loop: LoopConfig) -> int:
    """``loop.designer_batch``, or its default, 4 (for the simulation too: a batch's proposals are
    validated together and embedded in one call, and its ids and seeds belong to slots, so the
    batch size changes no proposal)."""
    if loop.designer_batch is not None:
        return loop.designer_batch
    return DEFAULT_DESIGNER_BATCH


def fit_prompt(
    ctx: StageContext, build: Callable[[list[CodeExample], str], list[dict[str, str]]], examples: list[CodeExample], text: str
) -> tuple[list[dict[str, str]], list[CodeExample]]:
    """The designer messages with as many examples and as much of the document as the model's
    window allows after reserving room for the completion."""
    budget = ctx.cfg.loop.doc_token_budget
    doc = truncate_tokens(text, budget, ctx.tokenize)
    window, tok = ctx.context_window, ctx.tokenize
    if window is None or tok is None:
        return build(examples, doc), examples
    reserve = min(ctx.cfg.policy.generation.designer.max_new_tokens, window // 2)
    ex = list(examples)
    while True:
        bare = build(ex, "")
        overhead = sum(len(tok(m["content"])) for m in bare) + 32
        room = window - reserve - overhead
        if room >= min(budget, 64) or not ex:
            break
        ex.pop()
    doc = truncate_tokens(text, max(16, min(budget, room)), tok)
    return build(ex, doc), ex
