"""The llama.cpp policy backend: GGUF models on a CPU, fast (``policy.kind = "llamacpp"``).

:class:`LlamaCppPolicy` implements :class:`~spade_engine.policy.protocol.Policy` on
:class:`~.llamacpp_engine.LlamaCppEngine` (continuous batching, prefix reuse, the transformers
backend's sampler):

* the model is a catalogue name or a ``.gguf`` file (:func:`~spade_engine.models.resolve.resolve_gguf_spec`);
  prompts are rendered and text decoded with the model's Hugging Face tokenizer and chat template,
  exactly as the transformers backend renders them, so both backends and the trainer see the
  same token ids;
* each request's settings apply (max new tokens, temperature, top-p, stop strings, thinking
  switch, seed); finish reasons are ``stop``, ``length``, ``stop_string`` and ``context``; every
  sample carries its prompt and completion token ids and the behaviour log-prob of each token;
* trained weights arrive as LoRA adapters: ``load_version(version, checkpoint, adapter=...)``
  writes the trainer's adapter as a GGUF adapter and serves it on top of the base GGUF
  (the trainer trains on the same GGUF, dequantised). A version with merged weights only (a full
  fine-tune) cannot be served here: that is an error naming ``trainer.lora``.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .decoding import trim_at_stop
from .hf import PolicyLoadError
from .llamacpp_engine import EngineProgress, LlamaCppEngine, LlamaCppError, SeqRequest
from .protocol import GenerationProgress, PolicyRequest, Sample
from .transformers_policy import render_messages

__all__ = ["LlamaCppPolicy", "build"]


class LlamaCppPolicy:
    """A GGUF model served by llama.cpp, playing every role."""

    kind = "llamacpp"
    trainable = True

    def __init__(
        self,
        engine: LlamaCppEngine,
        tokenizer: Any,
        *,
        model_name: str,
        version: str = "v0",
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        context_window: int | None = None,
        min_new_tokens: int = 64,
        gguf_arch: Any = None,
    ):
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_name = model_name
        self._version = version
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self._calls = 0
        window = engine.n_ctx_seq if context_window is None else min(int(context_window), engine.n_ctx_seq)
        #: prompt + completion tokens at most: a sequence's KV buffer (and ``context_window`` if smaller)
        self.context_window = int(window)
        self.min_new_tokens = max(1, min_new_tokens)
        #: called with a :class:`~.protocol.GenerationProgress` during each call
        self.on_progress: Callable[[GenerationProgress], None] | None = None
        self.checkpoint: str | None = None
        self.adapter: str | None = None
        #: seconds the last weight switch took (adapter conversion + load), and every one so far
        self.last_sync_s: float | None = None
        self.sync_seconds: list[float] = []
        self._arch = gguf_arch
        self._work = Path(tempfile.mkdtemp(prefix="spade-llamacpp-"))

    @classmethod
    def from_gguf(
        cls, gguf: str | Path, tokenizer_dir: str | Path, *, parallel: int = 8, context_per_sequence: int = 4096,
        threads: int | None = None, batch_tokens: int = 1024, kv_unified: bool = False, **kwargs: Any,
    ) -> "LlamaCppPolicy":
        """Load ``gguf`` into llama.cpp and the tokenizer from ``tokenizer_dir``."""
        from transformers import AutoTokenizer

        from .llamacpp_lib import load_llama_cpp

        lib = load_llama_cpp()
        try:
            tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise PolicyLoadError(f"cannot load the tokenizer of {gguf} from {tokenizer_dir}: {exc}") from None
        try:
            engine = LlamaCppEngine(
                lib, gguf, parallel=parallel, context_per_sequence=context_per_sequence, threads=threads,
                batch_tokens=batch_tokens, kv_unified=kv_unified, seed=int(kwargs.get("seed", 0)),
            )
        except LlamaCppError as exc:
            raise PolicyLoadError(str(exc)) from None
        kwargs.setdefault("model_name", str(gguf))
        return cls(engine, tok, **kwargs)

    # -- Policy protocol -----------------------------------------------------------------------

    @property
    def version(self) -> str:
        return self._version

    def render(self, request: PolicyRequest) -> list[int]:
        """The prompt token ids for ``request`` (the transformers backend's rendering)."""
        return render_messages(self.tokenizer, request.messages, enable_thinking=request.enable_thinking)

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        """One sample per request, all decoded together (continuous batching)."""
        self._calls += 1
        prompts = [self.render(r) for r in requests]
        out: list[Sample | None] = [None] * len(requests)
        jobs: list[int] = []
        seqs: list[SeqRequest] = []
        capped: dict[int, bool] = {}
        for i, r in enumerate(requests):
            wanted = int(r.max_new_tokens or self.max_new_tokens)
            room = self.context_window - len(prompts[i])
            if room < min(self.min_new_tokens, wanted):
                out[i] = Sample(text="", prompt_token_ids=prompts[i], finish_reason="context")
                continue
            capped[i] = room < wanted
            jobs.append(i)
            seqs.append(SeqRequest(
                prompt=prompts[i], max_new_tokens=min(wanted, room),
                temperature=float(self.temperature if r.temperature is None else r.temperature),
                top_p=float(self.top_p if r.top_p is None else r.top_p),
                seed=self._row_seed(r.seed, i),
            ))
        stops = {k: tuple(requests[i].stop) for k, i in enumerate(jobs) if requests[i].stop}
        done = self.engine.generate(
            seqs, stop_check=self._stop_checker(stops) if stops else None,
            on_progress=self._progress_fn(tuple(requests[i].role for i in jobs)),
        )
        for k, (i, res) in enumerate(zip(jobs, done)):
            ids, lps, reason = list(res.token_ids), list(res.logprobs), res.finish_reason
            text = self._decode(ids)
            own = stops.get(k, ())
            if own:
                cut = trim_at_stop(ids, self._decode, own)
                if cut is not None:
                    n, text = cut
                    ids, lps, reason = ids[:n], lps[:n], "stop_string"
            if reason == "length" and capped[i]:
                reason = "context"
            out[i] = Sample(text=text, prompt_token_ids=prompts[i], completion_token_ids=ids, logprobs=lps, finish_reason=reason)
        return [s for s in out if s is not None]

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode([t for t in ids if not self.engine.is_eog(t)], skip_special_tokens=True)

    def _stop_checker(self, stops: dict[int, tuple[str, ...]]) -> Callable[[int, list[int]], bool]:
        window = {k: max(len(s) for s in v) + 4 for k, v in stops.items()}

        def check(row: int, tokens: list[int]) -> bool:
            own = stops.get(row)
            if not own:
                return False
            text = self._decode(tokens[-window[row]:])
            return any(s in text for s in own)

        return check

    def _progress_fn(self, roles: tuple[str, ...]) -> Callable[[EngineProgress], None] | None:
        sink = self.on_progress
        if sink is None:
            return None

        def report(p: EngineProgress) -> None:
            sink(GenerationProgress(
                roles=roles, rows=p.rows, finished=p.finished, step=p.step, max_steps=p.max_steps, tokens=p.tokens,
                prompt_tokens=p.prompt_tokens, elapsed_s=p.elapsed_s, prefill_s=p.prefill_s,
            ))

        return report

    def _row_seed(self, seed: int | None, i: int) -> int:
        """A 63-bit noise key per row, as the transformers backend draws it: from the request's
        seed (and the weights version) when given, else from the policy's seed and a call counter."""
        material = f"{self._version}|{seed}" if seed is not None else f"{self._version}|{self.seed}:{self._calls}:{i}"
        return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "little") >> 1

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        """Serve ``version``: its LoRA adapter on the base GGUF (``adapter``), or the base weights
        when it has neither adapter nor checkpoint (``v0``)."""
        if adapter is None and checkpoint is not None:
            raise PolicyLoadError(
                f"{version} has merged weights only ({checkpoint}); the llamacpp policy serves trained versions as "
                "LoRA adapters on its GGUF model: train with trainer.lora = true (or use policy.kind = \"transformers\")"
            )
        t = time.perf_counter()
        try:
            if adapter is None:
                self.engine.set_adapter(None)
            else:
                from .lora_adapter import AdapterError, adapter_to_gguf, gguf_architecture

                if self._arch is None:
                    self._arch = self._gguf_arch() or gguf_architecture(self.engine.path)
                out = self._work / f"{version}.gguf"
                try:
                    adapter_to_gguf(adapter, out, base=self._arch)
                except AdapterError as exc:
                    raise PolicyLoadError(f"cannot serve {version}: {exc}") from None
                self.engine.set_adapter(out)
                previous = self._work / f"{self._version}.gguf"
                if previous != out:
                    previous.unlink(missing_ok=True)
        except LlamaCppError as exc:
            raise PolicyLoadError(f"cannot serve {version}: {exc}") from None
        self.last_sync_s = time.perf_counter() - t
        self.sync_seconds.append(self.last_sync_s)
        self.checkpoint = checkpoint
        self.adapter = adapter
        self._version = version

    def _gguf_arch(self) -> Any:
        """What converting an adapter needs of the base model, from the metadata llama.cpp loaded
        (instant; reading the file again with gguf's reader took 6 s for the 0.5B)."""
        from .lora_adapter import GgufArch

        arch = self.engine.meta("general.architecture")
        blocks = self.engine.meta(f"{arch}.block_count") if arch else None
        heads = self.engine.meta(f"{arch}.attention.head_count") if arch else None
        if not (arch and blocks and heads):
            return None
        kv = self.engine.meta(f"{arch}.attention.head_count_kv") or heads
        return GgufArch(arch=arch, blocks=int(blocks), heads=int(heads), kv_heads=int(kv))

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "version": self._version,
            "device": "cpu",
            "vocab": int(len(self.tokenizer)),
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "context_window": self.context_window,
            **{k: v for k, v in self.engine.describe().items() if k != "gguf"},
            "gguf": self.engine.path.name,
        }

    def close(self) -> None:
        self.engine.close()
        shutil.rmtree(self._work, ignore_errors=True)


def build(cfg: Any, *, band: tuple[float, float], data_dir: Any = None) -> LlamaCppPolicy:
    """The registry's factory: ``policy.model`` (a catalogue name or a ``.gguf`` file) with
    ``policy.llamacpp`` and ``policy.generation``."""
    from ..models.resolve import resolve_gguf_spec

    g = cfg.generation
    s = cfg.llamacpp
    found = resolve_gguf_spec(cfg.model, data_dir=data_dir)
    policy = LlamaCppPolicy.from_gguf(
        found.gguf, found.tokenizer_dir, parallel=s.parallel, context_per_sequence=s.context_per_sequence,
        threads=s.threads or None, batch_tokens=s.batch_tokens, kv_unified=s.kv_unified,
        model_name=cfg.model, max_new_tokens=g.agent.max_new_tokens, temperature=g.agent.temperature, top_p=g.agent.top_p,
        context_window=g.context_window, min_new_tokens=g.min_new_tokens,
    )
    return policy
