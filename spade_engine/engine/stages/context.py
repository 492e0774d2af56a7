"""The stage context: the shared resources of the stages of one run, and what they need of each.

:class:`StageContext` is built by :func:`spade_engine.runs.context.build_context` for every driver
and role. The resources it holds are typed by what the stages use of them (protocols): the
sandbox pool (:class:`SessionPool`), the validator (:class:`EnvValidator`), the novelty memory
(:class:`NoveltyMemory`) and the embedder (:class:`Embedder`). It also carries each policy role's
generation settings onto that role's requests (:meth:`StageContext.request`) and times the work
(:class:`Timings`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np

from ...archive.examples import MemoryExamples
from ...config import EngineConfig, GenerationConfig
from ...policy.protocol import Policy, PolicyRequest, Role, Sample
from ...policy.request_context import RequestContext
from ..corpus import Corpus
from ..rollouts import Session
from ..seed_archive import SeedEnv
from ..skills import skill_names
from .rotation import choose_skill

if TYPE_CHECKING:
    from ...sandbox.validator import ValidationReport

__all__ = [
    "NoveltyMemory",
    "Embedder",
    "EnvValidator",
    "SessionPool",
    "RoleSettings",
    "Timings",
    "StageContext",
    "role_settings",
]


class NoveltyMemory(Protocol):
    """What the stages need from the archive's ``EnvironmentMemory``."""

    def novelty(self, vec: np.ndarray) -> tuple[float, str | None]: ...

    def vector(self, env_id: str) -> np.ndarray | None: ...

    def examples(
        self, skill: str, query_vec: np.ndarray | None = None, k: int = 3, band: tuple[float, float] = (0.4, 0.6)
    ) -> MemoryExamples: ...


class Embedder(Protocol):
    """What the stages need from the archive's ``Embedder``: unit vectors for texts, one row each."""

    def embed(self, texts: list[str]) -> np.ndarray: ...


class EnvValidator(Protocol):
    """What the stages need from the sandbox's ``Validator``: the report on one environment source,
    its probes drawn from ``seed``."""

    def validate(self, source: str, *, seed: int | None = None) -> ValidationReport: ...


class SessionPool(Protocol):
    """What the stages need from the sandbox's ``SandboxPool``: a session (a context manager) on
    an environment source, for one play or probe."""

    def open_session(
        self, source: str, *, step_timeout_s: float | None = None, max_turns: int | None = None
    ) -> AbstractContextManager[Session]: ...


class RoleSettings(TypedDict):
    """A policy role's generation settings, as :class:`PolicyRequest` fields."""

    max_new_tokens: int | None
    temperature: float | None
    top_p: float | None
    stop: tuple[str, ...]
    enable_thinking: bool | None


@dataclass
class Timings:
    """Wall-clock seconds spent per kind of work (for progress and the benchmark)."""

    sandbox: float = 0.0
    policy: float = 0.0
    embedding: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {"sandbox": self.sandbox, "policy": self.policy, "embedding": self.embedding}


class ActivitySink:
    """Where the stages' activity lines go ("validating 4 environments", ...): the run's live
    display sets :attr:`listener` once it is drawn; until then, and without one, lines are dropped.
    It is the one channel of a :class:`StageContext` that changes after the context is built."""

    def __init__(self) -> None:
        self.listener: Callable[[str], None] | None = None

    def __call__(self, text: str) -> None:
        if self.listener is not None:
            self.listener(text)


@dataclass(frozen=True)
class StageContext:
    """Shared resources of the stages of one run, built once (:func:`~spade_engine.runs.context.build_context`);
    a driver that needs a variant (a broker policy, a worker's memory feed) makes one with
    :func:`dataclasses.replace`."""

    run_id: str
    cfg: EngineConfig
    policy: Policy
    corpus: Corpus
    validator: EnvValidator | None = None
    pool: SessionPool | None = None
    memory: NoveltyMemory | None = None
    embedder: Embedder | None = None
    embedding_model: str = ""
    encode_embedding: Callable[[np.ndarray], str] | None = None
    sandbox_layers: dict[str, bool] = field(default_factory=dict)
    step_errors: tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]] = ((), ())
    timings: Timings = field(default_factory=Timings)
    tokenize: Callable[[str], Sequence[object]] | None = None
    #: the seed archive of the run (``loop.seed_envs``), recorded at its start
    seed_envs: list[SeedEnv] = field(default_factory=list)
    #: the designer prompt builder (``designer_messages``; the benchmark swaps in its baseline)
    designer_prompt: Callable[..., list[dict[str, str]]] | None = None
    #: told what the run is doing between model calls ("validating 4 environments", ...)
    activity_sink: ActivitySink = field(default_factory=ActivitySink)

    def __post_init__(self) -> None:
        # a context for a run given no seed draws one (the engine records it in RunStarted)
        object.__setattr__(self, "cfg", self.cfg.with_run_seed())

    @property
    def seed(self) -> int:
        assert self.cfg.seed is not None
        return self.cfg.seed

    @property
    def context_window(self) -> int | None:
        """The policy's context window in tokens, when it has one (LLM backends)."""
        window = self.policy.context_window
        return int(window) if window is not None and window > 0 else None

    def skills(self) -> list[str]:
        return list(self.cfg.loop.skills) or skill_names(self.cfg.loop.skill_set)

    def skill_of(self, index: int) -> str:
        """The skill of new environment ``index`` (:func:`choose_skill` with the loop's rotation)."""
        return choose_skill(self.seed, index, self.skills(), per_block=self.cfg.loop.skills_per_block,
                            block_envs=self.cfg.loop.block_envs)

    def activity(self, text: str) -> None:
        """Tell the run's display what the stages are doing (see :class:`ActivitySink`)."""
        self.activity_sink(text)

    def request(
        self, role: Role, messages: list[dict[str, str]], *, context: RequestContext = None, seed: int | None = None
    ) -> PolicyRequest:
        """A request for ``role`` with that role's generation settings (``[policy.generation.<role>]``)."""
        return PolicyRequest(role=role, messages=messages, context=context, seed=seed, **self.settings(role))

    def settings(self, role: str) -> RoleSettings:
        """The generation settings of ``role`` as PolicyRequest fields."""
        return role_settings(self.cfg.policy.generation, role)

    def open_session(self, code: str) -> AbstractContextManager[Session]:
        """A sandbox session on ``code`` with the run's step timeout and turn budget."""
        if self.pool is None:
            raise RuntimeError("this stage runs environments in the sandbox, and the stage context has no sandbox pool")
        return self.pool.open_session(code, step_timeout_s=self.cfg.sandbox.step_timeout_s, max_turns=self.cfg.loop.turn_limit)

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        """The policy's samples for ``requests`` (one batched call), timed into ``timings.policy``.
        A request without its own temperature or token limit gets its role's from
        ``policy.generation`` (:meth:`~spade_engine.config.GenerationConfig.for_role`)."""
        requests = [_role_defaults(r, self.cfg.policy.generation) for r in requests]
        t0 = time.perf_counter()
        try:
            return self.policy.generate(list(requests))
        finally:
            self.timings.policy += time.perf_counter() - t0

    def generate_one(self, request: PolicyRequest) -> Sample:
        return self.generate([request])[0]

    def embed(self, text: str) -> np.ndarray | None:
        vecs = self.embed_many([text])
        return None if vecs is None else vecs[0]

    def embed_many(self, texts: list[str]) -> np.ndarray | None:
        """Embeddings of ``texts`` in one batched call (``None`` without an embedder)."""
        if self.embedder is None:
            return None
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        t0 = time.perf_counter()
        try:
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        finally:
            self.timings.embedding += time.perf_counter() - t0


def role_settings(generation: GenerationConfig, role: str) -> RoleSettings:
    """The generation settings of ``role`` (``[policy.generation.<role>]``) as PolicyRequest fields."""
    g = generation.for_role(role)
    return {
        "max_new_tokens": g.max_new_tokens, "temperature": g.temperature, "top_p": g.top_p,
        "stop": tuple(g.stop), "enable_thinking": g.enable_thinking,
    }


def _role_defaults(req: PolicyRequest, generation: GenerationConfig) -> PolicyRequest:
    """``req`` with every generation field it leaves unset (None, or no stop strings) taken from
    its role's section."""
    try:
        settings = role_settings(generation, req.role)
    except ValueError:
        return req  # a role without a section (an evaluation request) keeps the backend's settings
    fill: dict[str, Any] = {k: v for k, v in settings.items() if getattr(req, k) in (None, ()) and v not in (None, ())}
    return dataclasses.replace(req, **fill) if fill else req
