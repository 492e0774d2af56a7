"""Scoring: the log-probability a causal LM gives each next token of a batch of sequences.

``token_logprobs(model, input_ids)[b, t]`` is ``log p(input_ids[b, t+1] | input_ids[b, :t+1])``
under ``softmax(logits / temperature)``, the same distribution the sampler records behaviour
log-probs from; ``temperature`` is one number, or a (B,) tensor of one per sequence (rows of
different roles sampled at different temperatures). With ``chunk > 0`` the vocabulary projection runs over ``chunk`` positions at a
time under activation checkpointing, so the (tokens x vocab) logits are never all in memory at
once (what makes long sequences with 150k-token vocabularies fit in large micro-batches).
With ``compiled=True`` each chunk's log-softmax runs through ``torch.compile``: one fused pass over
the bf16 logits with fp32 accumulation, forward and backward, instead of an fp32 copy of the
logits and a separate pass per operation. Uncompiled, that vocabulary-side work took 60% of a
training step on the H200 benchmark (bench/results/gpu-2026-12-04.json).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

__all__ = ["token_logprobs", "split_lm"]


def split_lm(model: Any) -> tuple[Any, Any] | None:
    """``(body, lm_head)`` of a transformers causal LM (through peft/DeepSpeed wrappers), or None."""
    inner = getattr(model, "module", model) if type(model).__name__ == "DeepSpeedEngine" else model
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    body = getattr(inner, "model", None)
    head = getattr(inner, "lm_head", None)
    if body is None or head is None:
        return None
    return body, head


def _scaled(logits: torch.Tensor, temperature: float | torch.Tensor) -> torch.Tensor:
    """``logits / temperature`` (per row for a tensor); a temperature <= 0 (greedy) leaves them as they are."""
    if isinstance(temperature, torch.Tensor):
        t = temperature.to(device=logits.device, dtype=logits.dtype)
        t = torch.where(t > 0, t, torch.ones_like(t))
        return logits / t.view(-1, *([1] * (logits.dim() - 1)))
    if temperature > 0 and temperature != 1.0:
        return logits / temperature
    return logits


def _gather_logprobs(hidden: torch.Tensor, head: Any, targets: torch.Tensor, temperature: float | torch.Tensor) -> torch.Tensor:
    logits = _scaled(head(hidden).float(), temperature)
    # log_softmax(x)[y] = x[y] - logsumexp(x): avoids materialising the full log_softmax
    return logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)


@functools.cache
def _compiled_gather() -> Callable[..., torch.Tensor]:
    """:func:`_gather_logprobs` through ``torch.compile``, built once (shapes become dynamic after
    the first recompile, since chunk tails and sequence lengths vary)."""
    return torch.compile(_gather_logprobs)


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    temperature: float | torch.Tensor = 1.0,
    chunk: int = 0,
    compiled: bool = False,
) -> torch.Tensor:
    """(B, T-1) log-probs of ``input_ids[:, 1:]``; padding positions hold garbage (mask them).

    Pass ``attention_mask=None`` when nothing is padded: SDPA then takes its causal (flash) path.
    ``compiled``: score through the compiled chunk scorer (see the module docstring).
    """
    targets = input_ids[:, 1:]
    parts = split_lm(model)
    if parts is None:
        logits = _scaled(model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1].float(), temperature)
        return logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)
    body, head = parts
    hidden = body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state[:, :-1]
    gather = _compiled_gather() if compiled else _gather_logprobs
    if chunk <= 0 or hidden.shape[1] <= chunk:
        return gather(hidden, head, targets, temperature)
    outs = []
    for start in range(0, hidden.shape[1], chunk):
        h = hidden[:, start : start + chunk]
        y = targets[:, start : start + chunk]
        if torch.is_grad_enabled():
            outs.append(checkpoint(gather, h, head, y, temperature, use_reentrant=False))
        else:
            outs.append(gather(h, head, y, temperature))
    return torch.cat(outs, dim=1)
