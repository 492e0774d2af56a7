"""The hint stage: the policy reads an accepted environment's source and writes a privileged hint
(``HintWritten``); the environment is also probed with garbage actions in sessions like the first
round's plays (:mod:`spade_engine.engine.garbage`), so a game that rewards anything scores its
designer nothing.
"""

from __future__ import annotations

import time

from ...events.catalogue import EnvironmentProposed, GarbageProbe, HintWritten
from ...policy.request_context import HintContext
from ...sandbox.probes import garbage_actions
from ..garbage import run_garbage_probe
from ..hints import clean_hint, hint_messages
from ..seeds import derive_seed, env_key
from .context import StageContext

__all__ = ["garbage_probe", "garbage_probes", "write_hint"]


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
        return run_garbage_probe(lambda: ctx.open_session(proposed.code), seed=seed, actions=actions)
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
        context=HintContext(env_id=proposed.env_id, skill=proposed.skill, code=proposed.code),
        seed=derive_seed(ctx.seed, env_key(proposed.env_id), "hint"),
    )
    sample = ctx.generate_one(req)
    return HintWritten(
        env_id=proposed.env_id, hint=clean_hint(sample.text), policy_version=ctx.policy.version,
        generation=sample.generation(), garbage_probe=garbage_probe(ctx, proposed),
        garbage_probes=garbage_probes(ctx, proposed),
    )
