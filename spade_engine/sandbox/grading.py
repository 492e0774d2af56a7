"""Grading in the engine's process of what a task sent back: the untrusted side only encodes
values, this side decides whether they meet the contract (observation a str, reward a finite
number in range, flags bools, info a dict within the info limits, right tuple shape) and which
class is the environment. Replies arrive already decoded against their schema (``replies.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import EnvError, ErrorKind
from .limits import MAX_OBS_CHARS, info_problem
from .replies import ClassInfo, InfoWire, ResetData, StepData, TextWire

__all__ = ["REWARD_RANGE", "StepResult", "unwrap_text", "decode_reset", "decode_step", "check_reward", "select_env_class"]

REWARD_RANGE = (-1.0, 1.0)


@dataclass(frozen=True)
class StepResult:
    """A decoded step; ``reward_problem`` is set (and ``reward`` 0.0) when the reward was unusable."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    reward_problem: str | None = None

    def as_tuple(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.observation, self.reward, self.terminated, self.truncated, self.info


def _contract(msg: str) -> EnvError:
    return EnvError(msg, kind=ErrorKind.CONTRACT)


def _unwrap(wire: Any, what: str) -> Any:
    if wire.bad is not None:
        raise _contract(f"{what}: {wire.bad}")
    if wire.v is None:
        raise _contract(f"{what}: malformed reply")
    return wire.v


def unwrap_text(wire: TextWire, what: str = "observation") -> str:
    v = _unwrap(wire, what)
    if len(v) > MAX_OBS_CHARS:  # the schema already refuses this; kept for other callers
        raise _contract(f"{what} has {len(v)} characters (limit {MAX_OBS_CHARS})")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _contract(f"{what} is not valid Unicode text (unpaired surrogates)") from None
    return v


def _info(wire: InfoWire, what: str) -> dict[str, Any]:
    v = _unwrap(wire, what)
    problem = info_problem(v)
    if problem:
        raise _contract(f"{what}: {problem}")
    return v


def decode_reset(data: ResetData) -> tuple[str, dict[str, Any]]:
    """(observation, info) from a reset reply, or EnvError(contract)."""
    return unwrap_text(data.obs, "reset() observation"), _info(data.info, "reset() info")


def decode_step(data: StepData) -> StepResult:
    """A step reply with every field checked except the reward's value (see :func:`check_reward`)."""
    obs = unwrap_text(data.obs, "step() observation")
    terminated = bool(_unwrap(data.terminated, "step() terminated"))
    truncated = bool(_unwrap(data.truncated, "step() truncated"))
    info = _info(data.info, "step() info")
    problem = None
    reward = 0.0
    if data.reward.bad is not None:
        problem = data.reward.bad
    elif data.reward.v is not None:
        reward = float(data.reward.v)
    else:
        problem = "reward: malformed reply"
    return StepResult(obs, reward, terminated, truncated, info, problem)


def check_reward(result: StepResult, reward_range: tuple[float, float] = REWARD_RANGE) -> str | None:
    """Why the reward is unacceptable (None when it is a finite number within range)."""
    if result.reward_problem:
        return result.reward_problem
    lo, hi = reward_range
    if not math.isfinite(result.reward):
        return f"reward is not finite: {result.reward}"
    if not lo <= result.reward <= hi:
        return f"reward {result.reward:g} is outside [{lo:g}, {hi:g}]"
    return None


def select_env_class(classes: Sequence[ClassInfo]) -> tuple[str | None, str]:
    """The environment class among a module's top-level classes, or (None, why not).

    Candidates: classes whose name ends in ``Env`` or that derive from ``gym.Env``/``gymnasium.Env``
    or from the scaffold's ``TextGame`` (``scaffold.py``). A candidate that another candidate
    derives from (a helper base class) is not counted.
    """
    def is_gym_base(b: str) -> bool:
        return b in ("gym.Env", "gymnasium.Env", "Env", "TextGame") or b.endswith(".Env")

    cands = [c for c in classes if c.name.endswith("Env") or any(is_gym_base(b) for b in c.bases)]
    names = {c.name for c in cands}
    used_as_base = {b.rpartition(".")[2] for c in cands for b in c.bases}
    leaves = [c for c in cands if c.name not in used_as_base or len(names) == 1]
    if len(leaves) == 1:
        return leaves[0].name, f"found {leaves[0].name} (line {leaves[0].lineno})"
    if not leaves:
        return None, "no environment class (a class whose name ends in 'Env' or that subclasses gymnasium.Env)"
    return None, "more than one environment class: " + ", ".join(c.name for c in leaves[:10])
