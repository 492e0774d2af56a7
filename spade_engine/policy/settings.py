"""The settings sections of the built-in policy backends: ``[policy.procedural]``,
``[policy.transformers]``, ``[policy.llamacpp]`` and ``[policy.vllm]``.

Each backend registers its settings model with its name (:mod:`.registry`), and
:class:`~spade_engine.config.PolicyConfig` validates one section per registered backend, so a
new backend brings its own section without editing the config module. These models live apart
from the backends themselves so that reading a config never imports torch or vLLM.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BackendSettings", "ProceduralPolicyConfig", "TransformersPolicyConfig", "VllmPolicyConfig", "LlamaCppPolicyConfig"]


class BackendSettings(BaseModel):
    """A base for a backend's settings section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ProceduralPolicyConfig(BackendSettings):
    """The procedural simulation's knobs (``policy.kind = "procedural"``)."""

    agent_skill: float = Field(0.7, ge=0.0, le=1.0, description="simulated agent's chance of a correct action")
    hint_gain: float = Field(0.25, ge=0.0, le=1.0, description="how much a hint raises the agent's skill")
    adaptive: bool = Field(True, description="steer each skill's difficulty by the recorded win rates and regret")
    defect_rate: float = Field(0.15, ge=0.0, le=1.0, description="share of deliberately broken proposals")
    repair_success: float = Field(0.8, ge=0.0, le=1.0, description="chance a repair fixes the defect")


class TransformersPolicyConfig(BackendSettings):
    """The Hugging Face transformers backend (``policy.kind = "transformers"``)."""

    device: str = Field("auto", description="cpu, cuda, cuda:N or auto (CUDA when there is one)")
    dtype: str = Field("auto", description="auto (bf16 on a CUDA device that supports it, else fp32), bf16, fp16 or fp32")
    batch_size: int = Field(64, ge=1, description="rows per batched generate call")
    prefix_cache_tokens: int = Field(
        65_536, ge=0, description="tokens of earlier prompts + completions kept for reuse (0 = no prefix cache)"
    )


class VllmPolicyConfig(BackendSettings):
    """The vLLM backend (``policy.kind = "vllm"``, optional GPU extra)."""

    dtype: str = Field("auto", description="vLLM's dtype (auto, bfloat16, float16)")
    gpu_memory_utilization: float = Field(0.5, gt=0.0, le=1.0, description="share of the GPU's memory vLLM may take (weights and KV cache)")


class LlamaCppPolicyConfig(BackendSettings):
    """The llama.cpp backend (``policy.kind = "llamacpp"``: GGUF models on a CPU)."""

    parallel: int = Field(8, ge=1, le=256, description="sequences decoded together (continuous batching)")
    context_per_sequence: int = Field(
        4096, ge=256, description="KV cells per sequence: a prompt and its completion fit in it (the context window)"
    )
    threads: int = Field(
        0, ge=0, description="decoding threads (0: as many as other processes leave free, decided before each decode call)"
    )
    batch_tokens: int = Field(1024, ge=16, description="tokens per llama_decode call at most (prefill chunk size)")
    kv_unified: bool = Field(
        False, description="one KV buffer shared by every sequence instead of one each (slower attention at many rows)"
    )
