"""A grouped-query attention for decoding that never copies the KV cache.

With an explicit attention mask, transformers' SDPA path expands the key/value heads to the query
heads (``repeat_kv``) on every call: during decoding that copies the whole cache of every layer
once per token, which dominates a step at large batch. :func:`gqa_attention` is registered as
attention implementation ``"spade_gqa"``: for a single query position it computes the same
attention with the query heads grouped over their shared KV head (two batched matmuls on the
cache as stored); for longer queries (prefill, training) it defers to the SDPA implementation.
A mask shorter than the cache (the sampler's, uncompiled) restricts both paths to the first
``mask.shape[-1]`` cache positions, so attention costs what the filled part of the cache needs.
:class:`~.decoding.BatchSampler` switches a model to it for the duration of sampling.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["GQA_IMPL", "gqa_attention", "register"]

GQA_IMPL = "spade_gqa"
_registered = False


def gqa_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """query (B, Hq, q, D), key/value (B, Hkv, L, D), mask (B, 1, q, L) bool or additive."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if attention_mask is not None and attention_mask.shape[-1] < key.shape[-2]:
        # the sampler passes a mask over the filled part of a static cache only: attend to that
        n = attention_mask.shape[-1]
        key, value = key[:, :, :n], value[:, :, :n]
    B, Hq, q_len, D = query.shape
    Hkv = key.shape[1]
    if q_len != 1 or Hq % Hkv != 0 or (dropout and module.training):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    G = Hq // Hkv
    scale = scaling if scaling is not None else D**-0.5
    q = query.reshape(B, Hkv, G, D)
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * scale  # (B, Hkv, G, L)
    if attention_mask is not None:
        m = attention_mask[:, :, -1, :][:, :, None, :]  # (B, 1, 1, L)
        if m.dtype == torch.bool:
            scores = scores.masked_fill(~m, float("-inf"))
        else:
            scores = scores + m.float()
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # (B, Hkv, G, D)
    return out.reshape(B, Hq, 1, D).transpose(1, 2).contiguous(), None


def register() -> str:
    """Register ``"spade_gqa"`` with transformers (attention and mask interfaces); idempotent."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(GQA_IMPL, gqa_attention)
        AttentionMaskInterface.register(GQA_IMPL, sdpa_mask)
        _registered = True
    return GQA_IMPL
