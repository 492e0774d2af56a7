"""The Hugging Face transformers policy backend (CPU or GPU; the default for real runs).

:class:`TransformersPolicy` implements :class:`~spade_engine.policy.protocol.Policy`:

* built from a local path or hub id (offline: ``local_files_only`` whenever ``HF_HUB_OFFLINE``
  or ``TRANSFORMERS_OFFLINE`` is set), from an already-built model + tokenizer, or as a tiny
  seeded random model (:meth:`TransformersPolicy.from_tiny`, for tests);
* renders chat messages with the tokenizer's chat template when it has one, else a simple
  ``<|role|>\\ncontent\\n`` fallback ending with ``<|assistant|>\\n``;
* generates in left-padded batches through :class:`~.decoding.BatchSampler` (static KV cache,
  optional ``torch.compile``), returning prompt ids, completion ids and the behaviour log-prob
  of each sampled token under the (temperature-scaled) sampling distribution;
* ``load_version(version, path)`` loads a safetensors checkpoint written by the trainer
  (:func:`~.hf.load_weights_into`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .decoding import BatchSampler
from .hf import PolicyLoadError, load_weights_into, model_source, offline, resolve_device, resolve_dtype
from .protocol import PolicyRequest, Sample

__all__ = ["TransformersPolicy", "PolicyLoadError", "render_messages", "offline", "resolve_device", "resolve_dtype", "build"]


def render_messages(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Prompt token ids for chat ``messages``: the chat template if any, else the fallback format."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)
    text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"
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
    ):
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
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        eos = set()
        for e in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
            if isinstance(e, int):
                eos.add(e)
            elif isinstance(e, (list, tuple)):
                eos.update(int(x) for x in e)
        self.sampler = BatchSampler(model, pad_id=pad, eos_ids=sorted(eos), static_cache=static_cache, compile=compile)
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
        return render_messages(self.tokenizer, request.messages)

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        """One sample per request, batched by (max_new_tokens, temperature) in chunks of ``batch_size``."""
        self._calls += 1
        prompts = [self.render(r) for r in requests]
        out: list[Sample | None] = [None] * len(requests)
        groups: dict[tuple[int, float], list[int]] = {}
        for i, r in enumerate(requests):
            key = (
                int(r.max_new_tokens or self.max_new_tokens),
                float(self.temperature if r.temperature is None else r.temperature),
            )
            groups.setdefault(key, []).append(i)
        for (n_new, temp), idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                gen = torch.Generator(device=self.sampler.device)
                gen.manual_seed(self._chunk_seed([requests[i].seed for i in chunk]))
                comps = self.sampler.sample(
                    [prompts[i] for i in chunk], max_new_tokens=n_new, temperature=temp, top_p=self.top_p, generator=gen
                )
                for i, c in zip(chunk, comps):
                    text = self.tokenizer.decode(
                        [t for t in c.token_ids if t not in self.sampler.eos_ids], skip_special_tokens=True
                    )
                    out[i] = Sample(
                        text=text,
                        prompt_token_ids=prompts[i],
                        completion_token_ids=c.token_ids,
                        logprobs=c.logprobs,
                        finish_reason=c.finish_reason,
                    )
        return [s for s in out if s is not None]

    def _chunk_seed(self, seeds: list[int | None]) -> int:
        """One seed for a batch: from the requests' seeds when all are given, else a call counter."""
        if all(s is not None for s in seeds):
            material = ",".join(str(s) for s in seeds)
        else:
            material = f"{self.seed}:{self._calls}:{seeds}"
        return int.from_bytes(hashlib.sha256(f"{self._version}|{material}".encode()).digest()[:8], "little") >> 1

    def load_version(self, version: str, checkpoint: str | None) -> None:
        """Load the safetensors weights at ``checkpoint`` (a path) and become ``version``."""
        if checkpoint is not None:
            try:
                load_weights_into(self.model, checkpoint)
            except (OSError, ValueError, RuntimeError) as exc:
                raise PolicyLoadError(f"cannot load checkpoint {checkpoint} for {version}: {exc}") from None
            # weights are copied in place: static caches and compiled graphs stay valid
        self.checkpoint = str(checkpoint) if checkpoint is not None else None
        self._version = version

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def close(self) -> None:
        """Free the decoding state (static KV cache, compiled graphs) and the CUDA cache; the
        weights stay, so the policy can still be inspected (a later generate rebuilds its cache)."""
        self.sampler.invalidate()
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
        }


def build(cfg: Any, *, band: tuple[float, float], data_dir: Any = None) -> TransformersPolicy:
    """The registry's factory (:mod:`spade_engine.policy.registry`): ``policy.model`` (a catalogue
    name, directory, ``.gguf`` file, offline hub id or ``tiny``) with ``policy.transformers`` and
    ``policy.generation``."""
    g = cfg.generation
    policy = TransformersPolicy.from_pretrained(
        model_source(cfg.model, data_dir=data_dir), device=cfg.transformers.device, dtype=cfg.transformers.dtype,
        max_new_tokens=g.max_new_tokens, temperature=g.temperature, top_p=g.top_p,
    )
    policy.model_name = cfg.model  # what the run recorded, not this machine's cache path
    return policy
