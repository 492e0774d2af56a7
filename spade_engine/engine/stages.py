"""The stages of the self-play pipeline, each a function from input events to output payloads.

Stages hold no state of their own: the single-process loop (:mod:`.loop`) and distributed workers
read the input events from the log, call a stage, and append what it returns. Stages:

* :func:`propose`: corpus document + seed and memory examples -> designer -> ``EnvironmentProposed``
  (and :func:`propose_repair` for a rejected candidate); :func:`propose_batch` turns several
  design requests (new slots and repairs) into one batched generate call;
  :func:`seed_proposal` records a seed environment;
* :func:`validate` / :func:`validate_batch`: a truncated completion is rejected first (error kind
  ``truncated``), then the sandboxed validator (several at once, one per sandbox worker; seeds and
  probes drawn from the run seed and the env key) and embedding novelty (one batched embedding
  call) plus the copy check against the seed archive -> ``EnvironmentValidated``;
* :func:`write_hint`: hint writer + the play-time garbage probe (:mod:`.garbage`) -> ``HintWritten``;
* :func:`play`: k plain + k hinted plays in the sandbox -> ``RolloutCompleted`` each;
* :func:`estimate_regret` (pure): plays + the garbage probe -> ``RegretEstimated``.

Seeds are derived from ``(run seed, env key, ...)`` with :func:`derive_seed`, never from a running
random state, so a resumed run makes the same choices for the same environment, and two runs with
the same seed make the same choices everywhere (:func:`env_key` is the environment id without the
run's own suffix). Each role's generation settings (``[policy.generation.<role>]``) travel with
its requests (:meth:`StageContext.request`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import numpy as np

from ..archive.examples import MemoryExamples
from ..archive.novelty import novelty_of
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
from ..policy.protocol import Policy, PolicyRequest, Sample
from ..policy.registry import lookup as lookup_policy_backend
from ..sandbox.probes import garbage_actions
from ..sandbox.scaffold import code_format, game_line_numbers
from ..sandbox.scaffold import inline as inline_scaffold
from ..sandbox.scaffold import strip as strip_scaffold
from .bounds import bound_validated
from .corpus import Corpus, truncate_tokens
from .designer import (
    CodeExample,
    declared_difficulty,
    extract_code,
    novelty_text,
    repair_messages,
)
from .designer_formats import designer_format, format_of_prompt
from .garbage import run_garbage_probe
from .hints import clean_hint, hint_messages
from .rollouts import PlaySpec, play_episodes
from .rounds import estimate_round
from .seed_archive import SeedEnv
from .seeds import derive_seed, env_key, seed_env_id
from .skills import skill_info, skill_names

__all__ = [
    "derive_seed",
    "env_key",
    "NOMINAL_DIFFICULTIES",
    "StageContext",
    "Timings",
    "choose_skill",
    "DesignJob",
    "propose",
    "propose_batch",
    "design_job",
    "repair_job",
    "propose_repair",
    "seed_proposal",
    "validate",
    "validation_seed",
    "garbage_probe",
    "validate_batch",
    "write_hint",
    "designer_batch",
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
    #: the seed archive of the run (``loop.seed_envs``), recorded at its start
    seed_envs: list[SeedEnv] = field(default_factory=list)
    #: the designer prompt builder (``designer_messages``; the benchmark swaps in its baseline)
    designer_prompt: Callable[..., list[dict[str, str]]] | None = None
    #: told what the run is doing between model calls ("validating 4 environments", ...)
    on_activity: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        # a context for a run given no seed draws one (the engine records it in RunStarted)
        self.cfg = self.cfg.with_run_seed()

    @property
    def seed(self) -> int:
        assert self.cfg.seed is not None
        return self.cfg.seed

    @property
    def context_window(self) -> int | None:
        """The policy's context window in tokens, when it has one (LLM backends)."""
        window = getattr(self.policy, "context_window", None)
        return int(window) if isinstance(window, int) and window > 0 else None

    def skills(self) -> list[str]:
        return list(self.cfg.loop.skills) or skill_names(self.cfg.loop.skill_set)

    def skill_of(self, index: int) -> str:
        """The skill of new environment ``index`` (:func:`choose_skill` with the loop's rotation)."""
        return choose_skill(self.seed, index, self.skills(), per_block=self.cfg.loop.skills_per_block,
                            block_envs=self.cfg.loop.block_envs)

    def activity(self, text: str) -> None:
        if self.on_activity is not None:
            self.on_activity(text)

    def request(
        self, role: str, messages: list[dict[str, str]], *, context: dict[str, Any] | None = None, seed: int | None = None
    ) -> PolicyRequest:
        """A request for ``role`` with that role's generation settings (``[policy.generation.<role>]``)."""
        return PolicyRequest(role=role, messages=messages, context=context or {}, seed=seed, **self.settings(role))  # type: ignore[arg-type]

    def settings(self, role: str) -> dict[str, Any]:
        """The generation settings of ``role`` as PolicyRequest fields."""
        return role_settings(self.cfg, role)

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


def role_settings(cfg: EngineConfig, role: str) -> dict[str, Any]:
    """The generation settings of ``role`` (``[policy.generation.<role>]``) as PolicyRequest fields."""
    g = cfg.policy.generation.for_role(role)
    return {
        "max_new_tokens": g.max_new_tokens, "temperature": g.temperature, "top_p": g.top_p,
        "stop": tuple(g.stop), "enable_thinking": g.enable_thinking,
    }


def _role_defaults(req: PolicyRequest, cfg: EngineConfig) -> PolicyRequest:
    """``req`` with every generation field it leaves unset (None, or no stop strings) taken from
    its role's section."""
    try:
        settings = role_settings(cfg, req.role)
    except ValueError:
        return req  # a role without a section (an evaluation request) keeps the backend's settings
    fill = {k: v for k, v in settings.items() if getattr(req, k) in (None, ()) and v not in (None, ())}
    return dataclasses.replace(req, **fill) if fill else req


def choose_skill(seed: int, index: int, skills: Sequence[str], *, per_block: int = 0, block_envs: int = 0) -> str:
    """Skill of environment ``index``.

    ``per_block = 0`` (``loop.skills_per_block``, the default): each block of ``len(skills)``
    environments covers every skill once, in a seeded order.

    ``per_block = k > 0``: the release's skill rotation (``select_active_skills`` in
    ``spade/slime/spade_rollout.py`` with ``--spade-skills-per-regen k``, and the games of one
    regeneration assigned ``active[i % k]`` by ``generate_games_async``): block ``b`` holds
    ``block_envs`` environments (``loop.block_envs``; 0 = ``k``), its active skills are ``skills[(b
    * k + j) % n]`` for ``j < k`` (a window advancing by ``k`` each block; ``k >= n`` = every skill),
    and environment ``pos`` of the block gets ``active[pos % k]``. No seed is involved."""
    n = len(skills)
    if per_block <= 0:
        block, pos = divmod(index, n)
        order = list(skills)
        random.Random(derive_seed(seed, "skills", block)).shuffle(order)
        return order[pos]
    k = min(per_block, n)
    block, pos = divmod(index, block_envs or k)
    start = (block * k) % n if k < n else 0
    return skills[(start + pos % k) % n]


def _domain(skill: str) -> str | None:
    info = skill_info(skill)
    return info.domain if info else None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class DesignJob:
    """One designer request and what its proposal records (a new slot or a repair)."""

    request: PolicyRequest
    env_id: str
    skill: str
    nominal: float
    messages: list[dict[str, str]]
    examples: MemoryExamples
    doc_ref: Any
    attempt: int
    repair_of: str | None
    prompt: str


def _designer_request(
    ctx: StageContext, messages: list[dict[str, str]], skill: str, *, context: dict[str, Any], seed: int
) -> PolicyRequest:
    """The designer's request for ``messages``; a format with a reply prefix (the puzzle's:
    :func:`~.designer_puzzle.puzzle_reply_prefix`) starts the reply as a last assistant message
    and adds its stop strings (not for a prompt of the run's own, ``ctx.designer_prompt``)."""
    fmt = designer_format(ctx.cfg.loop.designer_format)
    if fmt.reply_prefix is None or ctx.designer_prompt is not None:
        return ctx.request("designer", messages, context=context, seed=seed)
    req = ctx.request("designer", [*messages, {"role": "assistant", "content": fmt.reply_prefix(skill)}],
                      context=context, seed=seed)
    return dataclasses.replace(req, stop=tuple(dict.fromkeys((*req.stop, *fmt.stops))))


def _reply(job: DesignJob, sample: Sample) -> str:
    """The designer's whole reply: the request's reply prefix (part of the prompt tokens) and the
    model's continuation, or the sample alone when it did not continue the prefix (a policy that
    ignores prompts writes its own code block)."""
    last = job.request.messages[-1] if job.request.messages else {}
    prefix = last.get("content", "") if last.get("role") == "assistant" else ""
    if not prefix or sample.text.lstrip().startswith("```"):
        return sample.text
    return prefix + sample.text


def _proposal(ctx: StageContext, job: DesignJob, sample: Sample) -> EnvironmentProposed:
    reply = _reply(job, sample)
    code = extract_code(reply) or ""
    code = designer_format(ctx.cfg.loop.designer_format).normalize(code)  # the format's part of the code
    code = inline_scaffold(code)  # a TextGame game is recorded with its base class
    difficulty = declared_difficulty(code)
    return EnvironmentProposed(
        env_id=job.env_id,
        skill=job.skill,
        difficulty=round(job.nominal if difficulty is None else difficulty, 6),
        code=code,
        code_sha256=_sha(code),
        policy_version=ctx.policy.version,
        document=job.doc_ref,
        parents=job.examples.parents,
        avoid=job.examples.avoid,
        attempt=job.attempt,
        repair_of=job.repair_of,
        prompt=job.prompt,
        completion=reply,
        generation=sample.generation(),
        designer=ctx.policy.kind,
    )


def propose_batch(ctx: StageContext, jobs: Sequence[DesignJob]) -> list[EnvironmentProposed]:
    """The proposals of ``jobs``, from one batched generate call."""
    if not jobs:
        return []
    ctx.activity(f"designer: {len(jobs)} proposal(s) in one batch")
    samples = ctx.generate([j.request for j in jobs])
    return [_proposal(ctx, job, sample) for job, sample in zip(jobs, samples)]


def _code_examples(ctx: StageContext, pool: Sequence[CodeExample], *, skill: str, env_id: str, index: int) -> list[CodeExample]:
    """Complete environments for the prompt of slot ``index``: one shared by the slot's batch
    (so a prefix cache reuses it), then others drawn for the slot. None is of the slot's own
    skill while other skills have examples: a small model shown an environment of the skill it
    must write copies it (measured with the 0.5B: the same-skill example came back renamed)."""
    k = ctx.cfg.loop.prompt_examples
    fmt = ctx.cfg.loop.designer_format  # examples in the format the designer writes
    pool = [e for e in pool if code_format(e.code) == fmt] or list(pool)
    if not pool or k <= 0:
        return []
    other = [e for e in pool if e.skill != skill] or list(pool)
    batch = max(1, designer_batch(ctx.cfg, ctx.policy))
    shared = pool[derive_seed(ctx.seed, "examples", index // batch) % len(pool)]  # the same for the whole batch
    chosen = [shared] if shared in other else []
    rest = [e for e in other if e not in chosen]
    while len(chosen) < k and rest:
        chosen.append(rest.pop(derive_seed(ctx.seed, env_key(env_id), "example", len(chosen)) % len(rest)))
    return chosen


def prompt_builder(cfg: EngineConfig) -> Callable[..., list[dict[str, str]]]:
    """The designer prompt of ``loop.designer_format``: a standalone environment, a TextGame game
    or a puzzle."""
    return designer_format(cfg.loop.designer_format).messages


DEFAULT_DESIGNER_BATCH = 4


def designer_batch(cfg: EngineConfig, policy: Any) -> int:
    """``loop.designer_batch``, or its default, 4 (for the simulation too: a batch's proposals are
    validated together and embedded in one call, and its ids and seeds belong to slots, so the
    batch size changes no proposal)."""
    if cfg.loop.designer_batch is not None:
        return cfg.loop.designer_batch
    return DEFAULT_DESIGNER_BATCH


def _fit_prompt(
    ctx: StageContext, build: Callable[[list[CodeExample], str], list[dict[str, str]]], examples: list[CodeExample], text: str
) -> tuple[list[dict[str, str]], list[CodeExample]]:
    """The designer messages with as many examples and as much of the document as the model's
    window allows after reserving room for the completion."""
    budget = ctx.cfg.loop.doc_token_budget
    doc = truncate_tokens(text, budget, ctx.tokenize)
    window, tok = ctx.context_window, ctx.tokenize
    if window is None or tok is None:
        return build(examples, doc), examples
    reserve = min(ctx.cfg.policy.generation.designer.max_new_tokens, window // 2)
    ex = list(examples)
    while True:
        bare = build(ex, "")
        overhead = sum(len(tok(m["content"])) for m in bare) + 32
        room = window - reserve - overhead
        if room >= min(budget, 64) or not ex:
            break
        ex.pop()
    doc = truncate_tokens(text, max(16, min(budget, room)), tok)
    return build(ex, doc), ex


def design_job(
    ctx: StageContext,
    *,
    env_id: str,
    index: int,
    skill_history: Callable[[str | None], list[tuple[float, float, float]]],
    recent_env: Callable[[str], str | None] = lambda skill: None,
    examples_pool: Sequence[CodeExample] = (),
) -> DesignJob:
    """The designer request of new slot ``index``: skill, nominal difficulty and document are
    chosen from the run seed; complete example environments come from ``examples_pool`` (the
    run's seeds); memory examples from the novelty memory (if any): frontier positives and
    negatives of the skill, and as neighbours to avoid, the archive's nearest environments to the
    skill's most recent accepted one (``recent_env(skill)``; its recorded embedding is reused, so
    no model call is needed)."""
    skill = ctx.skill_of(index)
    nominal = random.Random(derive_seed(ctx.seed, env_key(env_id), "difficulty")).choice(NOMINAL_DIFFICULTIES)
    domain = _domain(skill)
    # documents of a domain are used in turn: count earlier slots that drew from the same domain
    earlier = sum(1 for j in range(index) if _domain(ctx.skill_of(j)) == domain)
    doc = ctx.corpus.nth(ctx.seed, earlier, domain=domain)
    examples = MemoryExamples()
    if ctx.memory is not None:
        recent = recent_env(skill)
        qv = ctx.memory.vector(recent) if recent else None
        examples = ctx.memory.examples(
            skill, query_vec=qv, k=max(1, ctx.cfg.memory.neighbours), band=(ctx.cfg.reward.band_low, ctx.cfg.reward.band_high)
        )
    code_examples = _code_examples(ctx, examples_pool, skill=skill, env_id=env_id, index=index)
    prompt_fn = ctx.designer_prompt or prompt_builder(ctx.cfg)

    def build(ex: list[CodeExample], text: str) -> list[dict[str, str]]:
        return prompt_fn(
            skill=skill, difficulty=nominal, document_text=text, examples=examples, code_examples=ex,
            turn_budget=ctx.cfg.loop.turn_limit, topic=doc.title,
        )

    messages, shown = _fit_prompt(ctx, build, code_examples, doc.text)
    text = messages[-1]["content"].split("<REFERENCE_DOCUMENT>\n", 1)[-1].split("\n</REFERENCE_DOCUMENT>", 1)[0]
    if shown:  # the complete examples shown are the proposal's parents too
        examples = MemoryExamples(
            frontier=[{"env_id": e.env_id} for e in shown] + list(examples.frontier),
            negatives=list(examples.negatives), neighbours=list(examples.neighbours),
        )
    context = {
        "env_id": env_id,
        "index": index,
        "skill": skill,
        "difficulty": nominal,
        "document": {"doc_id": doc.doc_id, "title": doc.title, "text": text, "domain": doc.domain},
        "skill_history": skill_history(skill),
        "run_history": skill_history(None),
        "turn_limit": ctx.cfg.loop.turn_limit,
        "examples": {"parents": examples.parents, "avoid": examples.avoid},
    }
    req = _designer_request(ctx, messages, skill, context=context, seed=derive_seed(ctx.seed, env_key(env_id), "design"))
    return DesignJob(
        request=req, env_id=env_id, skill=skill, nominal=nominal, messages=messages, examples=examples,
        doc_ref=doc.ref(), attempt=0, repair_of=None, prompt=messages[-1]["content"],
    )


def propose(
    ctx: StageContext,
    *,
    env_id: str,
    index: int,
    skill_history: Callable[[str | None], list[tuple[float, float, float]]],
    recent_env: Callable[[str], str | None] = lambda skill: None,
    examples_pool: Sequence[CodeExample] = (),
) -> EnvironmentProposed:
    """A new environment for slot ``index`` (see :func:`design_job`)."""
    job = design_job(ctx, env_id=env_id, index=index, skill_history=skill_history, recent_env=recent_env,
                     examples_pool=examples_pool)
    return propose_batch(ctx, [job])[0]


def _detail(validated: EnvironmentValidated) -> str:
    for c in validated.checks:
        if not c.passed:
            return f"{c.name}: {c.detail}"
    return validated.failed_check or ""


def repair_job(
    ctx: StageContext,
    *,
    env_id: str,
    failed: EnvironmentProposed,
    verdict: EnvironmentValidated,
    skill_history: Callable[[str | None], list[tuple[float, float, float]]],
) -> DesignJob:
    """The request sending a rejected candidate back to the designer with the verdict: the
    validator's failed check, a truncated completion, or a near-copy ("too close to X")."""
    prompt_fn = ctx.designer_prompt or prompt_builder(ctx.cfg)
    system = prompt_fn(skill=failed.skill, difficulty=failed.difficulty, document_text="")[0]["content"]
    base = [{"role": "system", "content": system}, {"role": "user", "content": failed.prompt}]
    fmt = format_of_prompt(failed.prompt)  # the format the failed proposal was asked in
    messages = repair_messages(
        base, failed.completion, error_kind=verdict.error_kind, failed_check=verdict.failed_check,
        detail=game_line_numbers(failed.code, _detail(verdict)),  # the lines of the code the designer wrote
        nearest=verdict.nearest_env_id, max_new_tokens=ctx.cfg.policy.generation.designer.max_new_tokens,
        advice=fmt.advice, short_lines=fmt.short_lines,
        show_code=ctx.cfg.loop.repair_shows_code,
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
    req = _designer_request(ctx, messages, failed.skill, context=context, seed=derive_seed(ctx.seed, env_key(env_id), "design"))
    return DesignJob(
        request=req, env_id=env_id, skill=failed.skill, nominal=failed.difficulty, messages=messages, examples=examples,
        doc_ref=failed.document, attempt=failed.attempt + 1, repair_of=failed.env_id,
        prompt=failed.prompt,  # the original designer prompt, so repairs of repairs rebuild the conversation
    )


def propose_repair(
    ctx: StageContext,
    *,
    env_id: str,
    failed: EnvironmentProposed,
    verdict: EnvironmentValidated,
    skill_history: Callable[[str | None], list[tuple[float, float, float]]],
) -> EnvironmentProposed:
    """Send a rejected candidate back to the designer with the verdict (see :func:`repair_job`)."""
    return propose_batch(ctx, [repair_job(ctx, env_id=env_id, failed=failed, verdict=verdict, skill_history=skill_history)])[0]


def seed_proposal(ctx: StageContext, seed: SeedEnv, env_id: str) -> EnvironmentProposed:
    """The EnvironmentProposed recording seed environment ``seed`` (``designer="seed:<name>"``)."""
    return EnvironmentProposed(
        env_id=env_id,
        skill=seed.skill,
        difficulty=round(seed.difficulty, 6),
        code=seed.code,
        code_sha256=_sha(seed.code),
        policy_version=ctx.policy.version if ctx.policy is not None else "v0",
        prompt=f"seed archive: {seed.source}",
        designer=seed.designer,
    )


def _truncated(proposed: EnvironmentProposed) -> EnvironmentValidated | None:
    """The verdict on a completion the token limit or the context window cut (never validated)."""
    g = proposed.generation
    if g is None or g.finish_reason not in ("length", "context"):
        return None
    n = len(g.completion_token_ids)
    why = (
        f"the completion reached its token limit after {n} tokens (finish reason length)"
        if g.finish_reason == "length"
        else f"the prompt and the completion ({n} tokens) filled the model's context window (finish reason context)"
    )
    return EnvironmentValidated(
        env_id=proposed.env_id, valid=False, error_kind="truncated", failed_check="generation",
        checks=[ValidationCheck(name="generation", passed=False, detail=why + ", so the code is incomplete")],
    )


def validate(ctx: StageContext, proposed: EnvironmentProposed) -> EnvironmentValidated:
    """Validate one proposal (see :func:`validate_batch`)."""
    return validate_batch(ctx, [proposed])[0]


def validate_batch(ctx: StageContext, proposals: Sequence[EnvironmentProposed]) -> list[EnvironmentValidated]:
    """Verdicts on ``proposals``, in order: truncated completions and completions without code are
    rejected first; the rest run in the sandbox at once (one validation per sandbox worker); the
    valid ones are embedded in one batched call and judged for novelty against the memory and the
    earlier proposals of the batch (so two near-copies in one batch are not both accepted)."""
    out: list[EnvironmentValidated | None] = [None] * len(proposals)
    todo: list[int] = []
    for i, p in enumerate(proposals):
        cut = _truncated(p)
        if cut is not None:
            out[i] = msgspec.structs.replace(cut, sandbox_layers=dict(ctx.sandbox_layers))
        elif not p.code.strip():
            out[i] = EnvironmentValidated(
                env_id=p.env_id,
                valid=False,
                error_kind="no_code",
                failed_check="extract",
                checks=[ValidationCheck(name="extract", passed=False, detail="the completion has no Python code block defining a class")],
                sandbox_layers=ctx.sandbox_layers,
            )
        else:
            todo.append(i)
    if todo:
        ctx.activity(f"validating {len(todo)} environment(s) in the sandbox")
    reports = _sandbox_reports(ctx, [(proposals[i].code, validation_seed(ctx.seed, proposals[i].env_id)) for i in todo])
    fields_of: dict[int, dict[str, Any]] = {}
    for i, report in zip(todo, reports):
        fields = bound_validated(dict(report.payload_fields()))
        fields.setdefault("sandbox_layers", ctx.sandbox_layers)
        fields["env_id"] = proposals[i].env_id
        fields_of[i] = fields
    valid = [i for i in todo if fields_of[i].get("valid")]
    vecs = ctx.embed_many([novelty_text(proposals[i].code) for i in valid]) if valid else None
    batch_vecs: list[tuple[str, np.ndarray]] = []
    for i in todo:
        fields = fields_of[i]
        if not fields.get("valid"):
            fields["accepted"] = False
            out[i] = EnvironmentValidated(**fields)
            continue
        if vecs is None or ctx.memory is None:
            fields.update(accepted=True, novel=None)
            out[i] = EnvironmentValidated(**fields)
            continue
        vec = vecs[valid.index(i)]
        novelty, nearest = ctx.memory.novelty(vec)
        for other_id, other in batch_vecs:  # earlier accepted proposals of this batch
            n = novelty_of(float(np.dot(vec, other)))
            if n < novelty:
                novelty, nearest = n, other_id
        threshold = ctx.cfg.memory.novelty_threshold
        novel = bool(novelty >= threshold)
        copy_of, share = _copied(ctx, proposals[i]) if novel else (None, 0.0)
        fields.update(
            novel=novel,
            novelty=float(novelty),
            novelty_threshold=threshold,
            nearest_env_id=nearest,
            embedding_model=ctx.embedding_model or None,
            embedding_b64=ctx.encode_embedding(vec) if ctx.encode_embedding else None,
            accepted=novel,
        )
        if copy_of is not None:
            novel = False
            fields.update(novel=False, accepted=False, nearest_env_id=copy_of)
            why = f"the code repeats {share:.0%} of the lines of {copy_of} (copy threshold {ctx.cfg.memory.copy_threshold:g})"
        else:
            why = f"novelty {novelty:.3f} is below the threshold {threshold:g}: nearest environment {nearest}"
        if novel:
            batch_vecs.append((proposals[i].env_id, vec))
        else:
            fields.update(error_kind="duplicate", failed_check="novelty")
            fields["checks"] = list(fields.get("checks") or []) + [ValidationCheck(name="novelty", passed=False, detail=why)]
        out[i] = EnvironmentValidated(**fields)
    return [v for v in out if v is not None]


def code_lines(code: str) -> list[str]:
    """The lines of ``code`` that carry its logic: stripped, without blank lines, comments and
    docstrings (a copy that only renames the class or drops the docstring keeps them), and
    without an inlined scaffold base class (every scaffolded game carries the same one)."""
    import ast

    code = strip_scaffold(code)
    try:
        tree = ast.parse(code)
        doc_lines = set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                doc_lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    except (SyntaxError, ValueError):
        doc_lines = set()
    out = []
    for n, line in enumerate(code.splitlines(), 1):
        t = line.strip()
        if t and not t.startswith("#") and n not in doc_lines and not t.startswith("class "):
            out.append(t)
    return out


def copied_share(code: str, other: str) -> float:
    """The share of ``code``'s logic lines that appear, in order, in ``other`` (0..1)."""
    import difflib

    a, b = code_lines(code), code_lines(other)
    if not a or not b:
        return 0.0
    matched = sum(block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return matched / len(a)


def _copied(ctx: StageContext, proposed: EnvironmentProposed) -> tuple[str | None, float]:
    """The seed environment ``proposed`` is a code copy of (``memory.copy_threshold`` of its logic
    lines), and the share. Seeds are shown complete in designer prompts, so small models copy
    them with a new class name; the embedding alone lets such copies through. (Archived
    environments are compared by embedding only: the simulation's template instances share
    most of their lines by design.)"""
    limit = ctx.cfg.memory.copy_threshold
    if limit <= 0 or not ctx.seed_envs or proposed.designer.startswith("seed:"):
        return None, 0.0
    best: tuple[str | None, float] = (None, 0.0)
    for i, seed in enumerate(ctx.seed_envs):
        share = copied_share(proposed.code, seed.code)
        if share > best[1]:
            best = (seed_env_id(ctx.run_id, i), share)
    return best if best[1] >= limit else (None, best[1])


def _sandbox_reports(ctx: StageContext, jobs: list[tuple[str, int]]) -> list[Any]:
    """Validator reports for ``(code, validation seed)`` jobs, run concurrently on the sandbox
    pool's workers."""
    if not jobs:
        return []
    t0 = time.perf_counter()
    try:
        workers = max(1, min(len(jobs), ctx.cfg.sandbox.workers))
        if workers == 1:
            return [ctx.validator.validate(c, seed=sd) for c, sd in jobs]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="validate") as ex:
            return list(ex.map(lambda job: ctx.validator.validate(job[0], seed=job[1]), jobs))
    finally:
        ctx.timings.sandbox += time.perf_counter() - t0


def validation_seed(seed: int, env_id: str) -> int:
    """The seed the validator draws an environment's reset seeds and probe actions from."""
    return derive_seed(seed, env_key(env_id), "validate")


def garbage_probe(ctx: StageContext, proposed: EnvironmentProposed, index: int = 0) -> GarbageProbe | None:
    """The play-time garbage probe of an accepted environment at the seed of its first round's
    play ``index`` (None without a sandbox)."""
    if ctx.pool is None:
        return None
    key = env_key(proposed.env_id)
    seed = derive_seed(ctx.seed, key, "play", index)  # play ``index``'s seed in round 0 (rounds.round_play_specs)
    actions = garbage_actions(
        derive_seed(ctx.seed, key, "garbage") if index == 0 else derive_seed(ctx.seed, key, "garbage", index),
        ctx.cfg.loop.turn_limit,
    )
    t0 = time.perf_counter()
    try:
        return run_garbage_probe(
            lambda: ctx.pool.open_session(
                proposed.code, step_timeout_s=ctx.cfg.sandbox.step_timeout_s, max_turns=ctx.cfg.loop.turn_limit
            ),
            seed=seed, actions=actions,
        )
    finally:
        ctx.timings.sandbox += time.perf_counter() - t0


def garbage_probes(ctx: StageContext, proposed: EnvironmentProposed) -> list[GarbageProbe]:
    """The garbage probes at the seeds of the first round's other plays (1..k-1)."""
    if ctx.pool is None:
        return []
    n = max(ctx.cfg.loop.plain_k, ctx.cfg.loop.hinted_k)
    return [p for p in (garbage_probe(ctx, proposed, i) for i in range(1, n)) if p is not None]


def write_hint(ctx: StageContext, proposed: EnvironmentProposed) -> HintWritten:
    """The policy reads the environment's source and writes a privileged hint; the environment is
    also probed with garbage in a session like a play's (recorded in ``garbage_probe``)."""
    ctx.activity(f"hinter: writing the hint of {proposed.env_id}")
    req = ctx.request(
        "hinter",
        hint_messages(proposed.code),
        context={"env_id": proposed.env_id, "skill": proposed.skill, "code": proposed.code},
        seed=derive_seed(ctx.seed, env_key(proposed.env_id), "hint"),
    )
    sample = ctx.generate_one(req)
    return HintWritten(
        env_id=proposed.env_id, hint=clean_hint(sample.text), policy_version=ctx.policy.version,
        generation=sample.generation(), garbage_probe=garbage_probe(ctx, proposed),
        garbage_probes=garbage_probes(ctx, proposed),
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
        return ctx.pool.open_session(
            proposed.code, step_timeout_s=ctx.cfg.sandbox.step_timeout_s, max_turns=ctx.cfg.loop.turn_limit
        )

    def done(payload: RolloutCompleted, sandbox_s: float) -> None:
        ctx.timings.sandbox += sandbox_s
        on_done(payload)

    ctx.activity(f"agent: playing {proposed.env_id} ({len(specs)} play(s))")
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
        settings=ctx.settings("agent"),
    )


def estimate_regret(
    proposed: EnvironmentProposed,
    plays: Sequence[tuple[str, RolloutCompleted]],
    reward: RewardConfig,
    probe: GarbageProbe | None = None,
    more_probes: Sequence[GarbageProbe] = (),
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
    return estimate_round(proposed, plays, cfg, round_=0, replay=False, prev=None, probe=probe, more_probes=more_probes)
