"""The play stage: k plain and k hinted plays of an environment in sandbox sessions, each
recorded as a ``RolloutCompleted`` (:func:`~spade_engine.engine.rollouts.play_episodes` runs them,
several at once, their model calls batched). Play i of both kinds uses the same environment seed
(:func:`play_specs`), so plain and hinted plays are paired.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from ...events.catalogue import EnvironmentProposed, HintWritten, RolloutCompleted
from ...policy.request_context import PlayContext
from ..rollouts import PlaySpec, Session, play_episodes
from ..seeds import derive_seed, env_key
from .context import StageContext

__all__ = ["play_specs", "play"]


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
    )
