"""The play-time garbage probe: does an accepted environment reward garbage in a real play?

The validator's seeds and probes are drawn per run (so an environment cannot learn them), but an
environment can still tell a validation from a play by how it is driven (one task doing many
resets, fixed check order). So before its plays, the hint stage opens one more sandbox session
exactly like a play's, resets it with the seed of plain play 0, and steps seeded garbage actions
(:func:`spade_engine.sandbox.probes.garbage_actions`) until the episode ends or the turn limit.
The result is recorded in ``HintWritten.garbage_probe``; the regret stage (pure, so replay stays
exact) marks the environment ``trivial`` when that episode was won (:func:`probe_won`), and gives
it a designer reward of 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..events.catalogue import GarbageProbe
from .regret import WIN_THRESHOLD, episode_reward

__all__ = ["run_garbage_probe", "probe_reward", "probe_won"]

_MAX_ERROR = 500


def run_garbage_probe(open_session: Callable[[], Any], *, seed: int, actions: list[str]) -> GarbageProbe:
    """Play one episode of garbage ``actions`` at reset ``seed``; never raises for anything the
    environment does (an abnormal end is recorded in ``error``)."""
    rewards: list[float] = []
    terminated = truncated = False
    used: list[str] = []
    error: str | None = None
    try:
        with open_session() as session:
            session.reset(seed=seed)
            for action in actions:
                used.append(action)
                _, reward, term, trunc, _ = session.step(action)
                rewards.append(float(reward))
                if term or trunc:
                    terminated, truncated = bool(term), bool(trunc)
                    break
    except Exception as exc:  # noqa: BLE001 - an environment that breaks here only loses its probe
        error = f"{type(exc).__name__}: {exc}"[:_MAX_ERROR]
    return GarbageProbe(seed=seed, actions=used, rewards=rewards, terminated=terminated, truncated=truncated, error=error)


def probe_reward(probe: GarbageProbe) -> float:
    """The probe's episode reward, as for a play."""
    return episode_reward(probe.rewards[-1] if probe.rewards else None, probe.terminated)


def probe_won(probe: GarbageProbe | None) -> bool:
    """Did the garbage episode solve the environment (episode reward 1.0, like a won play)?"""
    return probe is not None and probe.error is None and probe_reward(probe) >= WIN_THRESHOLD
