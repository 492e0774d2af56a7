"""The regret stage in its simplest form: regret and designer reward of one environment's single
round from its recorded plays (pure; the loop's rounds, smoothing and learning-potential baseline
are :mod:`spade_engine.engine.rounds`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...config import LoopConfig, RewardConfig
from ...events.catalogue import EnvironmentProposed, GarbageProbe, RegretEstimated, RolloutCompleted
from ..rounds import estimate_round

__all__ = ["estimate_regret"]


def estimate_regret(
    proposed: EnvironmentProposed,
    plays: Sequence[tuple[str, RolloutCompleted]],
    reward: RewardConfig,
    probe: GarbageProbe | None = None,
    more_probes: Sequence[GarbageProbe] = (),
) -> RegretEstimated:
    """Regret and designer reward of one environment's single round from its recorded plays (pure).

    ``plays`` are ``(event_id, payload)`` pairs; they are ordered by (hinted, index) so the
    result does not depend on the order the plays were recorded in. The loop estimates every
    round with :func:`spade_engine.engine.rounds.estimate_round` (rounds, smoothing and the
    learning-potential baseline); this is its round 0 with no earlier estimate of the skill.
    ``probe`` is the recorded garbage probe (``HintWritten.garbage_probe``): when it won, the environment is ``trivial``
    and its designer reward is 0.
    """
    return estimate_round(proposed, plays, reward, LoopConfig(), round_=0, replay=False, prev=None, probe=probe,
                          more_probes=more_probes)
