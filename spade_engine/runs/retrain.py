"""Curriculum replay with retraining: train a fresh model on a recorded run's environments.

:func:`retrain_run` reads the accepted environments of an old run (their EnvironmentProposed
code, skill, difficulty and document, in recorded order) and drives them, one by one, through the
engine's stages in a NEW run whose RunStarted.parent_run_id names the old one: the new model is
validated against nothing new (the code is the recorded code, re-validated in the sandbox),
writes its own hints, plays the environments (k plain + k hinted plays, new token ids and
log-probs), regret is estimated, and between environments the replay-driven trainer trains on
what the log holds (every ``trainer.batch_groups`` groups) and the policy loads each new version
before the next environment. The designer is not called (the curriculum is the recorded one),
so only the agent role is trained. Repairs are off: a recorded environment is replayed as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import SpadeError
from ..envsources.archive import recorded_curriculum, replayed_proposal
from ..events.catalogue import EnvironmentProposed, PolicyUpdated
from ..events.log import EventLog
from ..events.store import new_run_id
from ..recorded import recorded_config_or_default, with_local_sandbox

__all__ = ["recorded_curriculum", "retrain_run", "RetrainResult", "RetrainError"]


class RetrainError(SpadeError):
    """The run cannot be retrained (no accepted environments, no model...)."""


@dataclass
class RetrainResult:
    """What a retrain did: the new run, how many environments, the versions it trained."""

    run_id: str
    parent_run_id: str
    environments: int
    updates: list[PolicyUpdated] = field(default_factory=list)
    reason: str = ""


def retrain_run(
    old_log: EventLog,
    *,
    model: str,
    data_dir: Path,
    max_envs: int | None = None,
    overrides: dict[str, Any] | None = None,
    on_env: Callable[[int, str], None] | None = None,
) -> RetrainResult:
    """Replay ``old_log``'s curriculum with a fresh ``model`` into a new run (see module docstring)."""
    from ..engine.loop import Engine
    from ..engine.pipeline import env_id_for
    from .engine import open_engine

    curriculum = recorded_curriculum(old_log)
    if max_envs is not None:
        curriculum = curriculum[:max_envs]
    if not curriculum:
        raise RetrainError(f"run {old_log.run_id} has no accepted environments to replay")
    base = with_local_sandbox(recorded_config_or_default(old_log))  # never the log's sandbox section
    cfg = base.with_overrides(
        {
            "policy.kind": "transformers",
            "policy.model": model,
            "loop.max_envs": len(curriculum),
            "loop.max_repairs": 0,
            "loop.seed_envs": "none",  # the curriculum is the recorded one
            "loop.designer_batch": 1,  # one replayed environment at a time, trained on in order
            "trainer.enabled": True,
            "replay.enabled": False,  # the recorded curriculum, in its order: no level replay in between
            "log.backend": "sqlite",
            "log.bootstrap": None,
            **(overrides or {}),
        }
    )
    run_id = new_run_id()
    with open_engine(cfg, run_id=run_id, data_dir=data_dir, create=True, parent_run_id=old_log.run_id) as opened:
        engine: Engine = opened.engine
        trainer = opened.engine.trainer
        assert trainer is not None  # trainer.enabled: the engine trains between environments

        def replayed(engine: Engine, index: int) -> EnvironmentProposed:
            old = curriculum[index]
            payload = replayed_proposal(old, env_id=env_id_for(engine.run_id, index), policy_version=engine.ctx.policy.version,
                                        designer=f"replay:{old_log.run_id}/{old.env_id}")
            if on_env is not None:
                on_env(index, payload.env_id)
            return payload

        engine.proposer = replayed
        reason = engine.run()
        return RetrainResult(
            run_id=run_id, parent_run_id=old_log.run_id, environments=len(curriculum), updates=list(trainer.updates),
            reason=reason,
        )
