"""The play-time garbage probe: does an accepted environment reward garbage in a real play?

The validator's seeds and probes are drawn per run (so an environment cannot learn them), but an
environment can still tell a validation from a play by how it is driven (one task doing many
resets, fixed check order). So before its plays, the hint stage opens one more sandbox session
exactly like a play's, resets it with the seed of plain play 0, and steps seeded garbage actions
(:func:`spade_engine.sandbox.probes.garbage_actions`) until the episode ends or the turn limit.
The result is recorded in ``HintWritten.garbage_probe``; the regret stage (pure, so replay stays
exact) marks the environment ``trivial`` when that episode was won (:func:`probe_won`), and gives
it a designer reward of 0.

One episode at one seed does not see an outcome that ignores the action but varies with the seed
(a seeded coin flip sat at win rate 0.5, in the band, and earned designer reward 0.6 for noise):
so the same probe runs at the seed of every play of the first round (``HintWritten.
garbage_probes``): at the seeds where the agent won such an environment, garbage wins as well.
Any garbage win makes the environment trivial (:func:`garbage_wins`). The garbage itself varies
in shape (:func:`spade_engine.sandbox.probes.garbage_actions`).

The SPADE release has no such check: its designer reward (blend, solve rate, regret, learning
potential) is computed from the plays alone, so an environment whose outcome is noise in the band
earns the plateau's full weight there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..events.catalogue import GarbageProbe, HintWritten
from .regret import WIN_THRESHOLD, episode_reward

__all__ = ["run_garbage_probe", "probe_reward", "probe_won", "probes_of", "garbage_wins"]

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


def probes_of(hint: "HintWritten | None") -> list[GarbageProbe]:
    """Every garbage probe a hint recorded (plain play 0's seed first)."""
    if hint is None:
        return []
    return ([hint.garbage_probe] if hint.garbage_probe is not None else []) + list(hint.garbage_probes)


def garbage_wins(probes: Sequence[GarbageProbe]) -> int:
    """How many of the garbage episodes won."""
    return sum(1 for p in probes if probe_won(p))
