"""The designer's baseline: what a designer reward is compared with to give its advantage.

``window`` (default): each designer reward is compared with the mean of its skill's last
``trainer.designer_window`` designer rewards before it, in log order (every designer-final
RegretEstimated counts, trained or not, so a resumed trainer rebuilds the same history). A skill
with no history yet is compared with the last ``window`` designer rewards of all skills; only the
very first designer reward of a run has no baseline. So every sample after the first has a
baseline, whatever the batch holds (the skills rotate one environment at a time, so a batch of a
few groups rarely holds two samples of a skill).

``batch``: the release's per-skill centring within the batch (``_apply_centered_rewards`` in
``spade/core/utils/delayed_env_rewards.py``): reward minus the mean of the same skill's rewards
in the batch; a skill alone in its batch has no signal. The release's batches hold 24 games of 3
skills, so every skill has 8; this engine's hold ``batch_groups`` rounds.

Either way the advantage is multiplied by ``trainer.designer_reward_scale`` (the release's
``env_reward_scale`` = n_actor / n_env x regeneration interval, capped at 50).
"""

from __future__ import annotations

from collections import deque

__all__ = ["DesignerBaseline"]


class DesignerBaseline:
    """Running per-skill means of past designer rewards (a fold; see the module docstring)."""

    def __init__(self, window: int = 8):
        if window < 1:
            raise ValueError("window must be >= 1")
        self.window = window
        self.by_skill: dict[str, deque[float]] = {}
        self.all: deque[float] = deque(maxlen=window)

    def baseline(self, skill: str) -> float | None:
        """The baseline a new reward of ``skill`` is compared with (None: nothing seen yet)."""
        hist = self.by_skill.get(skill)
        if hist:
            return sum(hist) / len(hist)
        if self.all:
            return sum(self.all) / len(self.all)
        return None

    def observe(self, skill: str, reward: float) -> float | None:
        """Record ``reward`` of ``skill``; return the baseline it is compared with (before it)."""
        b = self.baseline(skill)
        self.by_skill.setdefault(skill, deque(maxlen=self.window)).append(float(reward))
        self.all.append(float(reward))
        return b
