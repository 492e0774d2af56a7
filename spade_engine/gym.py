"""An archived environment of a run as a sandboxed :class:`gymnasium.Env`.

For RL libraries and notebooks: any environment a run recorded can be played again, with its code
running in the same sandbox the engine uses (its own worker process, namespaces, rlimits, audit
hook), through the Gymnasium API with text spaces::

    import gymnasium as gym
    import spade_engine.gym  # registers "spade/Archived-v0"

    env = gym.make("spade/Archived-v0", run="run-2026...", env_id="abc123-e00004", data_dir="spade-data")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("\\\\boxed{42}")
    env.close()  # ends the sandbox task and its worker

    env = spade_engine.make("run-2026...", "abc123-e00004", data_dir="spade-data")  # the same, no registry

``gym.make("spade_engine.gym:spade/Archived-v0", ...)`` imports this module itself. ``run`` and
``env_id`` accept unique prefixes (``run`` defaults to the latest run). The environment's code
comes from its ``EnvironmentProposed`` event in the run's log; episodes are truncated at the
run's recorded turn limit (``loop.turn_limit``, or ``turn_limit=``). The sandbox limits are this
machine's (``config=`` a TOML file, or ``sandbox=`` a :class:`~spade_engine.config.SandboxConfig`),
never the ones recorded in the log. An environment the validator rejected is refused unless
``allow_rejected=True``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym

from .errors import SpadeError
from .sandbox.gym_env import SandboxEnv

__all__ = ["ENV_ID", "ArchivedEnv", "ArchivedEnvError", "make", "register", "archived_source"]

#: the id this module registers with Gymnasium
ENV_ID = "spade/Archived-v0"


class ArchivedEnvError(SpadeError):
    """The archived environment cannot be found or played as asked."""


def archived_source(log: Any, env_id: str) -> tuple[str, str, dict[str, Any] | None]:
    """``(env_id, code, validation payload or None)`` of the environment ``env_id`` (or the one
    environment whose id starts with it) in ``log``."""
    proposals: dict[str, str] = {}
    validated: dict[str, dict[str, Any]] = {}
    for rec in log.read():
        env = rec.envelope
        if env.type == "EnvironmentProposed" and env.key.startswith(env_id):
            proposals[env.key] = str(env.payload.get("code", ""))
        elif env.type == "EnvironmentValidated" and env.key.startswith(env_id):
            validated[env.key] = env.payload
    if env_id in proposals:
        found = env_id
    elif len(proposals) == 1:
        (found,) = proposals
    elif not proposals:
        raise ArchivedEnvError(f"no environment {env_id!r} in run {log.run_id}")
    else:
        raise ArchivedEnvError(f"environment prefix {env_id!r} is ambiguous in run {log.run_id}: {', '.join(sorted(proposals)[:5])}")
    return found, proposals[found], validated.get(found)


class ArchivedEnv(SandboxEnv):
    """A recorded environment played in its own sandbox pool (one worker); ``close()`` ends it.

    ``info`` of ``reset`` carries ``env_id``, ``run_id`` and ``turn_limit`` besides the
    environment's own keys; ``step`` truncates the episode at ``turn_limit`` turns, and its
    ``info`` carries ``env_id``, ``turn`` (turns played, this one included) and, on the step that
    ends the episode, ``end_reason`` in the words ``RolloutCompleted`` records: ``terminated``,
    ``truncated`` (by the environment) or ``turn_limit``."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        run: str | None = None,
        env_id: str = "",
        *,
        data_dir: str | Path | None = None,
        backend: str = "sqlite",
        bootstrap: str | None = None,
        config: str | Path | None = None,
        sandbox: Any = None,
        turn_limit: int | None = None,
        allow_rejected: bool = False,
    ) -> None:
        from .config import load_config
        from .events.store import open_event_log, resolve_data_dir, resolve_run
        from .recorded import recorded_config_or_default
        from .sandbox import SandboxPool

        if not env_id:
            raise ArchivedEnvError("env_id is required (an environment id of the run, or a unique prefix)")
        root = resolve_data_dir(data_dir)
        self.run_id = resolve_run(run, data_dir=root, backend=backend, bootstrap=bootstrap)
        log = open_event_log(self.run_id, data_dir=root, backend=backend, bootstrap=bootstrap, read_only=True)
        try:
            self.env_id, self.code, validation = archived_source(log, env_id)
            recorded = recorded_config_or_default(log)
        finally:
            log.close()
        if validation is not None and not validation.get("valid", False) and not allow_rejected:
            raise ArchivedEnvError(
                f"environment {self.env_id} was rejected by the validator ({validation.get('error_kind')} at "
                f"{validation.get('failed_check')}); pass allow_rejected=True to play it anyway"
            )
        self.turn_limit = int(turn_limit if turn_limit is not None else recorded.loop.turn_limit)
        scfg = sandbox if sandbox is not None else load_config(Path(config) if config else None).sandbox
        self.pool = SandboxPool(scfg.model_copy(update={"workers": 1}))
        try:
            session = self.pool.open_session(self.code)
        except BaseException:
            self.pool.close()
            raise
        super().__init__(session)
        self._turns = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        self._turns = 0
        return obs, {**info, "env_id": self.env_id, "run_id": self.run_id, "turn_limit": self.turn_limit}

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        self._turns += 1
        out = {**info, "env_id": self.env_id, "turn": self._turns}
        if terminated:
            out["end_reason"] = "terminated"
        elif truncated:
            out["end_reason"] = "truncated"
        elif self._turns >= self.turn_limit:
            truncated = True
            out["end_reason"] = "turn_limit"
        return obs, reward, terminated, truncated, out

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.pool.close()


def make(run: str | None, env_id: str, **kwargs: Any) -> ArchivedEnv:
    """The archived environment ``env_id`` of ``run`` as a sandboxed Gymnasium environment
    (keyword arguments: see :class:`ArchivedEnv`)."""
    return ArchivedEnv(run, env_id, **kwargs)


def register() -> None:
    """Register :data:`ENV_ID` with Gymnasium (done on import of this module; idempotent)."""
    if ENV_ID not in gym.envs.registry:
        gym.register(id=ENV_ID, entry_point="spade_engine.gym:ArchivedEnv", disable_env_checker=True)


register()
