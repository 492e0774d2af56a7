"""Batched sampling from a causal LM with the behaviour log-prob of every sampled token.

:class:`BatchSampler` is the generation engine of :class:`TransformersPolicy` (and of
``bench/gpu.py``). It owns one idea: turn a batch of left-padded prompts into completions plus
the log-probability, under the distribution actually sampled from, of each sampled token.

How it is fast (on GPU):

* **static KV cache** (``transformers.StaticCache``, reused between calls of the same shape, so
  tensors keep their addresses) and fixed-shape decode steps: the cache length is rounded up to a
  bucket, the attention mask is a prebuilt boolean 4D mask, positions are tensors; nothing in the
  step depends on Python-side values that change per token;
* the decode step can be **compiled** (``torch.compile``, mode ``reduce-overhead`` = CUDA graphs
  on GPU); prefill runs eagerly once with SDPA;
* decode attention groups query heads over their shared KV head instead of copying the cache
  per step (:mod:`.attention`, implementation ``spade_gqa``, on by default for SDPA models);
* sampling is the exponential race (``argmax(log p - log E)``, ``E ~ Exp(1)``), which is exact,
  needs no sort and no ``multinomial``; top-p filtering sorts only when ``top_p < 1``;
* finished rows keep decoding pad tokens (no shape change) and the loop stops early when all rows
  are done (checked every ``check_every`` steps, the only host sync in the loop).

Log-probs: with temperature ``T > 0`` the recorded log-prob is ``log_softmax(logits / T)`` of
the sampled token (after top-p renormalisation when ``top_p < 1``); with ``T == 0`` (greedy) it
is ``log_softmax(logits)``. The trainer scores tokens with the same temperature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

__all__ = ["Completion", "BatchSampler", "sample_tokens"]


@dataclass(frozen=True)
class Completion:
    """One sampled completion: token ids, their behaviour log-probs, and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (an EOS token) or "length"


def sample_tokens(
    logits: torch.Tensor, temperature: float, top_p: float = 1.0, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of ``logits`` (B, V); return ``(tokens, logprobs)`` (B,), (B,).

    The log-prob is that of the distribution sampled from (temperature-scaled, top-p truncated).
    """
    logits = logits.float()
    if temperature <= 0:
        logp = torch.log_softmax(logits, dim=-1)
        tok = logits.argmax(dim=-1)
        return tok, logp.gather(-1, tok[:, None])[:, 0]
    scaled = logits / temperature
    if top_p < 1.0:
        sorted_logits, idx = scaled.sort(dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop tokens whose preceding mass already reaches top_p (always keep the first)
        drop = (probs.cumsum(-1) - probs) >= top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        scaled = torch.full_like(scaled, float("-inf")).scatter(-1, idx, sorted_logits)
    logp = torch.log_softmax(scaled, dim=-1)
    noise = torch.empty_like(logp).exponential_(generator=generator)
    tok = (logp - noise.log()).argmax(dim=-1)
    return tok, logp.gather(-1, tok[:, None])[:, 0]


class BatchSampler:
    """Samples completions for batches of token-id prompts from ``model``.

    Args:
        model: a transformers causal LM using SDPA attention.
        pad_id: token used for left padding and for rows that already finished.
        eos_ids: token ids that end a completion.
        static_cache: use a reused ``StaticCache`` (fixed shapes) instead of a dynamic cache.
        compile: compile the decode step with ``torch.compile`` (``compile_mode``, default
            ``reduce-overhead``: CUDA graphs on GPU). Needs ``static_cache``.
        bucket: cache lengths are rounded up to a multiple of this (fewer shapes to compile).
    """

    def __init__(
        self,
        model: Any,
        *,
        pad_id: int,
        eos_ids: Sequence[int] = (),
        static_cache: bool = True,
        compile: bool = False,
        compile_mode: str | None = "reduce-overhead",
        bucket: int = 64,
        check_every: int = 8,
        gqa_decode: bool = True,
    ):
        self.model = model
        self.pad_id = int(pad_id)
        self.eos_ids = sorted({int(e) for e in eos_ids})
        self.static_cache = static_cache or compile
        self.compile = compile
        self.compile_mode = compile_mode
        self.bucket = max(1, bucket)
        self.check_every = max(1, check_every)
        self.gqa_decode = gqa_decode
        self._cache: Any = None
        self._cache_key: tuple | None = None
        self._compiled: Any = None

    # -- internals -----------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def invalidate(self) -> None:
        """Forget cached graphs/caches (call after replacing the model's weights tensors)."""
        self._cache = None
        self._cache_key = None
        self._compiled = None

    def _get_cache(self, batch: int, length: int) -> Any:
        from transformers import StaticCache

        dtype = next(self.model.parameters()).dtype
        key = (batch, length, dtype, self.device)
        if self._cache is None or self._cache_key != key:
            self._cache = StaticCache(config=self.model.config, max_cache_len=length)
            self._cache_key = key
        else:
            self._cache.reset()
        return self._cache

    def _decode_step(self, tok: torch.Tensor, pos: torch.Tensor, cur: torch.Tensor, keep: torch.Tensor, cache: Any) -> torch.Tensor:
        # boolean 4D mask (B, 1, 1, L): key j visible if it is not padding and not in the future
        ar = torch.arange(keep.shape[1], device=keep.device)
        mask = (keep & (ar <= cur))[:, None, None, :]
        out = self.model(input_ids=tok, position_ids=pos, attention_mask=mask, past_key_values=cache, use_cache=True)
        return out.logits[:, -1, :]

    def _step_fn(self) -> Any:
        if not self.compile:
            return self._decode_step
        if self._compiled is None:
            self._compiled = torch.compile(self._decode_step, mode=self.compile_mode, fullgraph=False, dynamic=False)
        return self._compiled

    # -- public --------------------------------------------------------------------------------

    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[Completion]:
        """One completion per prompt (prompts are token-id lists; they are left-padded here)."""
        config = self.model.config
        previous = getattr(config, "_attn_implementation", None)
        if self.gqa_decode and previous == "sdpa":
            from .attention import register

            config._attn_implementation = register()
        try:
            return self._sample(prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, generator=generator)
        finally:
            if config._attn_implementation != previous:
                config._attn_implementation = previous

    @torch.inference_mode()
    def _sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> list[Completion]:
        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("empty prompt: every prompt needs at least one token")
        device = self.device
        B = len(prompts)
        P = max(len(p) for p in prompts)
        n_new = int(max_new_tokens)
        L = -(-(P + n_new) // self.bucket) * self.bucket
        ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        keep = torch.zeros((B, L), dtype=torch.bool)
        for i, p in enumerate(prompts):
            ids[i, P - len(p):] = torch.tensor(list(p), dtype=torch.long)
            keep[i, P - len(p):] = True
        ids, keep = ids.to(device), keep.to(device)
        pos = (keep[:, :P].long().cumsum(-1) - 1).clamp(min=0)
        last_pos = pos[:, -1]

        ar = torch.arange(L, device=device)
        q = torch.arange(P, device=device)
        causal = ar[None, :] <= q[:, None]  # (P, L)
        prefill_mask = (causal[None] & keep[:, None, :]) | (ar[None, :] == q[:, None])[None]
        if self.static_cache:
            cache = self._get_cache(B, L)
            mask4 = prefill_mask[:, None]
        else:
            from transformers import DynamicCache

            cache = DynamicCache(config=self.model.config)
            mask4 = prefill_mask[:, None, :, :P]
        out = self.model(
            input_ids=ids, position_ids=pos, attention_mask=mask4, past_key_values=cache, use_cache=True, logits_to_keep=1
        )
        logits = out.logits[:, -1, :]
        del out

        toks = torch.full((B, n_new), self.pad_id, dtype=torch.long, device=device)
        lps = torch.zeros((B, n_new), dtype=torch.float32, device=device)
        done = torch.zeros(B, dtype=torch.bool, device=device)
        n_out = torch.zeros(B, dtype=torch.long, device=device)
        eos = torch.tensor(self.eos_ids or [-1], dtype=torch.long, device=device)
        step = self._step_fn()
        steps = 0
        for t in range(n_new):
            tok, lp = sample_tokens(logits, temperature, top_p, generator)
            tok = torch.where(done, torch.full_like(tok, self.pad_id), tok)
            toks[:, t] = tok
            lps[:, t] = lp
            n_out += (~done).long()
            done = done | torch.isin(tok, eos)
            steps = t + 1
            if t == n_new - 1:
                break
            if (t + 1) % self.check_every == 0 and bool(done.all()):
                break
            cur_pos = (last_pos + 1 + t)[:, None]
            if self.static_cache:
                if self.compile:
                    torch.compiler.cudagraph_mark_step_begin()
                cur = torch.tensor(P + t, device=device)
                logits = step(tok[:, None], cur_pos, cur, keep, cache)
            else:
                mask = keep[:, None, None, : P + t + 1]
                logits = self.model(
                    input_ids=tok[:, None], position_ids=cur_pos, attention_mask=mask, past_key_values=cache, use_cache=True
                ).logits[:, -1, :]
        toks_l = toks[:, :steps].tolist()
        lps_l = lps[:, :steps].tolist()
        n_l = n_out.tolist()
        done_l = done.tolist()
        return [
            Completion(token_ids=toks_l[i][: n_l[i]], logprobs=lps_l[i][: n_l[i]], finish_reason="stop" if done_l[i] else "length")
            for i in range(B)
        ]
