"""Adapters: every accepted environment contract driven through one Gymnasium-shaped interface.

Two contracts are accepted:

* **spade** — the format LLM designers already write: a class whose name ends in ``Env`` with
  ``reset(seed=None) -> (str, dict)``, ``step(action: str) -> (str, float, bool, bool, dict)``,
  actions as ``\\boxed{...}`` and an optional ``solution()``. :class:`SpadeEnvAdapter` wraps it
  into a :class:`gymnasium.Env` with :class:`AnyText` observation and action spaces.
* **gymnasium** — a :class:`gymnasium.Env` subclass whose observation and action spaces are
  :class:`gymnasium.spaces.Text`; used as is.

Imported inside the untrusted worker as a plain module (standard library + gymnasium only) and on
the engine side for trusted code (tests run ``check_env`` on the adapted examples).
"""

from __future__ import annotations

import re
import string
from builtins import callable, getattr, isinstance, issubclass, len, type  # immune to monkeypatching
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.spaces import Text

__all__ = [
    "MAX_OBS_CHARS",
    "MAX_ACTION_CHARS",
    "AnyText",
    "SpadeEnvAdapter",
    "contract_of",
    "adapt",
    "boxed_actions",
]

if __package__:
    from .limits import MAX_ACTION_CHARS, MAX_OBS_CHARS
else:  # pragma: no cover - imported by the worker as a plain module
    from limits import MAX_ACTION_CHARS, MAX_OBS_CHARS  # type: ignore[no-redef]


class AnyText(Text):
    """A text space that contains every ``str`` up to ``max_length`` characters.

    :class:`~gymnasium.spaces.Text` checks membership against its (alphanumeric by default)
    charset; observations of text games contain any character, so only the length is checked
    here. Sampling still draws from ``sample_charset``.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, sample_charset: str = string.printable, seed: Any = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=sample_charset, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class SpadeEnvAdapter(gym.Env):
    """A SPADE-format environment seen as a :class:`gymnasium.Env` with text spaces."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env: Any, *, max_obs_chars: int = MAX_OBS_CHARS, max_action_chars: int = MAX_ACTION_CHARS) -> None:
        self.env = env
        self.observation_space = AnyText(max_obs_chars)
        self.action_space = AnyText(max_action_chars)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return self.env.reset(seed=seed)

    def step(self, action: str) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def solution(self) -> Any:
        return self.env.solution()

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()


def contract_of(cls: type) -> str:
    """``"gymnasium"`` for :class:`gymnasium.Env` subclasses, else ``"spade"``."""
    return "gymnasium" if isinstance(cls, type) and issubclass(cls, gym.Env) else "spade"


def adapt(env: Any, **kwargs: Any) -> gym.Env:
    """The Gymnasium form of an environment instance (gymnasium envs are returned as they are).

    Raises ``TypeError`` for a gymnasium env whose spaces are not text spaces."""
    if isinstance(env, gym.Env):
        for name in ("observation_space", "action_space"):
            space = getattr(env, name, None)
            if not isinstance(space, Text):
                raise TypeError(f"{name} must be a gymnasium.spaces.Text, got {type(space).__name__}")
        return env
    return SpadeEnvAdapter(env, **kwargs)


_BOXED = re.compile(r"\\boxed\{")


def boxed_actions(text: str) -> list[str]:
    """Every balanced ``\\boxed{...}`` in ``text``, in order, as complete actions."""
    out: list[str] = []
    for m in _BOXED.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.start() : i])
    return out
