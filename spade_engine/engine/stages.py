"""The stages of the self-play pipeline, each a function from input events to output payloads.

Stages hold no state of their own: the single-process loop (:mod:`.loop`) and distributed workers
read the input events from the log, call a stage, and append what it returns. Stages:

* :func:`propose`: corpus document + memory examples -> designer -> ``EnvironmentProposed``
  (and :func:`propose_repair` for a failed candidate);
* :func:`validate`: sandboxed validator (seeds and probes drawn from the run seed and the env
  key) + embedding novelty -> ``EnvironmentValidated``;
* :func:`write_hint`: hint writer + the play-time garbage probe (:mod:`.garbage`) -> ``HintWritten``;
* :func:`play`: k plain + k hinted plays in the sandbox -> ``RolloutCompleted`` each;
* :func:`estimate_regret` (pure): plays + the garbage probe -> ``RegretEstimated``.

Seeds are derived from ``(run seed, env key, ...)`` with :func:`derive_seed`, never from a running
random state, so a resumed run makes the same choices for the same environment, and two runs with
the same seed make the same choices everywhere (:func:`env_key` is the environment id without the
run's own suffix).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..config import EngineConfig, RewardConfig
from ..events.catalogue import (
    EnvironmentProposed,
    EnvironmentValidated,
    GarbageProbe,
    HintWritten,
    RegretEstimated,
    RolloutCompleted,
    ValidationCheck,
)
from ..archive.examples import MemoryExamples
from ..sandbox.probes import garbage_actions
from .bounds import bound_validated
from .corpus import Corpus, truncate_tokens
from .designer import (
    SKILLS,
    declared_difficulty,
    designer_messages,
    extract_code,
    novelty_text,
    repair_messages,
)
from .garbage import run_garbage_probe
from .hints import clean_hint, hint_messages
from ..policy.protocol import Policy, PolicyRequest, Sample
from .rollouts import PlaySpec, play_episodes
from .rounds import estimate_round
from .seeds import derive_seed, env_key

__all__ = [
    "derive_seed",
    "env_key",
    "NOMINAL_DIFFICULTIES",
    "StageContext",
    "Timings",
    "choose_skill",
    "propose",
    "propose_repair",
    "validate",
    "validation_seed",
    "garbage_probe",
    "write_hint",
    "play_specs",
    "play",
    "estimate_regret",
]

NOMINAL_DIFFICULTIES = (0.2, 0.5, 0.8)


class NoveltyMemory(Protocol):
    """What the stages need from the archive's ``EnvironmentMemory``."""

    def novelty(self, vec: np.ndarray) -> tuple[float, str | None]: ...

    def vector(self, env_id: str) -> np.ndarray | None: ...

    def examples(
        self, skill: str, query_vec: np.ndarray | None = None, k: int = 3, band: tuple[float, float] = (0.4, 0.6)
    ) -> MemoryExamples: ...


class Embedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class Timings:
    """Wall-clock seconds spent per kind of work (for progress and the benchmark)."""

    sandbox: float = 0.0
    policy: float = 0.0
    embedding: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {"sandbox": self.sandbox, "policy": self.policy, "embedding": self.embedding}


@dataclass
class StageContext:
    """Shared resources of the stages of one run."""

    run_id: str
    cfg: EngineConfig
    policy: Policy
    corpus: Corpus
    validator: Any = None
    pool: Any = None
    memory: NoveltyMemory | None = None
    embedder: Embedder | None = None
    embedding_model: str = ""
    encode_embedding: Callable[[np.ndarray], str] | None = None
    sandbox_layers: dict[str, bool] = field(default_factory=dict)
    step_errors: tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]] = ((), ())
    timings: Timings = field(default_factory=Timings)
    tokenize: Callable[[str], Sequence[object]] | None = None

    @property
    def seed(self) -> int:
        return self.cfg.seed

    def skills(self) -> list[str]:
        return list(self.cfg.loop.skills) or list(SKILLS)

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        """The policy's samples for ``requests`` (one batched call), timed into ``timings.policy``.
        A request without its own temperature or token limit gets its role's from
        ``policy.generation`` (:meth:`~spade_engine.config.GenerationConfig.for_role`)."""
        requests = [_role_defaults(r, self.cfg) for r in requests]
        t0 = time.perf_counter()
        try:
            return self.policy.generate(list(requests))
        finally:
            self.timings.policy += time.perf_counter() - t0

    def generate_one(self, request: PolicyRequest) -> Sample:
        return self.generate([request])[0]

    def embed(self, text: str) -> np.ndarray | None:
        if self.embedder is None:
            return None
        t0 = time.perf_counter()
        try:
            return np.asarray(self.embedder.embed([text])[0], dtype=np.float32)
        finally:
            self.timings.embedding += time.perf_counter() - t0


def _role_defaults(req: PolicyRequest, cfg: EngineConfig) -> PolicyRequest:
    temperature, max_new = cfg.policy.generation.for_role(req.role)
    if (temperature is None or req.temperature is not None) and (max_new is None or req.max_new_tokens is not None):
        return req
    return dataclasses.replace(
        req,
        temperature=req.temperature if req.temperature is not None else temperature,
        max_new_tokens=req.max_new_tokens if req.max_new_tokens is not None else max_new,
    )


def choose_skill(seed: int, index: int, skills: Sequence[str]) -> str:
    """Skill of environment ``index``: each block of ``len(skills)`` environments covers every
    skill once, in a seeded order."""
    block, pos = divmod(index, len(skills))
    order = list(skills)
    random.Random(derive_seed(seed, "skills", block)).shuffle(order)
    return order[pos]


def _domain(skill: str) -> str | None:
    info = SKILLS.get(skill)
    return info.domain if info else None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _proposal(
    ctx: StageContext,
    *,
    env_id: str,
    skill: str,
    nominal: float,
    messages: list[dict[str, str]],
    context: dict[str, Any],
    examples: MemoryExamples,
    doc_ref: Any,
    attempt: int,
    repair_of: str | None,
    prompt: str | None = None,
) -> EnvironmentProposed:
    req = PolicyRequest(role="designer", messages=messages, context=context, seed=derive_seed(ctx.seed, env_key(env_id), "design"))
    sample = ctx.generate_one(req)
    code = extract_code(sample.text) or ""
    difficulty = declared_difficulty(code)
    return EnvironmentProposed(
        env_id=env_id,
        skill=skill,
        difficulty=round(nominal if difficulty is None else difficulty, 6),
        code=code,
        code_sha256=_sha(code),
        policy_version=ctx.policy.version,
        document=doc_ref,
        parents=examples.parents,
        avoid=examples.avoid,
        attempt=attempt,
        repair_of=repair_of,
        prompt=messages[-1]["content"] if prompt is None else prompt,
        completion=sample.text,
        generation=sample.generation(),
        designer=ctx.policy.kind,
    )


def propose(
    ctx: StageContext,
    *,
    env_id: str,
    index: int,
    skill_history: Callable[[str], list[tuple[float, float, float]]],
    recent_env: Callable[[str], str | None] = lambda skill: None,
) -> EnvironmentProposed:
    """A new environment for slot ``index``: skill, nominal difficulty and document are chosen
    from the run seed; memory examples come from the novelty memory (if any): frontier positives
    and negatives of the skill, and as neighbours to avoid, the archive's nearest environments to
    the skill's most recent accepted one (``recent_env(skill)``; its recorded embedding is reused,
    so no model call is needed)."""
    skill = choose_skill(ctx.seed, index, ctx.skills())
    nominal = random.Random(derive_seed(ctx.seed, env_key(env_id), "difficulty")).choice(NOMINAL_DIFFICULTIES)
    info = SKILLS.get(skill)
    domain = info.domain if info else None
    skills = ctx.skills()
    # documents of a domain are used in turn: count earlier slots that drew from the same domain
    earlier = sum(1 for j in range(index) if _domain(choose_skill(ctx.seed, j, skills)) == domain)
    doc = ctx.corpus.nth(ctx.seed, earlier, domain=domain)
    text = truncate_tokens(doc.text, ctx.cfg.loop.doc_token_budget, ctx.tokenize)
    examples = MemoryExamples()
    if ctx.memory is not None:
        recent = recent_env(skill)
        qv = ctx.memory.vector(recent) if recent else None
        examples = ctx.memory.examples(
            skill, query_vec=qv, k=max(1, ctx.cfg.memory.neighbours), band=(ctx.cfg.reward.band_low, ctx.cfg.reward.band_high)
        )
    messages = designer_messages(skill=skill, difficulty=nominal, document_text=text, examples=examples)
    context = {
        "env_id": env_id,
        "index": index,
        "skill": skill,
        "difficulty": nominal,
        "document": {"doc_id": doc.doc_id, "title": doc.title, "text": text, "domain": doc.domain},
        "skill_history": skill_history(skill),
        "turn_limit": ctx.cfg.loop.turn_limit,
        "examples": {"parents": examples.parents, "avoid": examples.avoid},
    }
    return _proposal(
        ctx, env_id=env_id, skill=skill, nominal=nominal, messages=messages, context=context,
        examples=examples, doc_ref=doc.ref(), attempt=0, repair_of=None,
    )


def _detail(validated: EnvironmentValidated) -> str:
    for c in validated.checks:
        if not c.passed:
            return f"{c.name}: {c.detail}"
    return validated.failed_check or ""


def propose_repair(
    ctx: StageContext,
    *,
    env_id: str,
    failed: EnvironmentProposed,
    verdict: EnvironmentValidated,
    skill_history: Callable[[str], list[tuple[float, float, float]]],
) -> EnvironmentProposed:
    """Send a failed candidate back to the designer with the validator's verdict."""
    base = [
        {"role": "system", "content": designer_messages(skill=failed.skill, difficulty=failed.difficulty, document_text="")[0]["content"]},
        {"role": "user", "content": failed.prompt},
    ]
    messages = repair_messages(
        base, failed.completion, error_kind=verdict.error_kind, failed_check=verdict.failed_check, detail=_detail(verdict)
    )
    doc = failed.document
    context = {
        "env_id": env_id,
        "skill": failed.skill,
        "difficulty": failed.difficulty,
        "document": {"doc_id": doc.doc_id, "title": doc.title, "text": "", "domain": doc.domain} if doc else {},
        "skill_history": skill_history(failed.skill),
        "turn_limit": ctx.cfg.loop.turn_limit,
        "repair": {"code": failed.code, "error_kind": verdict.error_kind, "failed_check": verdict.failed_check},
    }
    examples = MemoryExamples(
        frontier=[{"env_id": p} for p in failed.parents], neighbours=[{"env_id": a} for a in failed.avoid]
    )
    return _proposal(
        ctx, env_id=env_id, skill=failed.skill, nominal=failed.difficulty, messages=messages, context=context,
        examples=examples, doc_ref=failed.document, attempt=failed.attempt + 1, repair_of=failed.env_id,
        prompt=failed.prompt,  # the original designer prompt, so repairs of repairs rebuild the conversation
    )


def validate(ctx: StageContext, proposed: EnvironmentProposed) -> EnvironmentValidated:
    """Validate in the sandbox, then (if valid) decide novelty against the memory."""
    if not proposed.code.strip():
        return EnvironmentValidated(
            env_id=proposed.env_id,
            valid=False,
            error_kind="no_code",
            failed_check="extract",
            checks=[ValidationCheck(name="extract", passed=False, detail="the completion has no Python code block defining a class")],
            sandbox_layers=ctx.sandbox_layers,
        )
    t0 = time.perf_counter()
    try:
        report = ctx.validator.validate(proposed.code, seed=validation_seed(ctx.seed, proposed.env_id))
    finally:
        ctx.timings.sandbox += time.perf_counter() - t0
    fields = bound_validated(dict(report.payload_fields()))
    fields.setdefault("sandbox_layers", ctx.sandbox_layers)
    fields["env_id"] = proposed.env_id
    if not fields.get("valid"):
        fields["accepted"] = False
        return EnvironmentValidated(**fields)
    vec = ctx.embed(novelty_text(proposed.code))
    if vec is None or ctx.memory is None:
        fields.update(accepted=True, novel=None)
        return EnvironmentValidated(**fields)
    novelty, nearest = ctx.memory.novelty(vec)
    threshold = ctx.cfg.memory.novelty_threshold
    novel = bool(novelty >= threshold)
    fields.update(
        novel=novel,
        novelty=float(novelty),
        novelty_threshold=threshold,
        nearest_env_id=nearest,
        embedding_model=ctx.embedding_model or None,
        embedding_b64=ctx.encode_embedding(vec) if ctx.encode_embedding else None,
        accepted=novel,
    )
    if not novel:
        fields.update(error_kind="duplicate", failed_check="novelty")
    return EnvironmentValidated(**fields)


def validation_seed(seed: int, env_id: str) -> int:
    """The seed the validator draws an environment's reset seeds and probe actions from."""
    return derive_seed(seed, env_key(env_id), "validate")


def garbage_probe(ctx: StageContext, proposed: EnvironmentProposed) -> GarbageProbe | None:
    """The play-time garbage probe of an accepted environment (None without a sandbox)."""
    if ctx.pool is None:
        return None
    spec = play_specs(ctx.seed, proposed.env_id, 1)[0]  # plain play 0's seed
    actions = garbage_actions(derive_seed(ctx.seed, env_key(proposed.env_id), "garbage"), ctx.cfg.loop.turn_limit)
    t0 = time.perf_counter()
    try:
        return run_garbage_probe(
            lambda: ctx.pool.open_session(proposed.code, step_timeout_s=ctx.cfg.sandbox.step_timeout_s),
            seed=spec.seed, actions=actions,
        )
    finally:
        ctx.timings.sandbox += time.perf_counter() - t0


def write_hint(ctx: StageContext, proposed: EnvironmentProposed) -> HintWritten:
    """The policy reads the environment's source and writes a privileged hint; the environment is
    also probed with garbage in a session like a play's (recorded in ``garbage_probe``)."""
    req = PolicyRequest(
        role="hinter",
        messages=hint_messages(proposed.code),
        context={"env_id": proposed.env_id, "skill": proposed.skill, "code": proposed.code},
        seed=derive_seed(ctx.seed, env_key(proposed.env_id), "hint"),
    )
    sample = ctx.generate_one(req)
    return HintWritten(
        env_id=proposed.env_id, hint=clean_hint(sample.text), policy_version=ctx.policy.version,
        generation=sample.generation(), garbage_probe=garbage_probe(ctx, proposed),
    )


def play_specs(seed: int, env_id: str, k: int) -> list[PlaySpec]:
    """k plain and k hinted plays; play i of both kinds uses the same environment seed (paired)."""
    seeds = [derive_seed(seed, env_key(env_id), "play", i) for i in range(k)]
    return [PlaySpec(index=i, hinted=h, seed=seeds[i]) for h in (False, True) for i in range(k)]


def play(
    ctx: StageContext,
    proposed: EnvironmentProposed,
    hint: HintWritten,
    specs: Sequence[PlaySpec],
    *,
    on_done: Callable[[RolloutCompleted], None],
    should_stop: Callable[[], bool] = lambda: False,
) -> list[RolloutCompleted]:
    """Run ``specs`` through sandbox sessions; ``on_done`` receives each finished play."""
    timeout_errors, crash_errors = ctx.step_errors

    def open_session():
        return ctx.pool.open_session(proposed.code, step_timeout_s=ctx.cfg.sandbox.step_timeout_s)

    def done(payload: RolloutCompleted, sandbox_s: float) -> None:
        ctx.timings.sandbox += sandbox_s
        on_done(payload)

    return play_episodes(
        env_id=proposed.env_id,
        specs=list(specs),
        open_session=open_session,
        generate=ctx.generate,
        policy_version=ctx.policy.version,
        hint=hint.hint,
        turn_limit=ctx.cfg.loop.turn_limit,
        context={"skill": proposed.skill, "difficulty": proposed.difficulty},
        timeout_errors=timeout_errors,
        crash_errors=crash_errors,
        on_done=done,
        should_stop=should_stop,
        concurrency=max(1, ctx.cfg.sandbox.workers),
    )


def estimate_regret(
    proposed: EnvironmentProposed,
    plays: Sequence[tuple[str, RolloutCompleted]],
    reward: RewardConfig,
    probe: GarbageProbe | None = None,
) -> RegretEstimated:
    """Regret and designer reward of one environment's single round from its recorded plays (pure).

    ``plays`` are ``(event_id, payload)`` pairs; they are ordered by (hinted, index) so the
    result does not depend on the order the plays were recorded in. The loop estimates every
    round with :func:`spade_engine.engine.rounds.estimate_round` (rounds, smoothing and the
    learning-potential baseline); this is its round 0 with no earlier estimate of the skill.
    ``probe`` is the recorded garbage probe (``HintWritten.garbage_probe``): when it won, the environment is ``trivial``
    and its designer reward is 0.
    """
    cfg = EngineConfig().model_copy(update={"reward": reward})
    return estimate_round(proposed, plays, cfg, round_=0, replay=False, prev=None, probe=probe)
