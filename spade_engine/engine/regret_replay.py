"""Recomputing every RegretEstimated of a run from the plays it names, to audit a log.

The regret stage is a pure function of recorded RolloutCompleted events, the garbage probe
recorded in HintWritten and the reward config recorded in RunStarted, so replaying the log must
give exactly the recorded numbers;
:func:`verify_regrets` lists every environment where it does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import EngineConfig, RewardConfig
from ..events.catalogue import EnvironmentProposed, GarbageProbe, HintWritten, RegretEstimated, RolloutCompleted, RunStarted
from ..events.errors import EventError
from ..events.log import EventLog
from .stages import estimate_regret

__all__ = ["RegretMismatch", "recompute_regrets", "verify_regrets"]

_FIELDS = ("plain_rewards", "hinted_rewards", "win_rate_plain", "win_rate_hinted", "regret", "designer_reward",
           "reward_variant", "step_timeouts", "rollout_ids", "trivial", "garbage_reward")


@dataclass(frozen=True)
class RegretMismatch:
    env_id: str
    field: str
    recorded: object
    recomputed: object


def recompute_regrets(log: EventLog, reward: RewardConfig | None = None) -> list[tuple[RegretEstimated, RegretEstimated]]:
    """``(recorded, recomputed)`` for every RegretEstimated in the log.

    The reward config is the one recorded by the run's first RunStarted unless given.
    """
    proposals: dict[str, EnvironmentProposed] = {}
    probes: dict[str, GarbageProbe | None] = {}
    plays: dict[str, tuple[str, RolloutCompleted]] = {}
    regrets: list[RegretEstimated] = []
    for rec in log.read():
        try:
            ev = rec.envelope.event()
        except EventError:
            continue
        if isinstance(ev, RunStarted) and reward is None:
            reward = EngineConfig.model_validate(ev.config).reward
        elif isinstance(ev, EnvironmentProposed):
            proposals.setdefault(ev.env_id, ev)
        elif isinstance(ev, HintWritten):
            probes.setdefault(ev.env_id, ev.garbage_probe)
        elif isinstance(ev, RolloutCompleted):
            plays[rec.envelope.event_id] = (rec.envelope.event_id, ev)
        elif isinstance(ev, RegretEstimated):
            regrets.append(ev)
    reward = reward or RewardConfig()
    out = []
    for r in regrets:
        used = [plays[i] for i in r.rollout_ids if i in plays]
        out.append((r, estimate_regret(proposals[r.env_id], used, reward, probes.get(r.env_id))))
    return out


def verify_regrets(log: EventLog, reward: RewardConfig | None = None) -> list[RegretMismatch]:
    """Every field where a recomputed regret differs from the recorded one (empty = exact)."""
    bad = []
    for recorded, again in recompute_regrets(log, reward):
        for f in _FIELDS:
            a, b = getattr(recorded, f), getattr(again, f)
            if a != b:
                bad.append(RegretMismatch(recorded.env_id, f, a, b))
    return bad
