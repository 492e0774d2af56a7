"""The vLLM policy backend (optional extra ``spade-engine[gpu]``; GPU only).

Same :class:`~spade_engine.policy.protocol.Policy` protocol as the transformers backend:
prompts rendered with the tokenizer's chat template (or the same fallback format), sampled with
``SamplingParams(logprobs=0)`` so each completion carries the log-prob of every sampled token,
and ``load_version`` pushing a trainer checkpoint (safetensors) into the running engine.

What was exercised and what was not
-----------------------------------
vLLM cannot be installed on the machine this backend was written on (no GPU, no wheel), so
**no part of this module has run against a real vLLM**. Tested here: importing this module
without vLLM works, and constructing :class:`VllmPolicy` raises :class:`VllmUnavailable` with an
install hint (``tests/test_transformers_policy.py``). Not exercised: everything that talks to
vLLM (``LLM(...)``, ``generate``, the log-prob extraction, ``load_version`` via
``LLM.apply_model`` / ``model.load_weights``). The calls follow the documented vLLM >= 0.10 API
(``logprobs_mode="processed_logprobs"`` so recorded log-probs are those of the temperature/top-p
distribution actually sampled, as the trainer expects); check them on a GPU before relying on
this backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import SpadeError
from .protocol import GenerationProgress, PolicyRequest, Sample
from .transformers_policy import render_messages

__all__ = ["VllmPolicy", "VllmUnavailable", "build"]


class VllmUnavailable(SpadeError):
    """vLLM is not installed (or cannot start here)."""


def _import_vllm() -> Any:
    try:
        import vllm  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise VllmUnavailable(
            "the vllm policy backend needs vLLM and a CUDA GPU: pip install 'spade-engine[gpu]' "
            f"(or use policy.kind = 'transformers'); import failed: {exc}"
        ) from None
    return vllm


class VllmPolicy:
    """A model served in-process by vLLM (NOT exercised at runtime; see the module docstring)."""

    kind = "vllm"
    trainable = True

    def __init__(
        self,
        model: str,
        *,
        version: str = "v0",
        dtype: str = "auto",
        max_new_tokens: int = 512,
        temperature: float = 1.0,
        top_p: float = 1.0,
        gpu_memory_utilization: float = 0.5,
        seed: int = 0,
        **llm_kwargs: Any,
    ):
        vllm = _import_vllm()
        self._vllm = vllm
        self.model_name = model
        self._version = version
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.checkpoint: str | None = None
        self.llm = vllm.LLM(
            model=model,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            logprobs_mode="processed_logprobs",
            **llm_kwargs,
        )
        self.tokenizer = self.llm.get_tokenizer()
        #: prompt + completion tokens at most (vLLM's max_model_len)
        self.context_window: int | None = int(self.llm.llm_engine.model_config.max_model_len)
        #: declared by the protocol; vLLM's generate reports no progress to it
        self.on_progress: Callable[[GenerationProgress], None] | None = None

    @property
    def version(self) -> str:
        return self._version

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        from vllm import SamplingParams  # type: ignore[import-not-found, unused-ignore]
        from vllm.inputs import TokensPrompt  # type: ignore[import-not-found, unused-ignore]

        prompts = [render_messages(self.tokenizer, r.messages, enable_thinking=r.enable_thinking) for r in requests]
        params = [
            SamplingParams(
                temperature=self.temperature if r.temperature is None else r.temperature,
                top_p=self.top_p if r.top_p is None else r.top_p,
                max_tokens=r.max_new_tokens or self.max_new_tokens,
                stop=list(r.stop) or None,
                logprobs=0,
                seed=r.seed,
            )
            for r in requests
        ]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        samples = []
        for p, out in zip(prompts, outs):
            comp = out.outputs[0]
            ids = list(comp.token_ids)
            lps = [float(step[tok].logprob) for tok, step in zip(ids, comp.logprobs or [])]
            samples.append(
                Sample(
                    text=comp.text,
                    prompt_token_ids=p,
                    completion_token_ids=ids,
                    logprobs=lps,
                    # vLLM's stop_reason is the matched stop string (str), a stop token id (int) or None
                    finish_reason=(
                        "length" if comp.finish_reason == "length"
                        else "stop_string" if isinstance(getattr(comp, "stop_reason", None), str) else "stop"
                    ),
                )
            )
        return samples

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        from .hf import require_merged_weights

        require_merged_weights("vllm", version, checkpoint, adapter)
        if checkpoint is not None:
            from .hf import load_safetensors

            weights = list(load_safetensors(checkpoint).items())
            self.llm.apply_model(lambda model: model.load_weights(weights))
            self.llm.reset_prefix_cache()
        self.checkpoint = checkpoint
        self._version = version

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def close(self) -> None:
        """Shut the in-process engine down (frees its GPU memory)."""
        llm, self.llm = self.llm, None
        engine = getattr(llm, "llm_engine", None)
        shutdown = getattr(engine, "shutdown", None)
        if callable(shutdown):
            shutdown()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model_name,
            "version": self._version,
            "vllm": getattr(self._vllm, "__version__", "?"),
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
        }


def build(cfg: Any, *, band: tuple[float, float], data_dir: Any = None) -> VllmPolicy:
    """The registry's factory (:mod:`spade_engine.policy.registry`): ``policy.model`` with
    ``policy.vllm`` and ``policy.generation``."""
    g = cfg.generation.agent  # the requests carry each role's own settings
    from .hf import model_source

    return VllmPolicy(
        model_source(cfg.model, data_dir=data_dir), dtype=cfg.vllm.dtype, gpu_memory_utilization=cfg.vllm.gpu_memory_utilization,
        max_new_tokens=g.max_new_tokens, temperature=g.temperature, top_p=g.top_p,
    )
