"""Episode sessions: one loaded environment held in one sandbox task across an agent's turns.

A session keeps its worker until it is closed, so a multi-turn episode keeps its state between
the agent's turns (and several episodes may be played on it with ``reset``). Every reply is
graded here, in the engine's process. After :class:`StepTimeout` or :class:`SandboxCrash` the
session is dead and its worker has been replaced; :class:`EnvError` (the environment raised, or
returned something outside the contract) leaves the session usable (its worker is recycled when
the session closes). An action longer than ``limits.MAX_ACTION_CHARS`` is refused here (the
engine's rollouts cut actions to that length before sending them).

``max_turns`` is the turn budget: the environment is constructed, then its own ``max_turns`` is
capped at the budget (min(designed, budget)), as the validator does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..config import SandboxConfig
from .errors import EnvError, ErrorKind, SandboxError
from .grading import REWARD_RANGE, check_reward, decode_reset, decode_step, select_env_class
from .limits import MAX_ACTION_CHARS

if TYPE_CHECKING:
    from .gym_env import SandboxEnv

__all__ = ["Session", "TaskChannel", "TaskSource"]


class TaskChannel(Protocol):
    """What a session needs of a task (:class:`~.pool.Task`): calls into the environment's process."""

    dead: bool
    ended: bool
    tainted: bool

    def call(self, op: str, *, timeout: float | None = None, **args: Any) -> Any: ...

    def end(self) -> None: ...


class TaskSource(Protocol):
    """What a session needs of its pool (:class:`~.pool.SandboxPool`): its limits and a fresh task."""

    config: SandboxConfig

    def task(self, *, acquire_timeout_s: float | None = None) -> TaskChannel: ...


class Session:
    """``reset(seed=...)``, ``step(action)``, ``close()`` on a sandboxed environment."""

    def __init__(
        self,
        pool: TaskSource,
        source: str,
        *,
        step_timeout_s: float | None = None,
        acquire_timeout_s: float | None = None,
        reward_range: tuple[float, float] = REWARD_RANGE,
        max_turns: int | None = None,
    ) -> None:
        cfg = pool.config
        self.step_timeout_s = step_timeout_s if step_timeout_s is not None else cfg.step_timeout_s
        self.reward_range = reward_range
        self._task: TaskChannel = pool.task(acquire_timeout_s=acquire_timeout_s)
        try:
            parsed = self._task.call("parse", timeout=cfg.import_timeout_s, source=source)
            err = parsed.syntax_error
            if err:
                raise EnvError(f"syntax error: {err.msg} (line {err.lineno})", kind=ErrorKind.SYNTAX)
            name, why = select_env_class(parsed.classes)
            if name is None:
                raise EnvError(why, kind=ErrorKind.CONTRACT)
            loaded = self._task.call("load", timeout=cfg.import_timeout_s, source=source, class_name=name)
            self.class_name: str = name
            self.contract: str = loaded.contract
            self.has_solution: bool = loaded.has_solution
            created = self._task.call("new", timeout=cfg.import_timeout_s, max_turns=max_turns)
            self._iid: int = created.iid
            #: the environment's own max_turns, and what it is after the budget's cap
            self.designed_max_turns: int | None = created.designed_max_turns
            self.max_turns: int | None = created.max_turns
        except BaseException:
            self._task.end() if not self._task.dead else None
            raise

    @property
    def alive(self) -> bool:
        return not (self._task.dead or self._task.ended)

    @property
    def task(self) -> TaskChannel:
        """The underlying task channel (for callers that need raw commands)."""
        return self._task

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``(observation, info)``."""
        data = self._task.call("reset", timeout=self.step_timeout_s, iid=self._iid, seed=seed)
        try:
            return decode_reset(data)
        except EnvError:
            self._task.tainted = True  # the environment broke the contract: recycle its worker
            raise

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One agent turn: ``(observation, reward, terminated, truncated, info)``."""
        if not isinstance(action, str):
            raise TypeError("action must be a str")
        if len(action) > MAX_ACTION_CHARS:
            raise EnvError(f"the action has {len(action)} characters (limit {MAX_ACTION_CHARS})", kind=ErrorKind.CONTRACT)
        data = self._task.call("step", timeout=self.step_timeout_s, iid=self._iid, action=action)
        try:
            result = decode_step(data)
        except EnvError:
            self._task.tainted = True
            raise
        problem = check_reward(result, self.reward_range)
        if problem:
            self._task.tainted = True
            raise EnvError(problem, kind=ErrorKind.CONTRACT)
        return result.as_tuple()

    def solution(self) -> list[str] | None:
        """The environment's reference actions for the current episode, when it gives them."""
        out = self._task.call("solution", timeout=self.step_timeout_s, iid=self._iid)
        return list(out.actions) if out.kind in ("actions", "text") and out.actions else None

    def as_gymnasium(self) -> "SandboxEnv":
        """This session as a :class:`gymnasium.Env` with text spaces (closing it closes the session)."""
        from .gym_env import SandboxEnv

        return SandboxEnv(self)

    def close(self) -> None:
        """End the task (leftover processes are killed) and give the worker back."""
        try:
            self._task.end()
        except SandboxError:  # pragma: no cover - end() swallows its own failures
            pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
