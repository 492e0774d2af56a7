"""Regret and designer reward: pure functions of recorded play rewards.

* episode reward: the last step's reward clipped to [-1, 1] if the episode terminated, else 0;
* a play is *won* when its episode reward reaches 1.0 (solved); the win rate is the share of won
  plays;
* the **win signal** ``w`` (``reward.win_signal``, :data:`WIN_SIGNALS`) is the mean of one value
  per plain play (:func:`play_value`), pooled over the smoothing window
  (:mod:`spade_engine.engine.rounds`); the band, the plateau and the learning-potential EMA read it:

  - ``solved_share`` (default): ``w = (1/K) * sum_k [R_k >= 1]``, the share of solved plays;
  - ``mean_reward`` (the release): ``w = (1/K) * sum_k x_k`` with ``x_k = R_k``, the episode
    reward, except ``x_k = -1`` for a play whose environment failed in a ``step()`` (it raised or
    its sandbox died: ``end_reason`` ``error`` or ``sandbox_crash`` after at least one turn). The
    release's blend and ``learning_potential`` read ``mean(accumulated raw rewards)`` of the window
    (``recompute_delayed_env_rewards_blend``: ``win_rate = _mean_or_zero(all_window_r)``;
    ``recompute_delayed_env_rewards``: ``abs(mean(game_rewards) - baseline)`` and the LP update with
    ``mean(rewards)``), where a raw reward is the trajectory's ``episode_reward`` (``original_reward``)
    and a ``step()`` that raised is a terminated step with reward -1 (``SyntheticGameEnv.step``).
    Plays the release's harness loses (load or reset failures, hung steps: ``TrajectoryStatus.FAILED``)
    are dropped from its plain plays and count 0 in its hinted ones; here they keep their recorded
    episode reward (0). The ``-1`` the release gives FAILED plays applies only to its GRPO z-score
    (``normalize_actor_rewards``), which FAILED plays never reach;

* regret = mean(hinted rewards) - mean(plain rewards) of episode rewards, floored at 0 (under
  either win signal);
* designer reward variants (:data:`VARIANTS`, each ``f(regret, w, cfg, baseline)`` with ``w``
  the smoothed win signal; before the trainer's baseline and scale,
  :mod:`spade_engine.trainer.baselines`):

  - ``blend`` (default): ``regret_weight * clip(regret / regret_scale, 0, 1) + plateau_weight *
    plateau(w)`` = ``0.4 * clip(regret / 0.15, 0, 1) + 0.6 * plateau(w)``, the release's blend
    recipe (``recompute_delayed_env_rewards_blend`` with ``--spade-regret-floor``, plateau weight
    0.6, regret weight 0.4, regret scale 0.15);
  - ``solve_rate``: ``plateau(w)`` alone (the release's solve-rate ablation: blend with plateau
    weight 1, regret weight 0);
  - ``regret``: regret alone (the release's ``regret_based`` raw signal, floored at 0);
  - ``learning_potential``: ``|w - mu_slow|`` with ``mu_slow`` the skill's slow EMA of win rates
    after folding in ``w`` (``mu <- (1 - g) * mu + g * w``, first value ``mu = w``, ``g =
    reward.lp_gamma_slow``), exactly the release's ``recompute_delayed_env_rewards`` raw signal
    ``|accumulated win rate - mu_slow|`` with its LP tracker updated before the baselines
    (``update_lp=True``) and ``LearningPotential.update`` (``spade/core/learning_potential.py``);
    the release updates once per delayed batch of a skill, this engine once per environment;
  - ``outcome_variance``: ``4 * w * (1 - w)`` (the variance of a play's outcome, maximal at w =
    0.5): this engine's earlier ``learning_potential``, kept under its own name;

  where ``plateau(w)`` is 1 in ``[band_low, band_high]`` and falls linearly to 0 at ``band_low -
  plateau_ramp`` and ``band_high + plateau_ramp`` (the release's ``plateau_reward(win_rate, lo,
  hi, ramp)``: ``max(0, 1 - (lo - w) / ramp)`` below the band, ``max(0, 1 - (w - hi) / ramp)``
  above; ramp 0.25 gives 0 at <= 0.15 and >= 0.85 for the default band);

* a ``step()`` timeout in the plays scores the environment ``step_timeout_penalty`` (-0.5, the
  release's ``STEP_TIMEOUT_PENALTY``) instead of its variant's value, for the variants
  ``reward.step_timeout_scope`` names (:func:`timeout_penalised`): ``all`` (default) every variant;
  ``regret`` only the ``regret`` variant, as in the release, where only ``regret_based``
  (``assign_env_rewards_regret``, ``recompute_delayed_env_rewards_regret``) replaces the raw signal
  by the penalty, and the blend and ``learning_potential`` score a timed-out game from its plays.

Nothing here reads clocks or random state: replaying the log reproduces every number exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config import RewardConfig

__all__ = [
    "WIN_THRESHOLD",
    "WIN_SIGNALS",
    "episode_reward",
    "mean",
    "win_rate",
    "play_value",
    "timeout_penalised",
    "regret",
    "plateau",
    "ema_update",
    "designer_reward",
    "RegretResult",
    "estimate",
    "VARIANTS",
    "in_band",
]

WIN_THRESHOLD = 1.0 - 1e-9

#: the win signals (``reward.win_signal``): what the band, the plateau and the LP EMA read
WIN_SIGNALS = ("solved_share", "mean_reward")

#: end reasons of a play whose environment failed during a step (with at least one turn played)
_ENV_FAILED = ("error", "sandbox_crash")


def episode_reward(last_step_reward: float | None, terminated: bool) -> float:
    """The reward of a play: last step reward clipped to [-1, 1] if it terminated, else 0."""
    if not terminated or last_step_reward is None:
        return 0.0
    return max(-1.0, min(1.0, float(last_step_reward)))


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def win_rate(rewards: Sequence[float]) -> float:
    """Share of plays that solved the environment (episode reward 1.0)."""
    return float(sum(1 for r in rewards if r >= WIN_THRESHOLD) / len(rewards)) if rewards else 0.0


def play_value(episode_reward_: float, *, signal: str = "solved_share", end_reason: str = "", turns: int = 0) -> float:
    """One plain play's value in the win signal ``signal``: ``solved_share``: 1.0 if the episode
    reward reaches 1.0, else 0.0; ``mean_reward``: the episode reward, or -1.0 when the
    environment failed in a ``step()`` (``end_reason`` ``error`` or ``sandbox_crash`` after
    ``turns >= 1``; the release's ``SyntheticGameEnv`` turns a raising ``step()`` into a terminated
    step with reward -1). The win signal is the mean of these values."""
    if signal == "solved_share":
        return 1.0 if float(episode_reward_) >= WIN_THRESHOLD else 0.0
    if signal == "mean_reward":
        if end_reason in _ENV_FAILED and turns > 0:
            return -1.0
        return float(episode_reward_)
    raise ValueError(f"unknown win signal {signal!r} (expected one of {', '.join(WIN_SIGNALS)})")


def timeout_penalised(variant: str, cfg: RewardConfig | None = None) -> bool:
    """Whether a step timeout replaces ``variant``'s value by the penalty
    (``reward.step_timeout_scope``: ``all`` = every variant, ``regret`` = the regret variant only,
    as in the release)."""
    cfg = cfg or RewardConfig()
    return cfg.step_timeout_scope == "all" or variant == "regret"


def regret(plain: Sequence[float], hinted: Sequence[float]) -> float:
    """mean(hinted) - mean(plain), floored at 0."""
    return max(0.0, mean(hinted) - mean(plain))


def plateau(w: float, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """1 in [low, high], ``max(0, 1 - (low - w) / ramp)`` below, ``max(0, 1 - (w - high) / ramp)``
    above (the release's ``plateau_reward``)."""
    if w < low:
        return max(0.0, 1.0 - (low - w) / ramp)
    if w > high:
        return max(0.0, 1.0 - (w - high) / ramp)
    return 1.0


def in_band(w: float, low: float = 0.4, high: float = 0.6) -> bool:
    """Whether a win rate is in the frontier band."""
    return low <= w <= high


def ema_update(prev: float | None, value: float, gamma: float) -> float:
    """The release's ``LearningPotential.update`` of one moving average: ``value`` when there is
    no previous value, else ``(1 - gamma) * prev + gamma * value`` (``gamma`` weighs the new value)."""
    if prev is None:
        return float(value)
    return (1.0 - gamma) * float(prev) + gamma * float(value)


def _plateau(w: float, cfg: RewardConfig) -> float:
    return plateau(w, cfg.band_low, cfg.band_high, cfg.plateau_ramp)


def _blend(regret_value: float, w: float, cfg: RewardConfig, baseline: float | None = None) -> float:
    """``regret_weight * clip(regret / regret_scale, 0, 1) + plateau_weight * plateau(w)``."""
    return cfg.regret_weight * min(1.0, max(0.0, regret_value / cfg.regret_scale)) + cfg.plateau_weight * _plateau(w, cfg)


def _solve_rate(regret_value: float, w: float, cfg: RewardConfig, baseline: float | None = None) -> float:
    """``plateau(w)``."""
    return _plateau(w, cfg)


def _regret_only(regret_value: float, w: float, cfg: RewardConfig, baseline: float | None = None) -> float:
    """``regret``."""
    return float(regret_value)


def _learning_potential(regret_value: float, w: float, cfg: RewardConfig, baseline: float | None = None) -> float:
    """``|w - mu_slow|``, ``mu_slow`` the skill's slow EMA including ``w`` (``w`` itself when
    no baseline is given: a skill's first environment scores 0, as in the release)."""
    return abs(float(w) - (float(w) if baseline is None else float(baseline)))


def _outcome_variance(regret_value: float, w: float, cfg: RewardConfig, baseline: float | None = None) -> float:
    """``4 * w * (1 - w)``."""
    return 4.0 * w * (1.0 - w)


#: every designer reward variant: ``reward.variant`` -> ``f(regret, smoothed win rate, cfg, baseline)``
VARIANTS: dict[str, Callable[..., float]] = {
    "blend": _blend,
    "solve_rate": _solve_rate,
    "regret": _regret_only,
    "learning_potential": _learning_potential,
    "outcome_variance": _outcome_variance,
}


def designer_reward(
    regret_value: float,
    win_rate_plain: float,
    *,
    variant: str = "blend",
    step_timeouts: int = 0,
    cfg: RewardConfig | None = None,
    baseline: float | None = None,
) -> float:
    """The designer's reward for one environment (see the module docstring and :data:`VARIANTS`);
    ``win_rate_plain`` is the (smoothed) win signal, ``baseline`` the skill's slow EMA
    (``learning_potential``). With ``step_timeouts > 0`` it is ``step_timeout_penalty`` where
    :func:`timeout_penalised` says so, else the variant's value."""
    cfg = cfg or RewardConfig()
    fn = VARIANTS.get(variant)
    if fn is None:
        raise ValueError(f"unknown designer reward variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    if step_timeouts > 0 and timeout_penalised(variant, cfg):
        return float(cfg.step_timeout_penalty)
    return float(fn(regret_value, win_rate_plain, cfg, baseline))


@dataclass(frozen=True)
class RegretResult:
    """Everything RegretEstimated records about one environment's plays."""

    plain_rewards: list[float]
    hinted_rewards: list[float]
    win_rate_plain: float
    win_rate_hinted: float
    regret: float
    designer_reward: float
    variant: str
    step_timeouts: int


def estimate(
    plain: Sequence[float],
    hinted: Sequence[float],
    *,
    step_timeouts: int = 0,
    cfg: RewardConfig | None = None,
) -> RegretResult:
    """Regret, win rates and designer reward from the episode rewards of plain and hinted plays
    (the designer reward reads the win signal ``reward.win_signal`` of the plain rewards)."""
    cfg = cfg or RewardConfig()
    wp, wh = win_rate(plain), win_rate(hinted)
    r = regret(plain, hinted)
    w = mean([play_value(x, signal=cfg.win_signal) for x in plain])
    return RegretResult(
        plain_rewards=[float(x) for x in plain],
        hinted_rewards=[float(x) for x in hinted],
        win_rate_plain=wp,
        win_rate_hinted=wh,
        regret=r,
        designer_reward=designer_reward(r, w, variant=cfg.variant, step_timeouts=step_timeouts, cfg=cfg),
        variant=cfg.variant,
        step_timeouts=step_timeouts,
    )
