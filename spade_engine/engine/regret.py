"""Regret and designer reward: pure functions of recorded play rewards.

* episode reward: the last step's reward clipped to [-1, 1] if the episode terminated, else 0;
* a play is *won* when its episode reward reaches 1.0 (solved); the win rate is the share of won
  plays;
* regret = mean(hinted rewards) - mean(plain rewards), floored at 0;
* designer reward variants (:data:`VARIANTS`; before the per-skill centring the trainer applies
  with :func:`spade_engine.trainer.losses.centre_per_skill`):

  - ``blend`` (default): ``0.4 * clip(regret / 0.15, 0, 1) + 0.6 * plateau(win_rate)``, where
    ``plateau`` is 1 for a win rate in [0.4, 0.6] and falls linearly to 0 at <= 0.15 and >= 0.85;
  - ``solve_rate``: ``plateau(win_rate)`` alone (reward environments the agent solves about half
    the time);
  - ``regret``: regret alone;
  - ``learning_potential``: ``4 * p * (1 - p)`` with ``p`` the plain win rate (the variance of a
    play's outcome, maximal at p = 0.5), a per-environment, order-free form of the learning
    signal so that replay gives the same number;

* any ``step()`` timeout in the plays scores the environment ``step_timeout_penalty`` (-0.5).

Nothing here reads clocks or random state: replaying the log reproduces every number exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config import RewardConfig

__all__ = [
    "WIN_THRESHOLD",
    "episode_reward",
    "mean",
    "win_rate",
    "regret",
    "plateau",
    "designer_reward",
    "RegretResult",
    "estimate",
    "VARIANTS",
    "in_band",
]

WIN_THRESHOLD = 1.0 - 1e-9
PLATEAU_ZERO_LOW = 0.15
PLATEAU_ZERO_HIGH = 0.85


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


def regret(plain: Sequence[float], hinted: Sequence[float]) -> float:
    """mean(hinted) - mean(plain), floored at 0."""
    return max(0.0, mean(hinted) - mean(plain))


def plateau(
    w: float,
    low: float = 0.4,
    high: float = 0.6,
    zero_low: float = PLATEAU_ZERO_LOW,
    zero_high: float = PLATEAU_ZERO_HIGH,
) -> float:
    """1 in [low, high], linear down to 0 at ``zero_low`` and ``zero_high``, 0 outside."""
    if low <= w <= high:
        return 1.0
    if w < low:
        return 0.0 if w <= zero_low else (w - zero_low) / (low - zero_low)
    return 0.0 if w >= zero_high else (zero_high - w) / (zero_high - high)


def in_band(w: float, low: float = 0.4, high: float = 0.6) -> bool:
    """Whether a win rate is in the frontier band."""
    return low <= w <= high


def _blend(regret_value: float, win_rate_plain: float, cfg: RewardConfig) -> float:
    """``0.4 * clip(regret / regret_scale, 0, 1) + 0.6 * plateau(win_rate)``."""
    p = plateau(win_rate_plain, cfg.band_low, cfg.band_high)
    return 0.4 * min(1.0, max(0.0, regret_value / cfg.regret_scale)) + 0.6 * p


def _solve_rate(regret_value: float, win_rate_plain: float, cfg: RewardConfig) -> float:
    """``plateau(win_rate)``."""
    return plateau(win_rate_plain, cfg.band_low, cfg.band_high)


def _regret_only(regret_value: float, win_rate_plain: float, cfg: RewardConfig) -> float:
    """``regret``."""
    return float(regret_value)


def _learning_potential(regret_value: float, win_rate_plain: float, cfg: RewardConfig) -> float:
    """``4 * p * (1 - p)`` with ``p`` the plain win rate."""
    return 4.0 * win_rate_plain * (1.0 - win_rate_plain)


#: every designer reward variant: ``reward.variant`` -> ``f(regret, plain win rate, cfg)``
VARIANTS: dict[str, Callable[[float, float, RewardConfig], float]] = {
    "blend": _blend,
    "solve_rate": _solve_rate,
    "regret": _regret_only,
    "learning_potential": _learning_potential,
}


def designer_reward(
    regret_value: float,
    win_rate_plain: float,
    *,
    variant: str = "blend",
    step_timeouts: int = 0,
    cfg: RewardConfig | None = None,
) -> float:
    """The designer's reward for one environment (see the module docstring and :data:`VARIANTS`)."""
    cfg = cfg or RewardConfig()
    fn = VARIANTS.get(variant)
    if fn is None:
        raise ValueError(f"unknown designer reward variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    if step_timeouts > 0:
        return float(cfg.step_timeout_penalty)
    return float(fn(regret_value, win_rate_plain, cfg))


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
    """Regret, win rates and designer reward from the episode rewards of plain and hinted plays."""
    cfg = cfg or RewardConfig()
    wp, wh = win_rate(plain), win_rate(hinted)
    r = regret(plain, hinted)
    return RegretResult(
        plain_rewards=[float(x) for x in plain],
        hinted_rewards=[float(x) for x in hinted],
        win_rate_plain=wp,
        win_rate_hinted=wh,
        regret=r,
        designer_reward=designer_reward(r, wp, variant=cfg.variant, step_timeouts=step_timeouts, cfg=cfg),
        variant=cfg.variant,
        step_timeouts=step_timeouts,
    )
