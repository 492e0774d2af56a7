"""The names of the stages and of the worker roles that run them.

Both are ``str`` enums: a member equals, hashes and formats as its string (``StageName.PLAY ==
"play"``, ``f"{WorkerRole.ROLLOUT}"`` is ``rollout``), so the stage table, consumer group names and
everything recorded read exactly as they did when these were plain strings.

A worker role (who runs a stage) is not a policy role (whose generation settings a request uses:
``designer``, ``hinter``, ``agent``, :data:`spade_engine.policy.protocol.Role`); the two share the
word ``designer`` only.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["StageName", "WorkerRole"]


class StageName(StrEnum):
    """A stage of one environment (the keys of :data:`spade_engine.engine.pipeline.STAGES`)."""

    VALIDATE = "validate"
    REPAIR = "repair"
    HINT = "hint"
    PLAY = "play"
    REGRET = "regret"
    ROUND = "round"
    REPLAY = "replay"


class WorkerRole(StrEnum):
    """A distributed role that runs stages (:mod:`spade_engine.engine.worker`)."""

    DESIGNER = "designer"
    VALIDATOR = "validator"
    ROLLOUT = "rollout"
    REGRET = "regret"
