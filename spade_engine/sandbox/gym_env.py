"""The engine-side Gymnasium view of a sandboxed environment.

:class:`SandboxEnv` is a :class:`gymnasium.Env` with text spaces whose ``reset``/``step`` are
calls into a :class:`~.session.Session`: the engine drives every accepted contract (SPADE or
gymnasium) through the same Gymnasium interface while the environment's code runs in the
sandbox. ``gymnasium.utils.env_checker.check_env`` passes on it for every valid environment.
"""

from __future__ import annotations

from typing import Any, Protocol, SupportsFloat

import gymnasium as gym

from .adapters import MAX_ACTION_CHARS, MAX_OBS_CHARS, AnyText

__all__ = ["SandboxEnv", "EpisodeSession"]


class EpisodeSession(Protocol):
    """What the view needs of a :class:`~.session.Session`."""

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]: ...

    def close(self) -> None: ...


class SandboxEnv(gym.Env):
    """A :class:`gymnasium.Env` backed by a sandbox session (closing it closes the session)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, session: EpisodeSession, *, max_obs_chars: int = MAX_OBS_CHARS, max_action_chars: int = MAX_ACTION_CHARS) -> None:
        self.session = session
        self.observation_space = AnyText(max_obs_chars)
        self.action_space = AnyText(max_action_chars)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return self.session.reset(seed=seed)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        return self.session.step(action)

    def close(self) -> None:
        self.session.close()
