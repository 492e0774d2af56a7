"""Batched sampling from a causal LM with the behaviour log-prob of every sampled token.

:class:`BatchSampler` is the generation engine of :class:`TransformersPolicy` (and of
``bench/gpu.py``). It owns one idea: turn a batch of left-padded prompts into completions plus
the log-probability, under the distribution actually sampled from, of each sampled token.

How it is fast:

* **static KV cache** (``transformers.StaticCache``, reused between calls of the same shape, so
  tensors keep their addresses) and fixed-shape decode steps: the cache length is rounded up to a
  bucket, the attention mask is a prebuilt boolean 4D mask, positions are tensors; nothing in the
  step depends on Python-side values that change per token;
* the decode step can be **compiled** (``torch.compile``, mode ``reduce-overhead`` = CUDA graphs
  on GPU); prefill runs eagerly with SDPA, **batched**: prompts that fit one prefill chunk and
  start with no cached prefix go through the model together (left-padded, up to
  ``prefill_batch_tokens`` padded tokens per forward) and land straight in the static cache, so
  256 prompts cost a few forwards, not 256 (with one forward per row, the H200 benchmark's
  rollout call took 9.2 s; batched, 1.2 s); a prompt with a cached prefix, or longer than a
  chunk, is prefilled on its own (reusing the prefix, in chunks);
* decode attention groups query heads over their shared KV head instead of copying the cache
  per step (:mod:`.attention`, implementation ``spade_gqa``, on by default for SDPA models);
* without compilation (CPU), attention reads only the filled part of the cache: prefill attends
  to the prompt, step ``t`` to the first ``P + t + 1`` positions rounded up to a bucket, never to
  the whole cache sized for the longest possible completion (a 16k-token designer limit would
  otherwise make every step and the prefill attend over 16k empty slots);
* sampling inverts the cumulative distribution at one uniform per row (exact; one random number
  per row, not per vocabulary entry); top-p looks at a partial selection of the most likely
  tokens on the CPU and sorts the vocabulary only when they do not reach ``top_p``;
* finished rows keep decoding pad tokens (no shape change) and the loop stops early when all rows
  are done (checked every ``check_every`` steps, the only host sync in the loop; stop strings and
  progress reports ride on the same sync).

Per-row randomness: with ``row_seeds`` the uniform of row ``i`` at step ``t`` is a counter-based
hash of ``(row_seeds[i], t)``, so a row's completion depends on its own seed only, not on which
other prompts share its batch or on the device's random state. Integer hashing is exact, so the
uniforms are the same on CPU and GPU.

Log-probs: with temperature ``T > 0`` the recorded log-prob is ``log_softmax(logits / T)`` of
the sampled token (after top-p renormalisation when ``top_p < 1``); with ``T == 0`` (greedy) it
is ``log_softmax(logits)``. The trainer scores tokens with the same temperature.

Finish reasons: ``stop`` (an EOS token, kept as the completion's last token), ``length`` (the
row's token limit), ``stop_string`` (``stop_check`` said the row's text contains a stop string;
the caller trims the text and tokens, see :func:`trim_at_stop`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import torch

if TYPE_CHECKING:  # pragma: no cover
    from transformers import Cache, StaticCache

__all__ = ["Completion", "BatchSampler", "sample_tokens", "hash_uniform", "trim_at_stop", "StepReport", "TOP_P_CANDIDATES"]


@dataclass(frozen=True)
class Completion:
    """One sampled completion: token ids, their behaviour log-probs, and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str  # "stop" (an EOS token), "length" or "stop_string"


@dataclass(frozen=True)
class StepReport:
    """Progress of one :meth:`BatchSampler.sample` call, reported every ``check_every`` steps."""

    step: int
    max_steps: int
    rows: int
    finished: int
    tokens: int
    prompt_tokens: int
    prefill_s: float
    elapsed_s: float


_M1 = -4658895280553007687  # 0xBF58476D1CE4E5B9 as int64
_M2 = -7723592293110705685  # 0x94D049BB133111EB as int64
_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64
_STEP = 0x2545F4914F6CDD1D


def _shr(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser on int64 (wrapping arithmetic)."""
    x = (x ^ _shr(x, 30)) * _M1
    x = (x ^ _shr(x, 27)) * _M2
    return x ^ _shr(x, 31)


def hash_uniform(row_keys: torch.Tensor) -> torch.Tensor:
    """One uniform in (0, 1) per row (float64, 53 bits) from per-row int64 keys: a pure function
    of the key, identical on every device."""
    x = _mix(row_keys * _GOLDEN + 1)
    return (_shr(x, 11).to(torch.float64) + 0.5) * (1.0 / (1 << 53))


#: candidates examined for top-p on the CPU before falling back to a full sort
TOP_P_CANDIDATES = 256


def sample_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    *,
    uniform: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of ``logits`` (B, V); return ``(tokens, logprobs)`` (B,), (B,).

    The log-prob is that of the distribution sampled from (temperature-scaled, top-p truncated).
    Sampling inverts the cumulative distribution at one uniform per row (``uniform``, see
    :func:`hash_uniform`; otherwise drawn from ``generator``): one uniform per row, not one
    random number per vocabulary entry. Top-p keeps the most likely tokens whose preceding mass is
    below ``top_p``; on the CPU it looks at the ``TOP_P_CANDIDATES`` most likely tokens (a partial
    selection, no sort of the vocabulary) and sorts everything only when they do not reach
    ``top_p``, which gives the same nucleus.
    """
    logits = logits.float()
    if temperature <= 0:
        tok = logits.argmax(dim=-1)
        return tok, torch.log_softmax(logits, dim=-1).gather(-1, tok[:, None])[:, 0]
    B, V = logits.shape
    logp = torch.log_softmax(logits / temperature if temperature != 1.0 else logits, dim=-1)
    if uniform is None:
        uniform = torch.rand(B, generator=generator, device=logits.device, dtype=torch.float64)
    u = uniform.to(device=logits.device, dtype=torch.float64)[:, None]
    if top_p >= 1.0:
        cdf = logp.double().exp().cumsum(-1)
        tok = torch.searchsorted(cdf, u * cdf[:, -1:]).clamp(max=V - 1)[:, 0]
        return tok, logp.gather(-1, tok[:, None])[:, 0]
    cand_lp = cand_idx = None
    if logits.device.type == "cpu" and V > TOP_P_CANDIDATES:
        top_lp, top_idx = logp.topk(TOP_P_CANDIDATES, dim=-1)  # sorted, most likely first
        if bool((top_lp.exp().sum(-1) >= top_p).all()):
            cand_lp, cand_idx = top_lp, top_idx
    if cand_lp is None:
        cand_lp, cand_idx = logp.sort(dim=-1, descending=True)
    probs = cand_lp.exp()
    # keep tokens whose preceding mass is below top_p (always the first)
    kept = probs * (((probs.cumsum(-1) - probs) < top_p).to(probs.dtype))
    cdf = kept.double().cumsum(-1)
    mass = cdf[:, -1:]
    pick = torch.searchsorted(cdf, u * mass).clamp(max=cand_lp.shape[-1] - 1)
    tok = cand_idx.gather(-1, pick)[:, 0]
    lp = cand_lp.gather(-1, pick)[:, 0] - mass[:, 0].log().to(cand_lp.dtype)
    return tok, lp


def trim_at_stop(token_ids: Sequence[int], decode: Callable[[list[int]], str], stops: Sequence[str]) -> tuple[int, str] | None:
    """Where a completion ends at its first stop string: ``(n_tokens, text)`` with the first
    ``n_tokens`` tokens (the one completing the stop string included) and the text before the
    stop string; ``None`` when no stop string occurs."""
    ids = list(token_ids)
    full = decode(ids)
    hits = [(full.find(s), s) for s in stops if s and s in full]
    if not hits:
        return None
    pos, stop = min(hits)
    end = pos + len(stop)
    lo, hi = 1, len(ids)
    while lo < hi:  # the shortest prefix whose text reaches the end of the stop string
        mid = (lo + hi) // 2
        if len(decode(ids[:mid])) >= end and stop in decode(ids[:mid])[pos:]:
            hi = mid
        else:
            lo = mid + 1
    return lo, full[:pos]


def padded_causal_mask(real: torch.Tensor) -> torch.Tensor:
    """The prefill attention mask ``(B, 1, n, n)`` of left-padded prompts (``real``: ``(B, n)``,
    True at prompt tokens): causal over the real tokens, and a padding query sees itself, so no
    row is empty (SDPA would give NaN)."""
    n = real.shape[1]
    q = torch.arange(n, device=real.device)
    causal = q[None, :] <= q[:, None]
    eye = torch.eye(n, dtype=torch.bool, device=real.device)
    return ((causal[None] & real[:, None, :]) | eye[None])[:, None]


@dataclass
class _DecodeRows:
    """The rows of one :meth:`BatchSampler.sample` call while it decodes: every row's output
    tokens, log-probs and counters (indexed by the original row), and the batch's ``active`` rows
    (original indices; finished rows are dropped from it when the batch is compacted) with their
    current token, cache mask, last prompt position and noise keys."""

    toks: torch.Tensor  # (B, n_new)
    lps: torch.Tensor  # (B, n_new)
    done: torch.Tensor  # (B,)
    hit_eos: torch.Tensor  # (B,)
    limit: torch.Tensor  # (B,)
    n_out: torch.Tensor  # (B,)
    eos: torch.Tensor
    pad_id: int
    active: torch.Tensor  # original row of each batch row
    keep: torch.Tensor  # (active, L)
    last_pos: torch.Tensor  # (active,)
    keys: torch.Tensor | None  # (active,) counter-based noise keys, or None
    tok: torch.Tensor | None = None  # (active,) the token fed next
    stopped: set[int] = field(default_factory=set)

    @classmethod
    def start(
        cls, limits: list[int], *, n_new: int, pad_id: int, eos_ids: Sequence[int], keep: torch.Tensor,
        last_pos: torch.Tensor, row_seeds: Sequence[int] | None,
    ) -> "_DecodeRows":
        device = keep.device
        B = len(limits)
        keys = None
        if row_seeds is not None:
            keys = _mix(torch.tensor([int(s) & 0x7FFFFFFFFFFFFFFF for s in row_seeds], dtype=torch.long, device=device))
        return cls(
            toks=torch.full((B, n_new), pad_id, dtype=torch.long, device=device),
            lps=torch.zeros((B, n_new), dtype=torch.float32, device=device),
            done=torch.zeros(B, dtype=torch.bool, device=device),
            hit_eos=torch.zeros(B, dtype=torch.bool, device=device),
            limit=torch.tensor(limits, dtype=torch.long, device=device),
            n_out=torch.zeros(B, dtype=torch.long, device=device),
            eos=torch.tensor(list(eos_ids) or [-1], dtype=torch.long, device=device),
            pad_id=pad_id, active=torch.arange(B, device=device), keep=keep, last_pos=last_pos, keys=keys,
        )

    def next_uniform(self) -> torch.Tensor | None:
        """This step's uniform per active row from its key (``None``: the generator draws)."""
        if self.keys is None:
            return None
        uniform = hash_uniform(self.keys)
        self.keys = self.keys + _STEP  # the next step's keys (wrapping int64)
        return uniform

    def record(self, tok: torch.Tensor, lp: torch.Tensor, t: int) -> None:
        """Record step ``t``'s sampled tokens of the active rows (finished rows get the pad token
        and no count) and mark rows that hit an EOS token or their limit as done."""
        rows = self.active
        live = ~self.done[rows]
        tok = torch.where(live, tok, torch.full_like(tok, self.pad_id))
        self.toks[rows, t] = tok
        self.lps[rows, t] = lp
        self.n_out[rows] += live.long()
        is_eos = torch.isin(tok, self.eos) & live
        self.hit_eos[rows] |= is_eos
        self.done[rows] |= is_eos | (self.n_out[rows] >= self.limit[rows])
        self.tok = tok

    def select(self, idx: torch.Tensor) -> None:
        """Keep only the active rows at ``idx`` (positions in the current batch)."""
        assert self.tok is not None
        self.active, self.tok, self.keep, self.last_pos = self.active[idx], self.tok[idx], self.keep[idx], self.last_pos[idx]
        if self.keys is not None:
            self.keys = self.keys[idx]

    def completions(self, steps: int) -> list[Completion]:
        toks = self.toks[:, :steps].tolist()
        lps = self.lps[:, :steps].tolist()
        counts = self.n_out.tolist()
        eos = self.hit_eos.tolist()
        out = []
        for i, n in enumerate(counts):
            reason = "stop" if eos[i] else ("stop_string" if i in self.stopped else "length")
            out.append(Completion(token_ids=toks[i][:n], logprobs=lps[i][:n], finish_reason=reason))
        return out


class BatchSampler:
    """Samples completions for batches of token-id prompts from ``model``.

    Args:
        model: a transformers causal LM using SDPA attention.
        pad_id: token used for left padding and for rows that already finished.
        eos_ids: token ids that end a completion.
        static_cache: use a reused ``StaticCache`` (fixed shapes) instead of a dynamic cache.
        compile: compile the decode step with ``torch.compile`` (``compile_mode``, default
            ``reduce-overhead``: CUDA graphs on GPU). Needs ``static_cache``.
        bucket: cache lengths (and, uncompiled, attended lengths) are rounded up to a multiple of
            this (fewer shapes).
        prefill_chunk: a prompt longer than this is prefilled on its own, this many tokens per forward.
        prefill_batch_tokens: padded tokens per batched prefill forward (rows x longest prompt of
            the group); None: 16,384 on a GPU, 4,096 on the CPU (SDPA's math path there holds the
            attention weights). 0 turns batched prefill off (every row on its own).
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
        prefix_cache: Any = None,
        prefill_chunk: int = 1024,
        prefill_batch_tokens: int | None = None,
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
        #: a :class:`~.prefix_cache.PrefixCache` (or None): prompts reuse the keys/values of
        #: earlier prompts and completions they start with
        self.prefix_cache = prefix_cache
        self.prefill_chunk = max(16, prefill_chunk)
        self.prefill_batch_tokens = prefill_batch_tokens
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
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def _get_cache(self, batch: int, length: int) -> Any:
        from transformers import StaticCache

        dtype = next(self.model.parameters()).dtype
        key = (batch, length, dtype, self.device)
        if self._cache is None or self._cache_key != key:
            self._cache = None  # free the old cache before allocating the new one
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
        max_new_tokens: int | Sequence[int],
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        row_seeds: Sequence[int] | None = None,
        stop_check: Callable[[int, list[int]], bool] | None = None,
        stop_window: int = 0,
        on_progress: Callable[[StepReport], None] | None = None,
    ) -> list[Completion]:
        """One completion per prompt (prompts are token-id lists; they are left-padded here).

        ``max_new_tokens`` is one limit or one per row. ``row_seeds`` makes each row's noise a
        function of its own seed (see the module docstring); otherwise ``generator`` is used.
        ``stop_check(row, tail)`` is asked every ``check_every`` steps with the row's last
        ``stop_window + check_every`` new tokens and returns whether the row hit a stop string.
        ``on_progress`` receives a :class:`StepReport` at the same points.
        """
        config = self.model.config
        previous = getattr(config, "_attn_implementation", None)
        gqa = self.gqa_decode and previous == "sdpa"
        if gqa:
            from .attention import register

            config._attn_implementation = register()
        try:
            return self._sample(
                prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, generator=generator,
                row_seeds=row_seeds, stop_check=stop_check, stop_window=stop_window, on_progress=on_progress,
                slice_kv=gqa and self.static_cache and not self.compile,
            )
        finally:
            if config._attn_implementation != previous:
                config._attn_implementation = previous

    @torch.inference_mode()
    def _sample(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int | Sequence[int],
        temperature: float,
        top_p: float,
        generator: torch.Generator | None,
        row_seeds: Sequence[int] | None,
        stop_check: Callable[[int, list[int]], bool] | None,
        stop_window: int,
        on_progress: Callable[[StepReport], None] | None,
        slice_kv: bool,
    ) -> list[Completion]:
        """Prefill, then decode one token of every live row per step until all rows are done."""
        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("empty prompt: every prompt needs at least one token")
        t_start = time.perf_counter()
        B = len(prompts)
        P = max(len(p) for p in prompts)
        limits = [int(max_new_tokens)] * B if isinstance(max_new_tokens, int) else [int(n) for n in max_new_tokens]
        if len(limits) != B or min(limits) < 1:
            raise ValueError("max_new_tokens: one positive limit, or one per prompt")
        if row_seeds is not None and temperature > 0 and len(row_seeds) != B:
            raise ValueError("row_seeds: one seed per prompt")
        n_new = max(limits)
        L = -(-(P + n_new) // self.bucket) * self.bucket
        ids, pos, keep = self._padded(prompts, P, L)
        logits, cache = self._prefill(prompts, ids, pos, keep)
        prefill_s = time.perf_counter() - t_start

        rows = _DecodeRows.start(
            limits, n_new=n_new, pad_id=self.pad_id, eos_ids=self.eos_ids, keep=keep, last_pos=pos[:, -1],
            row_seeds=row_seeds if temperature > 0 else None,
        )
        compact = self.static_cache and not self.compile  # drop finished rows from the batch
        storing = self.static_cache and self.prefix_cache is not None and self.prefix_cache.max_tokens > 0
        step_fn = self._step_fn()
        ar = torch.arange(L, device=ids.device)
        steps = 0
        for t in range(n_new):
            tok, lp = sample_tokens(logits, temperature, top_p, generator, uniform=rows.next_uniform())
            rows.record(tok, lp, t)
            steps = t + 1
            if t == n_new - 1:
                break
            if (t + 1) % self.check_every == 0:  # the loop's one host sync
                if stop_check is not None:
                    rows.done = self._check_stops(rows.toks, rows.n_out, rows.done, t + 1, stop_check, stop_window, rows.stopped)
                if on_progress is not None:
                    self._report(on_progress, t + 1, n_new, rows.done, rows.n_out, prompts, prefill_s, t_start)
                if bool(rows.done.all()):
                    break
                if compact:
                    self._compact(cache, rows, prompts, P, storing=storing)
            logits = self._next_logits(step_fn, cache, rows, t, P, L, ar, slice_kv=slice_kv)
        if on_progress is not None:
            self._report(on_progress, steps, n_new, rows.done, rows.n_out, prompts, prefill_s, t_start)
        if storing:
            self._store_rows(cache, rows.active, torch.ones(len(rows.active), dtype=torch.bool, device=ids.device), prompts, rows.toks, rows.n_out, P)
        return rows.completions(steps)

    def _padded(self, prompts: Sequence[Sequence[int]], P: int, L: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The prompts left-padded to ``P`` tokens: ids ``(B, P)``, positions ``(B, P)`` (each
        prompt's from 0) and the cache's ``keep`` mask ``(B, L)`` (its real prompt positions)."""
        B = len(prompts)
        ids = torch.full((B, P), self.pad_id, dtype=torch.long)
        keep = torch.zeros((B, L), dtype=torch.bool)
        for i, p in enumerate(prompts):
            ids[i, P - len(p):] = torch.tensor(list(p), dtype=torch.long)
            keep[i, P - len(p):] = True
        ids, keep = ids.to(self.device), keep.to(self.device)
        pos = (keep[:, :P].long().cumsum(-1) - 1).clamp(min=0)
        return ids, pos, keep

    def _prefill(
        self, prompts: Sequence[Sequence[int]], ids: torch.Tensor, pos: torch.Tensor, keep: torch.Tensor,
    ) -> tuple[torch.Tensor, "Cache"]:
        """The cache holding every prompt and the logits ``(B, V)`` after each prompt's last token.
        With the static cache, prompts are prefilled in left-padded groups, or on their own
        (reusing a cached prefix), straight into their slots of the batch's cache."""
        B, P = ids.shape
        if self.static_cache:
            cache = self._get_cache(B, keep.shape[1])
            last_logits: list[torch.Tensor | None] = [None] * B
            batched, alone = self._plan_prefill(prompts)
            for group in batched:
                for i, lg in zip(group, self._prefill_group(cache, prompts, group, ids, pos, keep)):
                    last_logits[i] = lg
            for i in alone:
                k, v, lg = self._prefill_row(list(prompts[i]))
                self._fill_row(cache, i, k, v, P, batch=B)
                last_logits[i] = lg
            for layer in cache.layers:
                layer.cumulative_length.fill_(P)
            return torch.cat([lg for lg in last_logits if lg is not None], dim=0), cache
        from transformers import DynamicCache

        prefill_mask = padded_causal_mask(keep[:, :P])
        cache = DynamicCache(config=self.model.config)
        out = self.model(
            input_ids=ids, position_ids=pos, attention_mask=prefill_mask, past_key_values=cache, use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1, :], cache

    def _compact(self, cache: "Cache", rows: "_DecodeRows", prompts: Sequence[Sequence[int]], P: int, *, storing: bool) -> None:
        """Drop the finished rows from the batch and the static cache (storing their prefixes
        first when the prefix cache is on); the cache is never reused for another call."""
        alive = ~rows.done[rows.active]
        if bool(alive.all()):
            return
        if storing:
            self._store_rows(cache, rows.active, ~alive, prompts, rows.toks, rows.n_out, P)
        keep_idx = alive.nonzero()[:, 0]
        rows.select(keep_idx)
        for layer in cache.layers:
            layer.keys = layer.keys.index_select(0, keep_idx)
            layer.values = layer.values.index_select(0, keep_idx)
        self._cache = None

    def _next_logits(
        self, step_fn: Callable[..., torch.Tensor], cache: "Cache", rows: "_DecodeRows", t: int, P: int, L: int, ar: torch.Tensor, *, slice_kv: bool,
    ) -> torch.Tensor:
        """Feed the active rows' token of step ``t`` and return the logits ``(rows, V)`` for the next."""
        assert rows.tok is not None  # recorded by the step before
        tok = rows.tok[:, None]
        cur_pos = (rows.last_pos + 1 + t)[:, None]
        if self.static_cache and self.compile:
            torch.compiler.cudagraph_mark_step_begin()
            return step_fn(tok, cur_pos, torch.tensor(P + t, device=tok.device), rows.keep, cache)
        if self.static_cache:
            width = min(L, -(-(P + t + 1) // self.bucket) * self.bucket) if slice_kv else L
            mask = (rows.keep[:, :width] & (ar[:width] <= P + t))[:, None, None, :]
        else:
            mask = rows.keep[:, None, None, : P + t + 1]
        return self.model(
            input_ids=tok, position_ids=cur_pos, attention_mask=mask, past_key_values=cache, use_cache=True
        ).logits[:, -1, :]

    def _store_rows(
        self, cache: Any, rows: torch.Tensor, which: torch.Tensor, prompts: Sequence[Sequence[int]], toks: torch.Tensor,
        n_out: torch.Tensor, P: int,
    ) -> None:
        """Cache prompt + the completion tokens fed back (all but the last) of the active rows
        selected by ``which``: the next turn's or the repair's prompt starts with them."""
        assert self.prefix_cache is not None
        for pos in which.nonzero()[:, 0].tolist():
            i = int(rows[pos])
            n = int(n_out[i])
            p = prompts[i]
            a, b = P - len(p), P + n - 1
            self.prefix_cache.store(
                list(p) + toks[i, : n - 1].tolist(),
                [layer.keys[pos, :, a:b].clone() for layer in cache.layers],
                [layer.values[pos, :, a:b].clone() for layer in cache.layers],
            )

    def _prefill_row(self, prompt: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """Keys and values ``(heads, n, dim)`` per layer of one prompt (positions from 0), and the
        logits ``(1, V)`` after its last token. The longest cached prefix is reused; the rest is
        computed in chunks of ``prefill_chunk`` tokens; the prompt is then cached."""
        from transformers import DynamicCache

        device = self.device
        entry, c = self.prefix_cache.lookup(prompt) if self.prefix_cache is not None else (None, 0)
        dc = DynamicCache(config=self.model.config)
        if entry is not None:
            for layer_idx, (k, v) in enumerate(zip(entry.keys, entry.values)):
                dc.update(k[None, :, :c], v[None, :, :c], layer_idx)
        n = len(prompt)
        logits = None
        start = c
        while start < n:
            end = min(n, start + self.prefill_chunk)
            q_ids = torch.tensor([prompt[start:end]], dtype=torch.long, device=device)
            q_pos = torch.arange(start, end, device=device)[None]
            mask = (torch.arange(end, device=device)[None, :] <= q_pos[0][:, None])[None, None]  # (1, 1, q, end)
            out = self.model(
                input_ids=q_ids, position_ids=q_pos, attention_mask=mask, past_key_values=dc, use_cache=True, logits_to_keep=1
            )
            logits = out.logits[:, -1, :]
            del out
            start = end
        keys = [layer.keys[0] for layer in dc.layers]
        values = [layer.values[0] for layer in dc.layers]
        if self.prefix_cache is not None:
            self.prefix_cache.store(prompt, keys, values)
        assert logits is not None
        return keys, values, logits

    def _plan_prefill(self, prompts: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
        """Which rows are prefilled together (groups of row indices, longest prompts first, each
        within ``prefill_batch_tokens`` padded tokens) and which on their own (a cached prefix to
        reuse, or longer than one prefill chunk)."""
        budget = self.prefill_batch_tokens
        if budget is None:
            budget = 16_384 if self.device.type == "cuda" else 4_096
        alone: list[int] = []
        fresh: list[int] = []
        for i, p in enumerate(prompts):
            if budget <= 0 or len(p) > self.prefill_chunk or (
                self.prefix_cache is not None and self.prefix_cache.lookup(p)[0] is not None
            ):
                alone.append(i)
            else:
                fresh.append(i)
        fresh.sort(key=lambda i: -len(prompts[i]))
        groups: list[list[int]] = []
        for i in fresh:
            if groups and (len(groups[-1]) + 1) * len(prompts[groups[-1][0]]) <= budget:
                groups[-1].append(i)
            else:
                groups.append([i])
        return groups, alone

    def _prefill_group(
        self, cache: StaticCache, prompts: Sequence[Sequence[int]], rows: list[int], ids: torch.Tensor, pos: torch.Tensor,
        keep: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Prefill ``rows`` in one left-padded forward, straight into their slots of the static
        cache; returns each row's logits ``(1, V)`` after its last prompt token. ``ids``, ``pos``
        and ``keep`` are the batch's, left-padded to ``P``: the group's rows are their last ``n``
        columns (its longest prompt). Every prompt position starts at 0, so a row's keys and
        values are those of a forward of its own."""
        from transformers import DynamicCache

        P = ids.shape[1]
        n = max(len(prompts[i]) for i in rows)
        idx = torch.tensor(rows, dtype=torch.long, device=ids.device)
        mask = padded_causal_mask(keep[idx, P - n : P])
        dc = DynamicCache(config=self.model.config)
        out = self.model(
            input_ids=ids[idx, P - n : P], position_ids=pos[idx, P - n : P], attention_mask=mask, past_key_values=dc,
            use_cache=True, logits_to_keep=1,
        )
        logits = out.logits[:, -1, :]
        del out, mask
        self._init_static(cache, dc.layers[0].keys[0], dc.layers[0].values[0], keep.shape[0])
        for layer, src in zip(cache.layers, dc.layers):
            assert src.keys is not None and src.values is not None  # filled by the forward above
            layer.keys[idx, :, P - n : P] = src.keys
            layer.values[idx, :, P - n : P] = src.values
        if self.prefix_cache is not None and self.prefix_cache.max_tokens > 0:
            for j, i in enumerate(rows):
                a = n - len(prompts[i])
                self.prefix_cache.store(
                    list(prompts[i]), [src.keys[j, :, a:].clone() for src in dc.layers], [src.values[j, :, a:].clone() for src in dc.layers]
                )
        return [logits[j : j + 1] for j in range(len(rows))]

    @staticmethod
    def _init_static(cache: StaticCache, k0: torch.Tensor, v0: torch.Tensor, B: int) -> None:
        """Allocate the static cache's tensors (batch ``B``) on first use, shaped like ``k0``/``v0``
        ``(heads, n, dim)``."""
        for layer in cache.layers:
            if not getattr(layer, "is_initialized", False):
                layer.lazy_initialization(
                    k0.new_zeros((B, k0.shape[0], 1, k0.shape[-1])), v0.new_zeros((B, v0.shape[0], 1, v0.shape[-1]))
                )

    def _fill_row(self, cache: StaticCache, row: int, keys: list[torch.Tensor], values: list[torch.Tensor], P: int, *, batch: int) -> None:
        """Copy one prompt's keys/values (per layer ``(heads, n, dim)``) into its left-padded slots
        ``row`` of the static cache."""
        self._init_static(cache, keys[0], values[0], batch)
        n = keys[0].shape[1]
        for layer, k, v in zip(cache.layers, keys, values):
            layer.keys[row, :, P - n : P] = k
            layer.values[row, :, P - n : P] = v

    def _check_stops(
        self,
        toks: torch.Tensor,
        n_out: torch.Tensor,
        done: torch.Tensor,
        upto: int,
        stop_check: Callable[[int, list[int]], bool],
        stop_window: int,
        stopped: set[int],
    ) -> torch.Tensor:
        """Mark rows whose recent tokens contain a stop string as done (host side, live rows only)."""
        lo = max(0, upto - self.check_every - max(0, stop_window))
        tail = toks[:, lo:upto].tolist()
        counts = n_out.tolist()
        live = (~done).tolist()
        newly = []
        for i, row in enumerate(tail):
            if not live[i] or i in stopped:
                continue
            n = counts[i] - lo
            if n > 0 and stop_check(i, row[:n]):
                stopped.add(i)
                newly.append(i)
        if not newly:
            return done
        done = done.clone()
        done[newly] = True
        return done

    def _report(
        self,
        on_progress: Callable[[StepReport], None],
        step: int,
        n_new: int,
        done: torch.Tensor,
        n_out: torch.Tensor,
        prompts: Sequence[Sequence[int]],
        prefill_s: float,
        t_start: float,
    ) -> None:
        on_progress(
            StepReport(
                step=step, max_steps=n_new, rows=len(prompts), finished=int(done.sum()), tokens=int(n_out.sum()),
                prompt_tokens=sum(len(p) for p in prompts), prefill_s=prefill_s, elapsed_s=time.perf_counter() - t_start,
            )
        )
