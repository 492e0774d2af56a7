"""The play stage: k plain and k hinted plays of an environment in sandbox sessions, each
recorded as a ``RolloutCompleted`` (:func:`~spade_engine.engine.rollouts.play_episodes` runs them,
several at once, their model calls batched). Play i of both kinds uses the same environment seed
(:func:`play_specs`), so plain and hinted plays are paired.

Each won play of an environment's first round is replayed once more before it is recorded, at the
same seed with a deliberately wrong final answer of the same shape
(:func:`~spade_engine.engine.garbage.run_wrong_answer_replay`, ``RolloutCompleted.wrong_answer``):
the regret stage gives no designer reward to an environment that such replays still win.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import msgspec

from ...events.catalogue import EnvironmentProposed, HintWritten, RolloutCompleted
from ...policy.request_context import PlayContext
from ...sandbox.probes import wrong_answer
from ..garbage import run_wrong_answer_replay
from ..regret import WIN_THRESHOLD
from ..rollouts import PlaySpec, Session, play_episodes
from ..seeds import derive_seed, env_key
from .context import StageContext

__all__ = ["play_specs", "play", "replay_with_a_wrong_answer"]


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
    first_round: bool = True,
) -> list[RolloutCompleted]:
    """Run ``specs`` through sandbox sessions; ``on_done`` receives each finished play (the
    plays are also returned, as handed to it).
    ``first_round``: the plays are the environment's first round, whose won plays are replayed
    with a wrong final answer (:func:`replay_with_a_wrong_answer`) before they are handed on."""
    timeout_errors, crash_errors = ctx.step_errors

    def open_session() -> AbstractContextManager[Session]:
        return ctx.open_session(proposed.code)

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
        context=PlayContext(skill=proposed.skill, difficulty=proposed.difficulty),
        timeout_errors=timeout_errors,
        crash_errors=crash_errors,
        on_done=done,
        should_stop=should_stop,
        concurrency=max(1, ctx.cfg.sandbox.workers),
        settings=ctx.settings("agent"),
        after_play=(lambda payload: replay_with_a_wrong_answer(ctx, proposed, payload)) if first_round else None,
    )


def replay_with_a_wrong_answer(ctx: StageContext, proposed: EnvironmentProposed, payload: RolloutCompleted) -> RolloutCompleted:
    """``payload`` with its ``wrong_answer`` replay when it is a won play (every turn of a won
    play was sent to step(), the last one winning): the same actions at the same seed in a fresh
    session, the last one replaced by :func:`~spade_engine.sandbox.probes.wrong_answer` (drawn
    from the run seed, the environment and the play). A lost play, or one without a sandbox, is
    returned as it is. Its time is counted by the caller (it runs in a thread of
    :func:`~spade_engine.engine.rollouts.play_episodes`, beside other plays' replays)."""
    if ctx.pool is None or not payload.turns or payload.error is not None or payload.episode_reward < WIN_THRESHOLD:
        return payload
    actions = [t.action for t in payload.turns]
    wrong = wrong_answer(actions[-1], derive_seed(ctx.seed, env_key(proposed.env_id), "wrong", payload.hinted, payload.index))
    replay = run_wrong_answer_replay(lambda: ctx.open_session(proposed.code), seed=payload.seed, actions=actions, wrong=wrong)
    return msgspec.structs.replace(payload, wrong_answer=replay)
