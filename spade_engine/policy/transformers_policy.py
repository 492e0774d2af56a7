"""The Hugging Face transformers policy backend (CPU or GPU; the default for real runs).

:class:`TransformersPolicy` implements :class:`~spade_engine.policy.protocol.Policy`:

* built from a local path or hub id (offline: ``local_files_only`` whenever ``HF_HUB_OFFLINE``
  or ``TRANSFORMERS_OFFLINE`` is set), from an already-built model + tokenizer, or as a tiny
  seeded random model (:meth:`TransformersPolicy.from_tiny`, for tests);
* renders chat messages with the tokenizer's chat template when it has one, else a simple
  ``<|role|>\\ncontent\\n`` fallback ending with ``<|assistant|>\\n``;
* generates in left-padded batches through :class:`~.decoding.BatchSampler` (static KV cache,
  optional ``torch.compile``, a :class:`~.prefix_cache.PrefixCache` so a prompt that starts with
  an earlier prompt + completion is not prefilled again), returning prompt ids, completion ids,
  the behaviour log-prob of each sampled token under the (temperature-scaled) sampling
  distribution, and the finish reason (``stop``, ``length``, ``stop_string``, ``context``);
* applies each request's settings (max new tokens, temperature, top-p, stop strings, thinking
  switch) and the context budget: a completion never exceeds the model's window;
* ``load_version(version, path)`` loads a safetensors checkpoint written by the trainer
  (:func:`~.hf.load_weights_into`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from .decoding import BatchSampler, trim_at_stop
from .hf import (
    PolicyLoadError, load_weights_into, model_source, offline, require_merged_weights, resolve_device, resolve_dtype,
)
from .protocol import GenerationProgress, PolicyRequest, Sample

__all__ = ["TransformersPolicy", "PolicyLoadError", "render_messages", "offline", "resolve_device", "resolve_dtype", "build"]


def render_messages(tokenizer: Any, messages: list[dict[str, str]], *, enable_thinking: bool | None = None) -> list[int]:
    """Prompt token ids for chat ``messages``: the chat template if any, else the fallback format.

    ``enable_thinking`` is passed to templates that have that switch (Qwen3-style thinking
    modes); ``None`` keeps the template's default, and templates without it ignore it. A last
    message of role ``assistant`` is a reply prefix: the prompt ends inside the model's turn,
    after that text, and the model continues it (the designer's puzzle format starts the code)."""
    prefix = bool(messages) and messages[-1].get("role") == "assistant"
    template = getattr(tokenizer, "chat_template", None)
    if template:
        kwargs: dict[str, Any] = {}
        if enable_thinking is not None and "enable_thinking" in str(template):
            kwargs["enable_thinking"] = bool(enable_thinking)
        if prefix:
            kwargs["continue_final_message"] = True
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=not prefix, tokenize=True, **kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)
    turns = messages[:-1] if prefix else messages
    text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in turns) + "<|assistant|>\n"
    if prefix:
        text += messages[-1]["content"]
    ids = tokenizer.encode(text, add_special_tokens=False)
    bos = getattr(tokenizer, "bos_token_id", None)
    return ([bos] if bos is not None else []) + list(ids)


class TransformersPolicy:
    """A causal LM from transformers, playing every role (designer, hinter, agent)."""

    kind = "transformers"
    trainable = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        model_name: str = "",
        version: str = "v0",
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        batch_size: int = 64,
        compile: bool = False,
        static_cache: bool = True,
        seed: int = 0,
        context_window: int | None = None,
        min_new_tokens: int = 64,
        prefix_cache_tokens: int = 65_536,
    ):
        from .prefix_cache import PrefixCache

        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name or str(getattr(model, "name_or_path", "") or type(model).__name__)
        self._version = version
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.batch_size = max(1, batch_size)
        self.seed = seed
        self.checkpoint: str | None = None
        self._calls = 0
        #: prompt + completion tokens at most (the model's max_position_embeddings by default)
        self.context_window = int(context_window or getattr(model.config, "max_position_embeddings", 0) or 32_768)
        self.min_new_tokens = max(1, min_new_tokens)
        #: called with a :class:`~.protocol.GenerationProgress` during each batched call
        self.on_progress: Callable[[GenerationProgress], None] | None = None
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        eos = set()
        for e in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
            if isinstance(e, int):
                eos.add(e)
            elif isinstance(e, (list, tuple)):
                eos.update(int(x) for x in e)
        self.prefix_cache = PrefixCache(prefix_cache_tokens)
        self.sampler = BatchSampler(
            model, pad_id=pad, eos_ids=sorted(eos), static_cache=static_cache, compile=compile, prefix_cache=self.prefix_cache
        )
        model.eval()

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        **kwargs: Any,
    ) -> "TransformersPolicy":
        """Load a model + tokenizer from a local directory or hub id (offline when HF_HUB_OFFLINE).

        ``"tiny"`` / ``"tiny:SEED"`` build the tiny random test model instead.
        """
        from .tiny import parse_tiny_spec

        tiny = parse_tiny_spec(name_or_path)
        if tiny is not None:
            return cls.from_tiny(**tiny, device=device, **kwargs)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dev = resolve_device(device)
        dt = resolve_dtype(dtype, dev)
        local_only = offline() or Path(name_or_path).exists()
        try:
            tok = AutoTokenizer.from_pretrained(name_or_path, local_files_only=local_only, padding_side="left")
            model = AutoModelForCausalLM.from_pretrained(
                name_or_path, local_files_only=local_only, dtype=dt, attn_implementation="sdpa"
            )
        except (OSError, ValueError) as exc:
            hint = " (offline: HF_HUB_OFFLINE is set, so only local files are used)" if local_only else ""
            raise PolicyLoadError(f"cannot load model {name_or_path!r}{hint}: {exc}") from None
        model.to(dev)
        return cls(model, tok, model_name=name_or_path, **kwargs)

    @classmethod
    def from_tiny(
        cls,
        seed: int = 0,
        *,
        hidden: int = 32,
        layers: int = 2,
        vocab: int | None = None,
        device: str = "cpu",
        **kwargs: Any,
    ) -> "TransformersPolicy":
        """A policy over :func:`~.tiny.build_tiny_model` (seeded random weights, byte tokenizer)."""
        from .tiny import build_tiny_model

        model, tok = build_tiny_model(seed=seed, vocab=vocab, hidden=hidden, layers=layers)
        model.to(resolve_device(device) if device != "auto" else torch.device("cpu"))
        name = f"tiny:{seed}" if (hidden, layers) == (32, 2) else f"tiny:{seed}:{hidden}:{layers}"
        kwargs.setdefault("model_name", name)
        return cls(model, tok, **kwargs)

    from_pretrained_tiny = from_tiny

    # -- Policy protocol -----------------------------------------------------------------------

    @property
    def version(self) -> str:
        return self._version

    def render(self, request: PolicyRequest) -> list[int]:
        """The prompt token ids for ``request``."""
        return render_messages(self.tokenizer, request.messages, enable_thinking=request.enable_thinking)

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        """One sample per request, batched by sampling settings in chunks of ``batch_size``.

        Each request's ``max_new_tokens`` is capped by what its prompt leaves of the context
        window; a prompt leaving fewer than ``min_new_tokens`` is not generated (finish reason
        ``context``, no tokens). Each row's randomness comes from its request's seed only."""
        self._calls += 1
        prompts = [self.render(r) for r in requests]
        out: list[Sample | None] = [None] * len(requests)
        groups: dict[tuple[float, float, tuple[str, ...]], list[int]] = {}
        limits: dict[int, tuple[int, bool]] = {}
        for i, r in enumerate(requests):
            wanted = int(r.max_new_tokens or self.max_new_tokens)
            room = self.context_window - len(prompts[i])
            if room < min(self.min_new_tokens, wanted):
                out[i] = Sample(text="", prompt_token_ids=prompts[i], finish_reason="context")
                continue
            limits[i] = (min(wanted, room), room < wanted)
            key = (
                float(self.temperature if r.temperature is None else r.temperature),
                float(self.top_p if r.top_p is None else r.top_p),
                tuple(r.stop),
            )
            groups.setdefault(key, []).append(i)
        for (temp, top_p, stops), idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                comps = self.sampler.sample(
                    [prompts[i] for i in chunk],
                    max_new_tokens=[limits[i][0] for i in chunk],
                    temperature=temp,
                    top_p=top_p,
                    row_seeds=[self._row_seed(requests[i].seed, i) for i in chunk],
                    stop_check=self._stop_checker(stops) if stops else None,
                    stop_window=max((len(x) for x in stops), default=0) + 4,
                    on_progress=self._progress_fn(tuple(requests[i].role for i in chunk)),
                )
                for i, c in zip(chunk, comps):
                    out[i] = self._sample_of(prompts[i], c, stops, capped=limits[i][1])
        return [s for s in out if s is not None]

    def _sample_of(self, prompt: list[int], c: Any, stops: tuple[str, ...], *, capped: bool) -> Sample:
        ids, lps, reason = list(c.token_ids), list(c.logprobs), c.finish_reason
        text = self._decode(ids)
        if stops:
            cut = trim_at_stop(ids, self._decode, stops)
            if cut is not None:
                n, text = cut
                ids, lps, reason = ids[:n], lps[:n], "stop_string"
        if reason == "length" and capped:
            reason = "context"  # the window, not max_new_tokens, cut it
        return Sample(text=text, prompt_token_ids=prompt, completion_token_ids=ids, logprobs=lps, finish_reason=reason)

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode([t for t in ids if t not in self.sampler.eos_ids], skip_special_tokens=True)

    def _stop_checker(self, stops: tuple[str, ...]) -> Callable[[int, list[int]], bool]:
        def check(row: int, tail: list[int]) -> bool:
            text = self._decode(tail)
            return any(s in text for s in stops)

        return check

    def _progress_fn(self, roles: tuple[str, ...]) -> Callable[[Any], None] | None:
        sink = self.on_progress
        if sink is None:
            return None

        def report(r: Any) -> None:
            sink(
                GenerationProgress(
                    roles=roles, rows=r.rows, finished=r.finished, step=r.step, max_steps=r.max_steps, tokens=r.tokens,
                    prompt_tokens=r.prompt_tokens, elapsed_s=r.elapsed_s, prefill_s=r.prefill_s,
                )
            )

        return report

    def _row_seed(self, seed: int | None, i: int) -> int:
        """A 63-bit noise key per row: from the request's seed (and the weights version) when
        given, else from the policy's seed and a call counter."""
        material = f"{self._version}|{seed}" if seed is not None else f"{self._version}|{self.seed}:{self._calls}:{i}"
        return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "little") >> 1

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        """Load the safetensors weights at ``checkpoint`` (a path) and become ``version`` (the
        merged checkpoint holds any adapter: ``adapter`` is not needed here)."""
        require_merged_weights("transformers", version, checkpoint, adapter)
        if checkpoint is not None:
            try:
                load_weights_into(self.model, checkpoint)
            except (OSError, ValueError, RuntimeError) as exc:
                raise PolicyLoadError(f"cannot load checkpoint {checkpoint} for {version}: {exc}") from None
            # weights are copied in place: static caches and compiled graphs stay valid, but
            # cached prefixes were computed by the old weights
            self.prefix_cache.clear()
        self.checkpoint = str(checkpoint) if checkpoint is not None else None
        self._version = version

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def close(self) -> None:
        """Free the decoding state (static KV cache, compiled graphs) and the CUDA cache; the
        weights stay, so the policy can still be inspected (a later generate rebuilds its cache)."""
        self.sampler.invalidate()
        self.prefix_cache.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def describe(self) -> dict[str, Any]:
        p = next(self.model.parameters())
        return {
            "kind": self.kind,
            "model": self.model_name,
            "version": self._version,
            "dtype": str(p.dtype).replace("torch.", ""),
            "device": str(p.device),
            "parameters": int(sum(x.numel() for x in self.model.parameters())),
            "vocab": int(len(self.tokenizer)),
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "static_cache": self.sampler.static_cache,
            "compile": self.sampler.compile,
            "context_window": self.context_window,
            "prefix_cache_tokens": self.prefix_cache.max_tokens,
        }


def build(cfg: Any, *, band: tuple[float, float], data_dir: Any = None) -> TransformersPolicy:
    """The registry's factory (:mod:`spade_engine.policy.registry`): ``policy.model`` (a catalogue
    name, directory, ``.gguf`` file, offline hub id or ``tiny``) with ``policy.transformers`` and
    ``policy.generation`` (each request carries its role's settings; the agent's are the policy's
    defaults)."""
    g = cfg.generation
    t = cfg.transformers
    policy = TransformersPolicy.from_pretrained(
        model_source(cfg.model, data_dir=data_dir), device=t.device, dtype=t.dtype,
        max_new_tokens=g.agent.max_new_tokens, temperature=g.agent.temperature, top_p=g.agent.top_p,
        context_window=g.context_window, min_new_tokens=g.min_new_tokens, prefix_cache_tokens=t.prefix_cache_tokens,
        batch_size=t.batch_size,
    )
    policy.model_name = cfg.model  # what the run recorded, not this machine's cache path
    return policy
