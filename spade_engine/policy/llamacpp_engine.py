"""Continuous batching over llama.cpp sequences, with the behaviour log-prob of every token.

:class:`LlamaCppEngine` owns one llama.cpp model and context with ``parallel`` sequences and
turns a list of token prompts into completions. It is the generation engine of
:class:`~spade_engine.policy.llamacpp_policy.LlamaCppPolicy`; it knows token ids only (chat
templates, text and stop strings are the policy's).

How it is fast on a CPU:

* **batched decoding**: every decoding step is one ``llama_decode`` call carrying the next token
  of every running sequence, so the weights are read once per step for all of them;
* **continuous batching**: a sequence that finishes frees its slot at once, and the next waiting
  prompt is admitted and prefilled in the same calls as the others' decoding steps;
* **prefix reuse**: each slot remembers the tokens whose keys and values it holds; a prompt
  starting with tokens a slot already holds (an agent's next turn, a repeated system prompt, the
  plays of one environment) is prefilled only from where they differ, copying the shared part
  from another slot when needed (``llama_memory_seq_cp``). A prompt that shares a long prefix with
  one still being prefilled waits for it instead of computing the prefix twice;
* sampling reads the last position's logits only (never the whole vocabulary for every prompt
  token, which is what made the high-level API's log-probs slow) and uses the same sampler as the
  transformers backend (:func:`~.decoding.sample_tokens`): temperature, top-p, and per-row
  counter-based uniforms (:func:`~.decoding.hash_uniform`), so a request's seed decides its
  completion whatever else shares the batch.

Memory: by default each sequence has its own KV buffer of ``context_per_sequence`` tokens
(``kv_unified = false``: attention reads only the sequence's own cells, which measured 1.5x
faster than one shared buffer at 16 sequences of 1,500 tokens); copying a prefix between
buffers copies the buffer and drops the tail. With ``kv_unified`` the sequences share one buffer
of ``parallel * context_per_sequence`` cells (shared prefixes are not copied; a long sequence can
use more than its share).

Weights: :meth:`set_adapter` serves a LoRA adapter (a GGUF adapter file) on top of the base
weights, or none; the cached prefixes are dropped, since they were computed by other weights.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import SpadeError
from .decoding import _STEP, _mix, hash_uniform, sample_tokens

__all__ = ["SeqRequest", "SeqResult", "EngineProgress", "LlamaCppEngine", "LlamaCppError", "available_cpus"]

#: a prompt that shares at least this many more tokens with one being prefilled waits for it
_DEFER_MIN = 32
_MASK64 = (1 << 64) - 1


class LlamaCppError(SpadeError):
    """llama.cpp could not load the model, the adapter, or decode a batch."""


def _runnable_others() -> int | None:
    """Runnable threads of other processes that compete with this one as equals or betters: in
    state R with a nice value at most this process's (a niced neighbour yields its CPU at once,
    so it is not counted). ``None`` where there is no procfs."""
    me = os.getpid()
    try:
        own_nice = os.getpriority(os.PRIO_PROCESS, 0)
        pids = [e.name for e in os.scandir("/proc") if e.name.isdigit() and int(e.name) != me]
    except OSError:
        return None
    busy = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            # fields[0] is the state; fields[16] the nice value (stat fields 3 and 19)
            if fields and fields[0] == b"R" and int(fields[16]) <= own_nice:
                busy += 1
    return busy


class ThreadGovernor:
    """How many threads a decode call should use: every CPU when nothing else runs, fewer when
    other processes want CPUs.

    llama.cpp's threads meet at a barrier after every operation (hundreds per token). When another
    runnable process takes one of the two CPUs here, the thread it displaced arrives late to every
    barrier and a 2-thread decode fell from 72 to 2-7 tokens/s, below the 29 that one thread keeps
    with the same neighbour. So before each decode call (at most every ``every_s``: a sample reads
    every task's state, a few milliseconds) it counts the other processes' runnable threads that
    are not niced below this one and uses ``max(1, cpus - busy)`` threads, the highest count of the
    last few samples so a briefly idle neighbour does not flip it back and forth."""

    def __init__(self, cpus: int, *, every_s: float = 0.5, memory: int = 4):
        self.cpus = max(1, cpus)
        self.every_s = every_s
        self.samples: deque[int] = deque(maxlen=memory)
        self._last = 0.0

    def threads(self) -> int:
        now = time.perf_counter()
        if now - self._last >= self.every_s:
            self._last = now
            busy = _runnable_others()
            if busy is not None:
                self.samples.append(busy)
        busy = max(self.samples, default=0)
        return max(1, self.cpus - busy)


def available_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class SeqRequest:
    """One prompt to complete: token ids, a token limit and sampling settings; ``seed`` (any
    integer) fixes the row's randomness, ``None`` draws it from the engine's generator."""

    prompt: Sequence[int]
    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None


@dataclass(frozen=True)
class SeqResult:
    """A completion: token ids, the log-prob of each under the distribution it was sampled from,
    why it ended (``stop``: an end-of-generation token, kept as the last token; ``length``;
    ``stop_string``: the caller's stop check said so), and how many prompt tokens were reused."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    reused_prompt_tokens: int = 0


@dataclass(frozen=True)
class EngineProgress:
    """Where one :meth:`LlamaCppEngine.generate` call is (for progress displays)."""

    rows: int
    finished: int
    step: int
    max_steps: int
    tokens: int
    prompt_tokens: int
    elapsed_s: float
    prefill_s: float


@dataclass
class _Row:
    index: int
    request: SeqRequest
    seq: int
    key: int | None  # mixed 64-bit key (as a Python int), or None for generator draws
    feed: list[int]  # tokens to decode next (the prompt's rest, then each sampled token)
    pos: int  # position of feed[0]
    reused: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def prefilling(self) -> bool:
        return not self.tokens and len(self.feed) > 1


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _signed64(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >= (1 << 63) else x


class _Log:
    """llama.cpp's log, kept quiet: the last lines are held for error messages."""

    def __init__(self, lib: Any):
        self.lines: deque[str] = deque(maxlen=60)
        self.verbose = bool(os.environ.get("SPADE_LLAMACPP_VERBOSE"))

        def sink(level: int, text: bytes, _user: Any) -> None:
            line = text.decode(errors="replace") if text else ""
            self.lines.append(line.rstrip("\n"))
            if self.verbose:
                os.write(2, text or b"")

        self._cb = lib.llama_log_callback(sink)  # kept alive as long as the log is set
        lib.llama_log_set(self._cb, ctypes.c_void_p())

    def tail(self, n: int = 8) -> str:
        useful = [ln for ln in self.lines if ln.strip() and not ln.startswith(("llama_model_loader: - kv", "print_info"))]
        return " | ".join(useful[-n:])


_LOG: _Log | None = None
_BACKEND_LOCK = threading.Lock()


def _quiet_log(lib: Any) -> _Log:
    global _LOG
    with _BACKEND_LOCK:
        if _LOG is None:
            _LOG = _Log(lib)
            lib.llama_backend_init()
        return _LOG


class LlamaCppEngine:
    """One GGUF model in llama.cpp with ``parallel`` sequences (see the module docstring).

    Args:
        lib: the checked ``llama_cpp`` module (:func:`~.llamacpp_lib.load_llama_cpp`).
        gguf_path: the model file.
        parallel: sequences decoded together at most.
        context_per_sequence: KV cells per sequence (prompt + completion tokens at most).
        threads: decoding threads; ``None``: as many as are free, up to the CPUs this process may
            use, decided before each decode call (:class:`ThreadGovernor`).
        batch_tokens: tokens per ``llama_decode`` call at most (prefill chunks).
        kv_unified: one KV buffer shared by every sequence instead of one each.
        seed: seeds the generator of requests without a seed.
    """

    def __init__(
        self,
        lib: Any,
        gguf_path: str | Path,
        *,
        parallel: int = 8,
        context_per_sequence: int = 4096,
        threads: int | None = None,
        batch_tokens: int = 1024,
        kv_unified: bool = False,
        seed: int = 0,
    ):
        self.lib = lib
        self.path = Path(gguf_path)
        self.log = _quiet_log(lib)
        if not self.path.is_file():
            raise LlamaCppError(f"GGUF file {self.path} does not exist")
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0
        t = time.perf_counter()
        self.model = lib.llama_model_load_from_file(str(self.path).encode(), mp)
        if not self.model:
            raise LlamaCppError(f"llama.cpp could not load {self.path}: {self.log.tail()}")
        self.load_s = time.perf_counter() - t
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self.vocab))
        self.n_ctx_train = int(lib.llama_model_n_ctx_train(self.model))
        self.parallel = max(1, int(parallel))
        self.governor = ThreadGovernor(available_cpus()) if not threads else None
        self.threads = int(threads) if threads else available_cpus()
        self.kv_unified = bool(kv_unified)
        cp = lib.llama_context_default_params()
        cp.n_ctx = int(context_per_sequence) * self.parallel
        cp.n_batch = max(int(batch_tokens), self.parallel)
        cp.n_ubatch = min(512, cp.n_batch)
        cp.n_seq_max = self.parallel
        cp.kv_unified = self.kv_unified
        cp.n_threads = self.threads
        cp.n_threads_batch = self.threads
        cp.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        if not self.ctx:
            lib.llama_model_free(self.model)
            raise LlamaCppError(f"llama.cpp could not create a context for {self.path}: {self.log.tail()}")
        self.n_ctx = int(lib.llama_n_ctx(self.ctx))
        self.n_ctx_seq = int(lib.llama_n_ctx_seq(self.ctx))
        self.n_batch = int(lib.llama_n_batch(self.ctx))
        self.mem = lib.llama_get_memory(self.ctx)
        self.batch = lib.llama_batch_init(self.n_batch, 0, 1)
        self._logits = np.empty((self.parallel, self.n_vocab), dtype=np.float32)
        self._cached: list[list[int]] = [[] for _ in range(self.parallel)]
        self._used: list[float] = [0.0] * self.parallel
        self._adapter: Any = None
        self.adapter_path: Path | None = None
        self.generator = torch.Generator().manual_seed(seed)
        self._lock = threading.Lock()
        self._closed = False
        #: set by :meth:`close`: a generation in progress (another thread's) stops at its next step
        self._closing = threading.Event()

    # -- weights -------------------------------------------------------------------------------

    def set_adapter(self, path: str | Path | None) -> float:
        """Serve the GGUF LoRA adapter at ``path`` (``None``: the base weights alone); returns
        the seconds it took. Cached prefixes are dropped."""
        lib = self.lib
        t = time.perf_counter()
        with self._lock:
            new = None
            if path is not None:
                new = lib.llama_adapter_lora_init(self.model, str(path).encode())
                if not new:
                    raise LlamaCppError(f"llama.cpp could not load the LoRA adapter {path}: {self.log.tail()}")
                arr = (lib.llama_adapter_lora_p_ctypes * 1)(new)
                scales = (ctypes.c_float * 1)(1.0)
                rc = lib.llama_set_adapters_lora(self.ctx, arr, 1, scales)
            else:
                rc = lib.llama_set_adapters_lora(self.ctx, None, 0, None)
            if rc != 0:
                if new:
                    lib.llama_adapter_lora_free(new)
                raise LlamaCppError(f"llama.cpp refused the adapter {path} (code {rc}): {self.log.tail()}")
            if self._adapter:
                lib.llama_adapter_lora_free(self._adapter)
            self._adapter = new
            self.adapter_path = Path(path) if path is not None else None
            self._clear_cache()
        return time.perf_counter() - t

    def _clear_cache(self) -> None:
        self.lib.llama_memory_clear(self.mem, True)
        self._cached = [[] for _ in range(self.parallel)]

    def clear_cache(self) -> None:
        """Forget every cached prefix."""
        with self._lock:
            self._clear_cache()

    def set_threads(self, threads: int | None) -> None:
        """Use ``threads`` threads from now on (``None``: as many as are free, decided per call)."""
        self.governor = ThreadGovernor(available_cpus()) if not threads else None
        self.threads = int(threads) if threads else available_cpus()
        self.lib.llama_set_n_threads(self.ctx, self.threads, self.threads)

    def meta(self, key: str) -> str | None:
        """The model file's GGUF metadata value ``key`` as text (``None`` when it has none)."""
        buf = ctypes.create_string_buffer(512)
        n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode(errors="replace") if n >= 0 else None

    def is_eog(self, token: int) -> bool:
        """Does ``token`` end generation (end of sequence or of turn)?"""
        return bool(self.lib.llama_vocab_is_eog(self.vocab, int(token)))

    # -- generation ----------------------------------------------------------------------------

    def generate(
        self,
        requests: Sequence[SeqRequest],
        *,
        stop_check: Callable[[int, list[int]], bool] | None = None,
        on_progress: Callable[[EngineProgress], None] | None = None,
        progress_every_s: float = 1.0,
        ignore_eog: bool = False,
    ) -> list[SeqResult]:
        """Complete every request (see the module docstring). ``stop_check(i, tokens)`` is asked
        after each new token of request ``i`` whether the row should stop (stop strings);
        ``ignore_eog`` decodes past end-of-generation tokens (benchmarks: every row runs to its limit)."""
        if self._closed:
            raise LlamaCppError("the llama.cpp engine is closed")
        for r in requests:
            if not r.prompt:
                raise ValueError("empty prompt: every prompt needs at least one token")
            if r.max_new_tokens < 1:
                raise ValueError("max_new_tokens must be positive")
            if len(r.prompt) + r.max_new_tokens > self.n_ctx_seq:
                raise ValueError(
                    f"a prompt of {len(r.prompt)} tokens and {r.max_new_tokens} new tokens exceeds the "
                    f"{self.n_ctx_seq} tokens a sequence holds (policy.llamacpp.context_per_sequence)"
                )
        with self._lock:
            return self._generate(list(requests), stop_check, on_progress, progress_every_s, ignore_eog)

    def _generate(
        self,
        requests: list[SeqRequest],
        stop_check: Callable[[int, list[int]], bool] | None,
        on_progress: Callable[[EngineProgress], None] | None,
        every_s: float,
        ignore_eog: bool = False,
    ) -> list[SeqResult]:
        lib = self.lib
        t0 = time.perf_counter()
        results: list[SeqResult | None] = [None] * len(requests)
        waiting = list(range(len(requests)))
        active: dict[int, _Row] = {}
        prefill_s = 0.0
        finished = 0
        last_report = t0
        max_steps = max((r.max_new_tokens for r in requests), default=0)
        prompt_tokens = sum(len(r.prompt) for r in requests)
        batch = self.batch
        while waiting or active:
            if self._closing.is_set():  # close() waits for this call: give the engine up now
                raise LlamaCppError("the llama.cpp engine was closed during generation")
            self._admit(requests, waiting, active)
            if not active:  # pragma: no cover - _admit always admits into an empty engine
                raise LlamaCppError("no request could be admitted")
            # one decode call: every decoding row's next token, then prefill chunks
            n = 0
            plan: list[tuple[_Row, int, int]] = []  # row, tokens fed, batch index of its output (-1: none)
            order = sorted(active.values(), key=lambda r: (len(r.feed) > 1, r.index))
            for row in order:
                room = self.n_batch - n
                if room <= 0:
                    break
                take = row.feed[:room]
                for j, tok in enumerate(take):
                    batch.token[n + j] = tok
                    batch.pos[n + j] = row.pos + j
                    batch.n_seq_id[n + j] = 1
                    batch.seq_id[n + j][0] = row.seq
                    batch.logits[n + j] = 0
                out = -1
                if len(take) == len(row.feed):
                    out = n + len(take) - 1
                    batch.logits[out] = 1
                plan.append((row, len(take), out))
                n += len(take)
            batch.n_tokens = n
            t = time.perf_counter()
            self._decode(active)
            dt = time.perf_counter() - t
            if any(fed > 1 or not row.tokens for row, fed, _ in plan):
                prefill_s += dt
            sampled: list[tuple[_Row, int]] = []
            for k, (row, fed, out) in enumerate(plan):
                self._cached[row.seq].extend(row.feed[:fed])
                row.pos += fed
                row.feed = row.feed[fed:]
                if out >= 0:
                    ptr = lib.llama_get_logits_ith(self.ctx, out)
                    self._logits[len(sampled)] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
                    sampled.append((row, len(sampled)))
            self._sample(sampled)
            for row, _ in sampled:
                tok = row.tokens[-1]
                reason = None
                if not ignore_eog and self.is_eog(tok):
                    reason = "stop"
                elif len(row.tokens) >= row.request.max_new_tokens:
                    reason = "length"
                elif stop_check is not None and stop_check(row.index, row.tokens):
                    reason = "stop_string"
                if reason is None:
                    row.feed = [tok]
                    continue
                results[row.index] = SeqResult(
                    token_ids=row.tokens, logprobs=row.logprobs, finish_reason=reason, reused_prompt_tokens=row.reused
                )
                self._used[row.seq] = time.perf_counter()
                del active[row.seq]
                finished += 1
            now = time.perf_counter()
            if on_progress is not None and (now - last_report >= every_s or (not waiting and not active)):
                last_report = now
                on_progress(EngineProgress(
                    rows=len(requests), finished=finished,
                    step=max((len(r.tokens) for r in active.values()), default=max_steps if not waiting else 0),
                    max_steps=max_steps,
                    tokens=sum(len(r.tokens) for r in active.values()) + sum(len(x.token_ids) for x in results if x),
                    prompt_tokens=prompt_tokens, elapsed_s=now - t0, prefill_s=prefill_s,
                ))
        return [r for r in results if r is not None]

    def _admit(self, requests: list[SeqRequest], waiting: list[int], active: dict[int, _Row]) -> None:
        """Move waiting requests into free sequences while there are some (and room, with one
        shared buffer), reusing the longest cached prefix."""
        lib = self.lib
        i = 0
        while i < len(waiting) and len(active) < self.parallel:
            req = requests[waiting[i]]
            prompt = list(req.prompt)
            if self.kv_unified:
                reserved = sum(len(r.request.prompt) + r.request.max_new_tokens for r in active.values())
                if active and reserved + len(prompt) + req.max_new_tokens > self.n_ctx:
                    break  # wait for running rows to free cells
            best_src, best = -1, 0
            for s, toks in enumerate(self._cached):
                common = _common_prefix(toks, prompt)
                if common > best:
                    best_src, best = s, common
            reuse = min(best, len(prompt) - 1)  # at least one token is decoded, for its logits
            if any(r.prefilling and _common_prefix(r.request.prompt, prompt) >= reuse + _DEFER_MIN for r in active.values()):
                i += 1  # a row being prefilled will hold more of this prompt soon
                continue
            free = [s for s in range(self.parallel) if s not in active]
            if reuse > 0 and best_src in free:
                dst = best_src
                lib.llama_memory_seq_rm(self.mem, dst, reuse, -1)
                del self._cached[dst][reuse:]
            else:
                # the free sequence whose cache is least worth keeping: empty, else least recently used
                dst = min(free, key=lambda s: (len(self._cached[s]) > 0, self._used[s]))
                lib.llama_memory_seq_rm(self.mem, dst, -1, -1)
                self._cached[dst] = []
                if reuse > 0:
                    if self.kv_unified:
                        lib.llama_memory_seq_cp(self.mem, best_src, dst, 0, reuse)
                    else:  # across buffers only whole copies: copy, then drop the tail
                        lib.llama_memory_seq_cp(self.mem, best_src, dst, -1, -1)
                        lib.llama_memory_seq_rm(self.mem, dst, reuse, -1)
                    self._cached[dst] = prompt[:reuse]
            key = None
            if req.seed is not None and req.temperature > 0:
                key = int(_mix(torch.tensor([_signed64(req.seed & 0x7FFFFFFFFFFFFFFF)], dtype=torch.long))[0])
            active[dst] = _Row(index=waiting[i], request=req, seq=dst, key=key, feed=prompt[reuse:], pos=reuse, reused=reuse)
            self._used[dst] = time.perf_counter()
            waiting.pop(i)

    def _decode(self, active: dict[int, _Row]) -> None:
        if self.governor is not None:
            want = self.governor.threads()
            if want != self.threads:
                self.threads = want
                self.lib.llama_set_n_threads(self.ctx, want, want)
        rc = self.lib.llama_decode(self.ctx, self.batch)
        if rc == 1:
            # no free cells (one shared buffer): drop idle cached prefixes, then try once more
            for s in range(self.parallel):
                if s not in active and self._cached[s]:
                    self.lib.llama_memory_seq_rm(self.mem, s, -1, -1)
                    self._cached[s] = []
            rc = self.lib.llama_decode(self.ctx, self.batch)
        if rc != 0:
            raise LlamaCppError(f"llama_decode failed (code {rc}) on {self.batch.n_tokens} tokens: {self.log.tail()}")

    def _sample(self, sampled: list[tuple[_Row, int]]) -> None:
        """Sample the next token of each row from its logits row (grouped by sampling settings)."""
        groups: dict[tuple[float, float], list[tuple[_Row, int]]] = {}
        for row, k in sampled:
            groups.setdefault((float(row.request.temperature), float(row.request.top_p)), []).append((row, k))
        for (temp, top_p), members in groups.items():
            logits = torch.from_numpy(self._logits[[k for _, k in members]])
            uniform = None
            if temp > 0:
                draws = torch.rand(len(members), generator=self.generator, dtype=torch.float64)
                keyed = [(j, row) for j, (row, _) in enumerate(members) if row.key is not None]
                if keyed:
                    keys = torch.tensor([_signed64(row.key + len(row.tokens) * _STEP) for _, row in keyed], dtype=torch.long)  # type: ignore[operator]
                    draws[[j for j, _ in keyed]] = hash_uniform(keys)
                uniform = draws
            tok, lp = sample_tokens(logits, temp, top_p, uniform=uniform)
            for (row, _), t, p in zip(members, tok.tolist(), lp.tolist()):
                row.tokens.append(int(t))
                row.logprobs.append(float(p))

    # -- lifecycle -----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "gguf": str(self.path),
            "parallel": self.parallel,
            "context_per_sequence": self.n_ctx_seq,
            "kv_unified": self.kv_unified,
            "threads": "auto" if self.governor is not None else self.threads,
            "cpus": self.governor.cpus if self.governor is not None else self.threads,
            "batch_tokens": self.n_batch,
            "n_ctx_train": self.n_ctx_train,
            "adapter": str(self.adapter_path) if self.adapter_path else None,
        }

    def close(self) -> None:
        """Free the model and context. A generation running in another thread (an environment's
        play when a run is interrupted) is stopped at its next decoding step with
        :class:`LlamaCppError`, so closing waits one step, not for the whole generation."""
        self._closing.set()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.lib.llama_batch_free(self.batch)
            if self._adapter:
                self.lib.llama_adapter_lora_free(self._adapter)
                self._adapter = None
            self.lib.llama_free(self.ctx)
            self.lib.llama_model_free(self.model)

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
