"""The hint stage: the policy reads an accepted environment's source and writes a privileged hint
(``HintWritten``); the environment is also probed with garbage actions in sessions like the first
round's plays (:mod:`spade_engine.engine.garbage`), so a game that rewards anything scores its
designer nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...events.catalogue import EnvironmentProposed, GarbageProbe, HintWritten
from ...policy.request_context import HintContext
from ...sandbox.probes import garbage_actions
from ..at_once import at_once
from ..garbage import run_garbage_probe
from ..hints import clean_hint, hint_messages
from ..seeds import derive_seed, env_key
from .context import StageContext

__all__ = ["garbage_probe", "garbage_probes", "write_hint"]


def _probe_call(ctx: StageContext, proposed: EnvironmentProposed, index: int) -> Callable[[], GarbageProbe]:
    """The garbage probe at the seed of the first round's play ``index``, as a call to run."""
    key = env_key(proposed.env_id)
    seed = derive_seed(ctx.seed, key, "play", index)  # play ``index``'s seed in round 0 (rounds.round_play_specs)
    actions = garbage_actions(
        derive_seed(ctx.seed, key, "garbage") if index == 0 else derive_seed(ctx.seed, key, "garbage", index),
        ctx.cfg.loop.turn_limit,
    )
    return lambda: run_garbage_probe(lambda: ctx.open_session(proposed.code), seed=seed, actions=actions)


def _run_probes(ctx: StageContext, proposed: EnvironmentProposed, indices: range) -> list[GarbageProbe]:
    """The probes at ``indices``, at once on the pool's workers (:func:`..at_once.at_once`),
    timed into ``timings.sandbox`` here (in the stage's thread)."""
    if ctx.pool is None:
        return []
    t0 = time.perf_counter()
    try:
        return at_once([_probe_call(ctx, proposed, i) for i in indices], ctx.cfg.sandbox.workers)
    finally:
        ctx.timings.sandbox += time.perf_counter() - t0


def garbage_probe(ctx: StageContext, proposed: EnvironmentProposed, index: int = 0) -> GarbageProbe | None:
    """The play-time garbage probe of an accepted environment at the seed of its first round's
    play ``index`` (None without a sandbox)."""
    probes = _run_probes(ctx, proposed, range(index, index + 1))
    return probes[0] if probes else None


def garbage_probes(ctx: StageContext, proposed: EnvironmentProposed) -> list[GarbageProbe]:
    """The garbage probes at the seeds of the first round's other plays (1..k-1)."""
    return _run_probes(ctx, proposed, range(1, max(ctx.cfg.loop.plain_k, ctx.cfg.loop.hinted_k)))


def write_hint(ctx: StageContext, proposed: EnvironmentProposed) -> HintWritten:
    """The policy reads the environment's source and writes a privileged hint; the environment is
    also probed with garbage in a session like a play's (recorded in ``garbage_probe``)."""
    ctx.activity(f"hinter: writing the hint of {proposed.env_id}")
    req = ctx.request(
        "hinter",
        hint_messages(proposed.code),
        context=HintContext(env_id=proposed.env_id, skill=proposed.skill, code=proposed.code),
        seed=derive_seed(ctx.seed, env_key(proposed.env_id), "hint"),
    )
    sample = ctx.generate_one(req)
    probes = _run_probes(ctx, proposed, range(max(1, ctx.cfg.loop.plain_k, ctx.cfg.loop.hinted_k)))  # plain play 0's seed first
    return HintWritten(
        env_id=proposed.env_id, hint=clean_hint(sample.text), policy_version=ctx.policy.version,
        generation=sample.generation(), garbage_probe=probes[0] if probes else None, garbage_probes=probes[1:],
    )
