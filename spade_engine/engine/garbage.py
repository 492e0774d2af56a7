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

Garbage whose shape varies still has to hit the one shape an environment pays for (a coin
flip only for a small boxed integer, or a win for any short word, loses to everything else). So the
play stage also replays each won play of the first round, at the same seed in a fresh session,
with its final answer replaced by a deliberately wrong one of the same shape
(:func:`spade_engine.sandbox.probes.wrong_answer`; :func:`run_wrong_answer_replay`, recorded in
``RolloutCompleted.wrong_answer``). A fair environment rejects it; when more than half of such
replays still win, the outcome does not depend on the answer (:func:`answer_ignored`) and the
environment is trivial as well. It costs one episode without model calls per won play of the
first round (at most ``loop.plain_k + loop.hinted_k`` per environment, none for a lost play).

The SPADE release has no such check: its designer reward (blend, solve rate, regret, learning
potential) is computed from the plays alone, so an environment whose outcome is noise in the band
earns the plateau's full weight there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from ..events.catalogue import GarbageProbe, HintWritten, WrongAnswerReplay
from ..sandbox.limits import clip
from .regret import WIN_THRESHOLD, episode_reward
from .rollouts import Session

__all__ = [
    "run_garbage_probe", "probe_reward", "probe_won", "probes_of", "garbage_wins",
    "run_wrong_answer_replay", "replay_won", "answer_ignored",
]

_MAX_ERROR = 500
#: the wrong answer is recorded cut to this many characters (the replay sent it whole)
_MAX_ANSWER = 200


@dataclass
class _Episode:
    """A model-free episode: the actions sent, the rewards seen, how it ended."""

    used: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    error: str | None = None


def _play_actions(open_session: Callable[[], AbstractContextManager[Session]], seed: int,
                  actions: Sequence[str]) -> _Episode:
    """Send ``actions`` one by one after a reset at ``seed`` until the episode ends; never raises
    for anything the environment does (an abnormal end is in ``error``)."""
    ep = _Episode()
    try:
        with open_session() as session:
            session.reset(seed=seed)
            for action in actions:
                ep.used.append(action)
                _, reward, term, trunc, _ = session.step(action)
                ep.rewards.append(float(reward))
                if term or trunc:
                    ep.terminated, ep.truncated = bool(term), bool(trunc)
                    break
    except Exception as exc:  # noqa: BLE001 - an environment that breaks here only loses this episode
        ep.error = f"{type(exc).__name__}: {exc}"[:_MAX_ERROR]
    return ep


def run_garbage_probe(open_session: Callable[[], AbstractContextManager[Session]], *, seed: int,
                      actions: list[str]) -> GarbageProbe:
    """Play one episode of garbage ``actions`` at reset ``seed``; never raises for anything the
    environment does (an abnormal end is recorded in ``error``)."""
    ep = _play_actions(open_session, seed, actions)
    return GarbageProbe(seed=seed, actions=ep.used, rewards=ep.rewards, terminated=ep.terminated,
                        truncated=ep.truncated, error=ep.error)


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


def run_wrong_answer_replay(open_session: Callable[[], AbstractContextManager[Session]], *, seed: int,
                            actions: Sequence[str], wrong: str) -> WrongAnswerReplay:
    """Replay a won play's ``actions`` at reset ``seed`` with the last one replaced by ``wrong``,
    until the episode ends (an episode that ends before the last action is recorded as it
    ended); never raises for anything the environment does (an abnormal end is in ``error``)."""
    steps = [*actions[:-1], wrong]
    ep = _play_actions(open_session, seed, steps)
    return WrongAnswerReplay(seed=seed, turn=len(steps), answer=clip(wrong, _MAX_ANSWER), rewards=ep.rewards,
                             terminated=ep.terminated, truncated=ep.truncated, error=ep.error)


def replay_won(replay: WrongAnswerReplay) -> bool:
    """Did the replay with the wrong final answer win (episode reward 1.0, like a won play)?
    Only when the wrong answer was the step that ended it: an episode that ended earlier did not
    replay the play."""
    return (replay.error is None and len(replay.rewards) == replay.turn
            and episode_reward(replay.rewards[-1], replay.terminated) >= WIN_THRESHOLD)


def answer_ignored(replays: Sequence[WrongAnswerReplay]) -> bool:
    """Does the outcome not depend on the answer: more than half of the wrong-answer replays won
    (a fair environment that accepts several answers may take a wrong one now and then; one whose
    outcome is the same whatever the answer takes them all)."""
    wins = sum(1 for r in replays if replay_won(r))
    return wins > 0 and 2 * wins > len(replays)
