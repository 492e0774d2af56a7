"""Rounds of plays: how often an environment is played, and the estimate of each round.

An accepted environment is played in rounds. Round 0 has ``loop.plain_k`` plain and
``loop.hinted_k`` hinted plays (paired: play i of both kinds resets with the same seed); the
designed rounds 1 .. ``loop.rounds - 1`` repeat its plain plays (the release replays each batch
of games over ``--spade-game-regeneration-interval`` rollouts and caches the hinted rewards of
the first); a level-replay round (:class:`~spade_engine.events.catalogue.EnvironmentReplayed`)
plays plain plays and, with ``replay.hinted``, hinted ones. Rounds of one environment are played
in order, each one after the previous round's estimate (so the trainer can update between them).

Every round ends with a ``RegretEstimated`` (:func:`estimate_round`, a pure function of the plays
it names and the skill's learning-potential chain):

* regret is measured with matched timing, in the latest round that has hinted plays: ``max(0,
  mean(hinted) - mean(plain))`` of that round (the release's matched-timing regret of the blend
  variant, R_hint - R_no_hint both at the regeneration step);
* the smoothed win signal pools the plain plays of the last ``loop.rounds`` rounds (the release's
  window win rate over the delay window), so 4 rounds of 8 plays give 33 levels instead of 9:
  the mean of :func:`~spade_engine.engine.regret.play_value` over them under ``reward.win_signal``
  (``solved_share``: the share solved; ``mean_reward``: the mean episode reward, -1 for a play
  whose environment failed in a step, as in the release); the band and the plateau use it;
* the value ``V`` of the round is what the environment was expected to score before its plays:
  its previous estimate's smoothed win signal (``prior``), for a first round the skill's slow EMA
  (``prev``), and for a skill's first environment the round's own mean; ``pvl`` is the positive
  value loss ``(1/K) * sum_k max(x_k - V, 0)`` of the round's plain plays' values ``x_k`` (the
  level-replay score ``replay.score = "pvl"``);
* the designer reward (:func:`~spade_engine.engine.regret.designer_reward`) is the one the
  trainer uses only for the last designed round (``designer_final``): the release computes the
  delayed proposer reward once all plays of the delay window are in;
* ``baseline`` continues the skill's slow EMA of smoothed win rates from the last designer-final
  estimate of that skill (``baseline_prev`` names it); only designer-final estimates extend the
  chain.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import LoopConfig, ReplayConfig, RewardConfig
from ..events.catalogue import EnvironmentProposed, GarbageProbe, RegretEstimated, RolloutCompleted
from .garbage import answer_ignored, garbage_wins, probe_reward, replay_won
from .regret import designer_reward, ema_update, mean, play_value, regret, win_rate
from .rollouts import PlaySpec
from .seeds import derive_seed, env_key

__all__ = ["round_play_specs", "hinted_count", "estimate_round", "Plays", "group_by_round", "signal_value", "prior_of"]

#: ``(event_id, play)`` pairs
Plays = Sequence[tuple[str, RolloutCompleted]]


def round_play_specs(seed: int | None, env_id: str, round_: int, *, plain: int, hinted: int) -> list[PlaySpec]:
    """The plays of round ``round_``: ``plain`` plain then ``hinted`` hinted plays; play i of both
    kinds uses the same environment seed. Round 0's seeds are those of the first engine
    (``derive_seed(seed, env key, "play", i)``), later rounds' add the round number."""
    key = env_key(env_id)
    n = max(plain, hinted)
    if round_ == 0:
        seeds = [derive_seed(seed, key, "play", i) for i in range(n)]
    else:
        seeds = [derive_seed(seed, key, "play", round_, i) for i in range(n)]
    return [PlaySpec(index=i, hinted=False, seed=seeds[i]) for i in range(plain)] + [
        PlaySpec(index=i, hinted=True, seed=seeds[i]) for i in range(hinted)
    ]


def hinted_count(loop: LoopConfig, replays: ReplayConfig, round_: int, *, replay: bool) -> int:
    """Hinted plays of a round: round 0 has ``loop.hinted_k``, a replay round as many with
    ``replay.hinted``, designed rounds after the first none."""
    if round_ == 0:
        return loop.hinted_k
    if replay:
        return loop.hinted_k if replays.hinted else 0
    return 0


def group_by_round(plays: Plays) -> dict[int, list[tuple[str, RolloutCompleted]]]:
    """Plays by round, each round ordered by (hinted, index)."""
    out: dict[int, list[tuple[str, RolloutCompleted]]] = {}
    for eid, p in plays:
        out.setdefault(p.round, []).append((eid, p))
    return {r: sorted(v, key=lambda x: (x[1].hinted, x[1].index)) for r, v in sorted(out.items())}


def signal_value(p: RolloutCompleted, signal: str) -> float:
    """A play's value in the win signal ``signal`` (:func:`~spade_engine.engine.regret.play_value`)."""
    return play_value(p.episode_reward, signal=signal, end_reason=p.end_reason, turns=len(p.turns))


def prior_of(estimates: Sequence[RegretEstimated], round_: int) -> float | None:
    """The smoothed win signal of the latest of ``estimates`` (one environment's) before round
    ``round_`` (``None`` when there is none): the value its round ``round_`` is compared with."""
    before = [e for e in estimates if e.round < round_]
    if not before:
        return None
    last = max(before, key=lambda e: e.round)
    return float(last.win_rate_plain if last.win_rate_smoothed is None else last.win_rate_smoothed)


def estimate_round(
    proposed: EnvironmentProposed,
    plays: Plays,
    reward: RewardConfig,
    loop: LoopConfig,
    *,
    round_: int,
    replay: bool,
    prev: tuple[str, float] | None,
    probe: GarbageProbe | None = None,
    prior: float | None = None,
    more_probes: Sequence[GarbageProbe] = (),
) -> RegretEstimated:
    """The estimate of round ``round_`` of ``proposed`` from ``plays`` (its plays of any round;
    those outside the regret round and the smoothing window are ignored) and ``prev``, the
    ``(event id, baseline)`` of the skill's last designer-final estimate (``None`` for the
    skill's first). ``probe`` is the recorded garbage probe (``HintWritten.garbage_probe``) and
    ``more_probes`` those at the other plays' seeds (``HintWritten.garbage_probes``): when any of
    them won, the environment is ``trivial`` and its designer reward is 0; so it is when more than
    half of the wrong-answer replays of the plays it names won
    (``RolloutCompleted.wrong_answer``, :func:`~spade_engine.engine.garbage.answer_ignored`).
    ``prior`` is the environment's previous estimate's smoothed win signal (:func:`prior_of`;
    ``None`` for its first round), the value ``V`` of ``pvl``. Pure: the order of ``plays`` does not matter."""
    by_round = group_by_round(plays)
    this = by_round.get(round_, [])
    hinted_rounds = [r for r, ps in by_round.items() if r <= round_ and any(p.hinted for _, p in ps)]
    q = max(hinted_rounds) if hinted_rounds else round_
    at_q = by_round.get(q, [])
    q_plain = [p.episode_reward for _, p in at_q if not p.hinted]
    q_hinted = [p.episode_reward for _, p in at_q if p.hinted]
    signal = reward.win_signal
    window = [r for r in by_round if round_ - loop.rounds < r <= round_]
    pooled = [signal_value(p, signal) for r in window for _, p in by_round[r] if not p.hinted]
    used: list[tuple[str, RolloutCompleted]] = []  # ordered by (round, hinted, index)
    for r in sorted(set(window) | {q}):
        used += [(eid, p) for eid, p in by_round.get(r, []) if r == q or not p.hinted]
    plain_now = [p.episode_reward for _, p in this if not p.hinted]
    r_value = regret(q_plain, q_hinted)
    smoothed = mean(pooled)
    timeouts = sum(1 for _, p in used if p.step_timeout)
    final = (not replay) and round_ == loop.rounds - 1
    baseline = ema_update(prev[1] if prev else None, smoothed, reward.lp_gamma_slow)
    values_now = [signal_value(p, signal) for _, p in this if not p.hinted]
    value = prior if prior is not None else (prev[1] if prev else (mean(values_now) if values_now else None))
    pvl = (sum(max(x - value, 0.0) for x in values_now) / len(values_now)) if values_now and value is not None else 0.0
    versions = sorted({p.policy_version for _, p in this})
    probes = ([probe] if probe is not None else []) + list(more_probes)
    wins = garbage_wins(probes)
    replays = [p.wrong_answer for _, p in used if p.wrong_answer is not None]
    ignored = answer_ignored(replays)
    trivial = wins > 0 or ignored
    return RegretEstimated(
        env_id=proposed.env_id,
        skill=proposed.skill,
        plain_rewards=[float(x) for x in plain_now],
        hinted_rewards=[float(x) for x in q_hinted],
        win_rate_plain=win_rate(plain_now),
        win_rate_hinted=win_rate(q_hinted),
        regret=r_value,
        designer_reward=0.0 if trivial else designer_reward(
            r_value, smoothed, variant=reward.variant, step_timeouts=timeouts, cfg=reward, baseline=baseline
        ),
        reward_variant=reward.variant,
        step_timeouts=timeouts,
        policy_version=versions[-1] if versions else "",
        rollout_ids=[eid for eid, _ in used],
        round=round_,
        win_rate_smoothed=smoothed,
        designer_final=final,
        replay=replay,
        baseline=baseline,
        baseline_prev=prev[0] if prev else None,
        win_signal=signal,
        value=value,
        pvl=float(pvl),
        trivial=trivial,
        garbage_reward=probe_reward(probe) if probe is not None else None,
        garbage_episodes=len(probes),
        garbage_wins=wins,
        wrong_answer_replays=len(replays),
        wrong_answer_wins=sum(1 for r in replays if replay_won(r)),
    )

