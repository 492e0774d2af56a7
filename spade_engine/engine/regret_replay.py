"""Recomputing every RegretEstimated of a run from the plays it names, to audit a log.

The regret stage is a pure function of recorded RolloutCompleted events (with the wrong-answer
replays they carry), the garbage probes recorded in HintWritten, the config recorded in
RunStarted (with the variant and win signal each estimate records), for the learning-potential
baseline the estimate its ``baseline_prev`` names, and for
the value of ``pvl`` the environment's previous estimate
(:func:`spade_engine.engine.rounds.estimate_round`), so replaying the log must give exactly the
recorded numbers; :func:`verify_regrets` lists every environment where it does not. Estimates
upcast from v1 (no recorded baseline) are checked on everything but the baseline, those upcast
from v2 (no recorded value) on everything but the value and ``pvl``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RewardConfig
from ..events.catalogue import EnvironmentProposed, GarbageProbe, HintWritten, RegretEstimated, RolloutCompleted
from ..events.errors import EventError
from ..events.log import EventLog
from ..recorded import recorded_config_or_default
from .rounds import estimate_round, prior_of

__all__ = ["RegretMismatch", "recompute_regrets", "verify_regrets"]

_FIELDS = ("plain_rewards", "hinted_rewards", "win_rate_plain", "win_rate_hinted", "regret", "designer_reward",
           "reward_variant", "step_timeouts", "rollout_ids", "round", "win_rate_smoothed", "designer_final", "replay",
           "trivial", "garbage_reward", "win_signal", "garbage_episodes", "garbage_wins",
           "wrong_answer_replays", "wrong_answer_wins")
_BASELINE_FIELDS = ("baseline", "baseline_prev")
_VALUE_FIELDS = ("value", "pvl")


@dataclass(frozen=True)
class RegretMismatch:
    env_id: str
    field: str
    recorded: object
    recomputed: object


def recompute_regrets(log: EventLog, reward: RewardConfig | None = None) -> list[tuple[RegretEstimated, RegretEstimated]]:
    """``(recorded, recomputed)`` for every RegretEstimated in the log whose environment's
    EnvironmentProposed is in it (:func:`verify_regrets` names the others).

    The config is the one recorded by the run's first RunStarted, read by
    :func:`~spade_engine.recorded.recorded_config_or_default` (the defaults before any RunStarted;
    a recorded config this engine cannot read raises :class:`~spade_engine.errors.ConfigError`),
    its reward section replaced by ``reward`` when given; each estimate is recomputed with the
    variant and win signal it records.
    """
    return _recompute(log, reward)[0]


def _recompute(log: EventLog, reward: RewardConfig | None) -> tuple[list[tuple[RegretEstimated, RegretEstimated]], list[str]]:
    """:func:`recompute_regrets`, and the environments of the estimates it could not recompute."""
    cfg = recorded_config_or_default(log)  # a recorded config this engine cannot read is an error
    proposals: dict[str, EnvironmentProposed] = {}
    probes: dict[str, GarbageProbe | None] = {}
    more: dict[str, list[GarbageProbe]] = {}
    plays: dict[str, tuple[str, RolloutCompleted]] = {}
    regrets: list[tuple[str, RegretEstimated]] = []
    for rec in log.read():
        try:
            ev = rec.envelope.event()
        except EventError:
            continue
        if isinstance(ev, EnvironmentProposed):
            proposals.setdefault(ev.env_id, ev)
        elif isinstance(ev, HintWritten):
            probes.setdefault(ev.env_id, ev.garbage_probe)
            more.setdefault(ev.env_id, list(ev.garbage_probes))
        elif isinstance(ev, RolloutCompleted):
            plays[rec.envelope.event_id] = (rec.envelope.event_id, ev)
        elif isinstance(ev, RegretEstimated):
            regrets.append((rec.envelope.event_id, ev))
    if reward is not None:
        cfg = cfg.model_copy(update={"reward": reward})
    by_id = dict(regrets)
    by_env: dict[str, list[RegretEstimated]] = {}
    for _, r in regrets:
        by_env.setdefault(r.env_id, []).append(r)
    out = []
    orphans = []
    for _, r in regrets:
        if r.env_id not in proposals:  # a log without the proposal: nothing to recompute it from
            orphans.append(r.env_id)
            continue
        used = [plays[i] for i in r.rollout_ids if i in plays]
        prev = None
        if r.baseline_prev is not None and r.baseline_prev in by_id and by_id[r.baseline_prev].baseline is not None:
            prev = (r.baseline_prev, float(by_id[r.baseline_prev].baseline))  # type: ignore[arg-type]
        c = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={"variant": r.reward_variant,
                                                                            "win_signal": r.win_signal})})
        out.append((r, estimate_round(proposals[r.env_id], used, c.reward, c.loop, round_=r.round, replay=r.replay, prev=prev,
                                    probe=probes.get(r.env_id), prior=prior_of(by_env[r.env_id], r.round),
                                    more_probes=more.get(r.env_id, ()))))
    return out, orphans


def verify_regrets(log: EventLog, reward: RewardConfig | None = None) -> list[RegretMismatch]:
    """Every field where a recomputed regret differs from the recorded one (empty = exact); an
    estimate whose environment has no EnvironmentProposed in the log (so nothing to recompute it
    from) is a mismatch of field ``EnvironmentProposed``."""
    pairs, orphans = _recompute(log, reward)
    bad = [RegretMismatch(env_id, "EnvironmentProposed", None, "missing from the log") for env_id in orphans]
    for recorded, again in pairs:
        fields = _FIELDS + (_BASELINE_FIELDS if recorded.baseline is not None else ()) + (
            _VALUE_FIELDS if recorded.pvl is not None else ())
        for f in fields:
            a, b = getattr(recorded, f), getattr(again, f)
            if a != b:
                bad.append(RegretMismatch(recorded.env_id, f, a, b))
    return bad

