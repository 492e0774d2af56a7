"""The stage table: what each stage of an environment reads and writes, which role runs it, which
stage an environment needs next, and the deterministic ids of stage outputs.

Both drivers use this table: the single-process loop (:mod:`.loop`) runs whatever
:func:`next_stage` says for the first unfinished environment; each distributed role
(:mod:`.worker`) reads :func:`role_inputs` from its consumer group and runs its stages. So the two
make the same decisions from the same events, and an output appended twice (a worker killed after
its append, before its commit; an engine restarted mid-stage) is recorded once, because its event
id is a function of (run, type, environment, play slot) only (:func:`output_event_id`).

Stages of one environment, in order::

    validate  EnvironmentProposed  -> EnvironmentValidated   (validator)
    repair    EnvironmentValidated -> EnvironmentProposed    (designer; rejected ones, up to loop.max_repairs)
    hint      EnvironmentValidated -> HintWritten            (rollout; accepted ones; + garbage probe)
    play      HintWritten          -> RolloutCompleted x (plain + hinted)   (rollout; round 0)
    regret    RolloutCompleted     -> RegretEstimated        (regret; once a round's plays are in)
    round     RegretEstimated      -> RolloutCompleted x plain              (rollout; designed rounds 1..loop.rounds-1)
    replay    EnvironmentReplayed  -> RolloutCompleted x (plain [+ hinted]) (rollout; a level-replay round)

Rounds (:mod:`.rounds`) are played in order: a round is open until its RegretEstimated exists;
the due rounds of an environment are its designed rounds and the rounds its level-replay choices
(:mod:`.level_replay`) added.

Rejected means invalid (a failed check, a truncated completion) or a near-copy of an archived
environment (``duplicate``): both go back to the designer. Seed environments (the seed archive,
recorded when a run starts, :func:`missing_seeds`) are validated like any other, never repaired,
and hinted and played only with ``loop.seed_plays``.

The designer works in batches (:func:`design_batch`): the repairs waiting, then new slots, up to
``loop.designer_batch`` requests in one batched generate call. Each proposal's id and sampling
seed depend on its slot only, so batching changes no decision.
"""

from __future__ import annotations

import time
import uuid

import msgspec
from collections.abc import Callable
from dataclasses import dataclass

from ..blobs import BlobStore
from ..config import LoopConfig, ReplayConfig
from ..policy.protocol import Policy
from ..policy.versions import load_policy_update, loaded_event
from ..events.catalogue import (
    EnvironmentProposed,
    EnvironmentReplayed,
    EnvironmentValidated,
    EventPayload,
    HintWritten,
    PolicyLoaded,
    RegretEstimated,
    RolloutCompleted,
)
from . import rounds, stages
from .designer import CodeExample
from .rollouts import PlaySpec
from .stages import StageName, WorkerRole, seed_env_id
from .state import EnvState, RunState

__all__ = [
    "Emit",
    "seed_env_id",
    "missing_seeds",
    "seed_examples",
    "design_batch",
    "Stage",
    "STAGES",
    "role_inputs",
    "env_id_for",
    "output_event_id",
    "next_stage",
    "due_rounds",
    "open_round",
    "missing_plays",
    "new_env",
    "run_stage",
    "load_latest_policy",
]

Emit = Callable[[EventPayload, "str | None"], object]
"""Records one stage output: ``emit(payload, causation_id)``."""

_NS = uuid.UUID("5f0c7a52-8d7e-4b7e-9a53-2f4a1f5b7d10")


def env_id_for(run_id: str, index: int, attempt: int = 0) -> str:
    """Deterministic environment id of slot ``index`` (and repair ``attempt``) of a run."""
    base = f"{run_id[-6:]}-e{index:05d}"
    return base if attempt == 0 else f"{base}-r{attempt}"


def _index_of(env_id: str) -> int:
    part = env_id.split("-e", 1)[1]
    return int(part.split("-", 1)[0])


def output_event_id(run_id: str, payload: EventPayload) -> str:
    """The deterministic event id of a stage output: one per (run, type, environment, play slot),
    and per round for rounds after the first (so a first round keeps the ids it always had)."""
    parts = [run_id, payload.TYPE, str(getattr(payload, "env_id", ""))]
    if isinstance(payload, RolloutCompleted):
        parts += ["hinted" if payload.hinted else "plain", str(payload.index)]
    round_ = getattr(payload, "round", 0) if isinstance(payload, (RolloutCompleted, RegretEstimated, EnvironmentReplayed)) else 0
    if round_:
        parts.append(f"round{round_}")
    return str(uuid.uuid5(_NS, "/".join(parts)))


# -- the handlers ---------------------------------------------------------------------------------


def _validate(ctx: stages.StageContext, state: RunState, st: EnvState, emit: Emit, should_stop: Callable[[], bool]) -> None:
    assert st.proposed is not None  # next_stage names validate only for a proposal
    emit(stages.validate(ctx, st.proposed), st.proposed_id)


def _repair(ctx: stages.StageContext, state: RunState, st: EnvState, emit: Emit, should_stop: Callable[[], bool]) -> None:
    p, verdict = st.proposed, st.validated
    assert p is not None and verdict is not None  # a repair follows a verdict
    env_id = env_id_for(state.run_id, _index_of(p.env_id), p.attempt + 1)
    payload = stages.propose_repair(ctx, env_id=env_id, failed=p, verdict=verdict, skill_history=state.skill_history)
    emit(payload, st.validated_id)


def _hint(ctx: stages.StageContext, state: RunState, st: EnvState, emit: Emit, should_stop: Callable[[], bool]) -> None:
    assert st.proposed is not None
    emit(stages.write_hint(ctx, st.proposed), st.validated_id)


def _round_cause(st: EnvState, round_: int) -> str | None:
    """What a round's plays follow from: the hint (round 0), the level-replay choice, or the
    previous round's estimate."""
    if round_ == 0:
        return st.hint_id
    if round_ in st.replays:
        return st.replays[round_][0]
    prev = st.estimates.get(round_ - 1)
    return prev[0] if prev else st.hint_id


def _play(ctx: stages.StageContext, state: RunState, st: EnvState, emit: Emit, should_stop: Callable[[], bool]) -> None:
    assert st.proposed is not None and st.hint is not None  # plays follow the hint (next_stage)
    round_ = open_round(ctx.cfg.loop, st) or 0
    cause = _round_cause(st, round_)

    def done(payload: RolloutCompleted) -> None:
        if round_:
            kind = "h" if payload.hinted else "p"
            payload = msgspec.structs.replace(payload, round=round_, play_id=f"{payload.env_id}/r{round_}/{kind}{payload.index}")
        emit(payload, cause)

    stages.play(ctx, st.proposed, st.hint, missing_plays(ctx.cfg.loop, ctx.cfg.replay, st, round_, seed=ctx.cfg.seed), on_done=done, should_stop=should_stop,
                first_round=round_ == 0)


def _regret(ctx: stages.StageContext, state: RunState, st: EnvState, emit: Emit, should_stop: Callable[[], bool]) -> None:
    round_ = open_round(ctx.cfg.loop, st) or 0
    p = st.proposed
    assert p is not None
    est = rounds.estimate_round(
        p, st.all_plays(), ctx.cfg.reward, ctx.cfg.loop, round_=round_, replay=round_ in st.replays, prev=state.lp_heads.get(p.skill),
        probe=st.hint.garbage_probe if st.hint is not None else None,
        more_probes=st.hint.garbage_probes if st.hint is not None else (),
        prior=rounds.prior_of([e for _, e in st.estimates.values()], round_),
    )
    emit(est, _round_cause(st, round_))


Handler = Callable[[stages.StageContext, RunState, EnvState, Emit, Callable[[], bool]], None]


@dataclass(frozen=True)
class Stage:
    """One stage: the event that makes it runnable, what it appends, and the role that runs it."""

    name: StageName
    input_event: str
    outputs: tuple[str, ...]
    role: WorkerRole
    handler: Handler


STAGES: dict[StageName, Stage] = {
    s.name: s
    for s in (
        Stage(StageName.VALIDATE, EnvironmentProposed.TYPE, (EnvironmentValidated.TYPE,), WorkerRole.VALIDATOR, _validate),
        Stage(StageName.REPAIR, EnvironmentValidated.TYPE, (EnvironmentProposed.TYPE,), WorkerRole.DESIGNER, _repair),
        Stage(StageName.HINT, EnvironmentValidated.TYPE, (HintWritten.TYPE,), WorkerRole.ROLLOUT, _hint),
        Stage(StageName.PLAY, HintWritten.TYPE, (RolloutCompleted.TYPE,), WorkerRole.ROLLOUT, _play),
        Stage(StageName.REGRET, RolloutCompleted.TYPE, (RegretEstimated.TYPE,), WorkerRole.REGRET, _regret),
        Stage(StageName.ROUND, RegretEstimated.TYPE, (RolloutCompleted.TYPE,), WorkerRole.ROLLOUT, _play),
        Stage(StageName.REPLAY, EnvironmentReplayed.TYPE, (RolloutCompleted.TYPE,), WorkerRole.ROLLOUT, _play),
    )
}


def role_inputs(role: WorkerRole | str) -> tuple[str, ...]:
    """The event types a role's consumer group must handle: the inputs of its stages that the
    role does not produce itself (the rollout role writes the hint its plays start from)."""
    own = [s for s in STAGES.values() if s.role == role]
    produced = {t for s in own for t in s.outputs}
    out: list[str] = []
    for s in own:
        if s.input_event not in produced and s.input_event not in out:
            out.append(s.input_event)
    return tuple(out)


# -- decisions ------------------------------------------------------------------------------------


def next_stage(loop: LoopConfig, replays: ReplayConfig, st: EnvState, *, seed: int | None) -> StageName | None:
    """The stage environment ``st`` needs next (a key of :data:`STAGES`), or None when done
    (``seed``: the run's)."""
    if st.validated is None:
        return StageName.VALIDATE
    if st.is_seed and not loop.seed_plays:
        return None
    if st.repairable:
        if st.repaired_by is None and st.proposed is not None and st.proposed.attempt < loop.max_repairs:
            return StageName.REPAIR
        return None
    if not st.accepted:
        return None
    if st.hint is None:
        return StageName.HINT
    round_ = open_round(loop, st)
    if round_ is None:
        return None
    if missing_plays(loop, replays, st, round_, seed=seed):
        return StageName.PLAY if round_ == 0 else (StageName.REPLAY if round_ in st.replays else StageName.ROUND)
    return StageName.REGRET


def due_rounds(loop: LoopConfig, st: EnvState) -> list[int]:
    """The rounds environment ``st`` is to be played in: its designed rounds, then its replays."""
    return list(range(loop.rounds)) + sorted(r for r in st.replays if r >= loop.rounds)


def open_round(loop: LoopConfig, st: EnvState) -> int | None:
    """The first due round without its estimate (a round is complete once estimated), or None."""
    for r in due_rounds(loop, st):
        if r not in st.estimates:
            return r
    return None


def missing_plays(loop: LoopConfig, replays: ReplayConfig, st: EnvState, round_: int = 0, *, seed: int | None) -> list[PlaySpec]:
    """The play specs of round ``round_`` of ``st`` not yet recorded (``seed``: the run's)."""
    hinted = rounds.hinted_count(loop, replays, round_, replay=round_ in st.replays)
    specs = rounds.round_play_specs(seed, st.env_id, round_, plain=loop.plain_k, hinted=hinted)
    recorded = st.plays_of(round_)
    return [s for s in specs if (s.hinted, s.index) not in recorded]


def missing_seeds(ctx: stages.StageContext, state: RunState) -> list[EnvironmentProposed]:
    """The EnvironmentProposed of every seed of ``ctx.seed_envs`` the run has not recorded yet."""
    out = []
    for i, seed in enumerate(ctx.seed_envs):
        env_id = seed_env_id(state.run_id, i)
        st = state.envs.get(env_id)
        if st is None or st.proposed is None:
            out.append(stages.seed_proposal(ctx, seed, env_id))
    return out


def seed_examples(state: RunState) -> list[CodeExample]:
    """The run's accepted seed environments, as complete examples for designer prompts."""
    return [
        CodeExample(env_id=st.env_id, code=st.proposed.code, skill=st.proposed.skill, note=f"skill {st.proposed.skill}")
        for st in state.seeds()
        if st.accepted and st.proposed is not None
    ]


def new_env(ctx: stages.StageContext, state: RunState, index: int) -> EventPayload:
    """The EnvironmentProposed of new slot ``index`` (guided by the estimates in ``state``)."""
    return stages.propose(
        ctx, env_id=env_id_for(state.run_id, index), index=index, skill_history=state.skill_history,
        recent_env=state.recent_accepted, examples_pool=seed_examples(state),
    )


def design_batch(
    ctx: stages.StageContext, state: RunState, *, repairs: list[EnvState], new_indices: list[int]
) -> list[tuple[EnvironmentProposed, str | None]]:
    """``(proposal, causation id)`` for the repairs of ``repairs`` and the new slots
    ``new_indices``, from one batched generate call (repairs first, then slots in order)."""
    jobs: list[stages.DesignJob] = []
    causes: list[str | None] = []
    for st in repairs:
        p = st.proposed
        assert p is not None and st.validated is not None
        jobs.append(
            stages.repair_job(
                ctx, env_id=env_id_for(state.run_id, _index_of(p.env_id), p.attempt + 1), failed=p, verdict=st.validated,
                skill_history=state.skill_history,
            )
        )
        causes.append(st.validated_id)
    pool = seed_examples(state)
    for index in new_indices:
        jobs.append(
            stages.design_job(
                ctx, env_id=env_id_for(state.run_id, index), index=index, skill_history=state.skill_history,
                recent_env=state.recent_accepted, examples_pool=pool,
            )
        )
        causes.append(None)
    return list(zip(stages.propose_batch(ctx, jobs), causes))


def run_stage(
    ctx: stages.StageContext,
    state: RunState,
    st: EnvState,
    stage: StageName | str,
    emit: Emit,
    *,
    should_stop: Callable[[], bool] = lambda: False,
) -> None:
    """Run ``stage`` for environment ``st`` and ``emit`` its outputs (one per play for plays)."""
    assert st.proposed is not None
    try:
        handler = STAGES[StageName(stage)].handler
    except (KeyError, ValueError):
        raise ValueError(f"unknown stage {stage!r}") from None
    handler(ctx, state, st, emit, should_stop)


def load_latest_policy(
    policy: Policy, state: RunState, blobs: BlobStore | None, *, producer_role: str = "engine"
) -> PolicyLoaded | None:
    """Switch ``policy`` to the newest PolicyUpdated version in ``state`` (from the trainer);
    return the PolicyLoaded event to record when it changed (``None`` when it did not)."""
    if not state.policy_updates:
        return None
    latest = state.policy_updates[-1]
    if latest.version == policy.version:
        return None
    if blobs is None:
        t = time.perf_counter()
        policy.load_version(latest.version, None)
        return loaded_event(policy, latest, time.perf_counter() - t, producer_role=producer_role)
    seconds = load_policy_update(policy, latest, blobs)
    return loaded_event(policy, latest, seconds, producer_role=producer_role)
