"""The design stage: designer requests for new slots and for repairs, and the proposals
(``EnvironmentProposed``) recorded from the designer's replies.

:func:`design_job` builds the request of a new slot (skill, nominal difficulty and document drawn
from the run seed; memory and complete examples in the prompt, :mod:`.prompt`); :func:`repair_job`
sends a rejected candidate back with its verdict; :func:`propose_batch` turns several jobs into
one batched generate call. :func:`seed_proposal` records a seed environment of the run's archive.

A proposal records the designer format its prompt was written in (``designer_format``); a repair
keeps it and follows it (a proposal recorded before the field existed is read from its prompt).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...archive.examples import MemoryExamples
from ...events.catalogue import DocumentRef, EnvironmentProposed, EnvironmentValidated
from ...policy.protocol import PolicyRequest, Sample
from ...policy.request_context import DesignContext, DocumentFacts, RepairFacts
from ...sandbox.scaffold import game_line_numbers
from ...sandbox.scaffold import inline as inline_scaffold
from ..designer import CodeExample, declared_difficulty, extract_code, repair_messages
from ..designer_formats import designer_format, format_of_prompt
from ..seed_archive import SeedEnv
from ..seeds import derive_seed, env_key
from ..skills import skill_info
from .context import StageContext
from .prompt import code_examples, fit_prompt, prompt_builder

__all__ = [
    "NOMINAL_DIFFICULTIES",
    "DesignJob",
    "design_job",
    "repair_job",
    "propose_batch",
    "propose",
    "propose_repair",
    "seed_proposal",
]

NOMINAL_DIFFICULTIES = (0.2, 0.5, 0.8)


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
    doc_ref: DocumentRef | None
    attempt: int
    repair_of: str | None
    prompt: str
    #: the designer format the prompt is written in (``None``: a prompt builder of the caller's own)
    designer_format: str | None = None


def _designer_request(
    ctx: StageContext, messages: list[dict[str, str]], skill: str, *, context: DesignContext, seed: int
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
        designer_format=job.designer_format,
    )


def propose_batch(ctx: StageContext, jobs: Sequence[DesignJob]) -> list[EnvironmentProposed]:
    """The proposals of ``jobs``, from one batched generate call."""
    if not jobs:
        return []
    ctx.activity(f"designer: {len(jobs)} proposal(s) in one batch")
    samples = ctx.generate([j.request for j in jobs])
    return [_proposal(ctx, job, sample) for job, sample in zip(jobs, samples)]


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
    shown_examples = code_examples(ctx, examples_pool, skill=skill, env_id=env_id, index=index)
    prompt_fn = ctx.designer_prompt or prompt_builder(ctx.cfg.loop)

    def build(ex: list[CodeExample], text: str) -> list[dict[str, str]]:
        return prompt_fn(
            skill=skill, difficulty=nominal, document_text=text, examples=examples, code_examples=ex,
            turn_budget=ctx.cfg.loop.turn_limit, topic=doc.title,
        )

    messages, shown = fit_prompt(ctx, build, shown_examples, doc.text)
    text = messages[-1]["content"].split("<REFERENCE_DOCUMENT>\n", 1)[-1].split("\n</REFERENCE_DOCUMENT>", 1)[0]
    if shown:  # the complete examples shown are the proposal's parents too
        examples = MemoryExamples(
            frontier=[{"env_id": e.env_id} for e in shown] + list(examples.frontier),
            negatives=list(examples.negatives), neighbours=list(examples.neighbours),
        )
    context = DesignContext(
        env_id=env_id, index=index, skill=skill, difficulty=nominal, turn_limit=ctx.cfg.loop.turn_limit,
        document=DocumentFacts(doc_id=doc.doc_id, title=doc.title, text=text, domain=doc.domain),
        skill_history=tuple(skill_history(skill)), run_history=tuple(skill_history(None)),
        parents=tuple(examples.parents), avoid=tuple(examples.avoid),
    )
    req = _designer_request(ctx, messages, skill, context=context, seed=derive_seed(ctx.seed, env_key(env_id), "design"))
    return DesignJob(
        request=req, env_id=env_id, skill=skill, nominal=nominal, messages=messages, examples=examples,
        doc_ref=doc.ref(), attempt=0, repair_of=None, prompt=messages[-1]["content"],
        designer_format=ctx.cfg.loop.designer_format if ctx.designer_prompt is None else None,
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
    prompt_fn = ctx.designer_prompt or prompt_builder(ctx.cfg.loop)
    system = prompt_fn(skill=failed.skill, difficulty=failed.difficulty, document_text="")[0]["content"]
    base = [{"role": "system", "content": system}, {"role": "user", "content": failed.prompt}]
    # the format the failed proposal was asked in (read from its prompt when it did not record it)
    fmt = format_of_prompt(failed.prompt) if failed.designer_format is None else designer_format(failed.designer_format)
    messages = repair_messages(
        base, failed.completion, error_kind=verdict.error_kind, failed_check=verdict.failed_check,
        detail=game_line_numbers(failed.code, _detail(verdict)),  # the lines of the code the designer wrote
        nearest=verdict.nearest_env_id, max_new_tokens=ctx.cfg.policy.generation.designer.max_new_tokens,
        advice=fmt.advice, short_lines=fmt.short_lines,
        show_code=ctx.cfg.loop.repair_shows_code,
    )
    doc = failed.document
    context = DesignContext(
        env_id=env_id, skill=failed.skill, difficulty=failed.difficulty, turn_limit=ctx.cfg.loop.turn_limit,
        document=DocumentFacts(doc_id=doc.doc_id, title=doc.title, text="", domain=doc.domain) if doc else None,
        skill_history=tuple(skill_history(failed.skill)),
        repair=RepairFacts(code=failed.code, error_kind=verdict.error_kind, failed_check=verdict.failed_check),
    )
    examples = MemoryExamples(
        frontier=[{"env_id": p} for p in failed.parents], neighbours=[{"env_id": a} for a in failed.avoid]
    )
    req = _designer_request(ctx, messages, failed.skill, context=context, seed=derive_seed(ctx.seed, env_key(env_id), "design"))
    return DesignJob(
        request=req, env_id=env_id, skill=failed.skill, nominal=failed.difficulty, messages=messages, examples=examples,
        doc_ref=failed.document, attempt=failed.attempt + 1, repair_of=failed.env_id,
        prompt=failed.prompt,  # the original designer prompt, so repairs of repairs rebuild the conversation
        designer_format=failed.designer_format,
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
