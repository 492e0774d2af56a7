"""The archive's SQL tables (SQLModel): environments, plays, estimates, policy versions, projection state.

One row per environment ever proposed says what it is (code, digest, document, skill, lineage),
what happened to it (verdict and failed check, novelty and nearest neighbour, hint), how hard it
was for which policy version (play counts, win rates plain, hinted and smoothed and regret of its
latest round, its designer reward, how many rounds and replays it had) and where its events are
in the log (first and last offsets). ``estimates`` keeps every round's RegretEstimated, so an
environment's win-rate series over time (rounds, level replays) is kept, not overwritten.
``SCHEMA_VERSION`` is the Alembic head revision these models correspond to (see
:mod:`spade_engine.archive.migrations`).
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

__all__ = ["Environment", "Play", "Estimate", "PolicyVersion", "ProjectionState", "SCHEMA_VERSION", "metadata"]

#: Alembic revision of the current schema; a database at another revision must be migrated.
SCHEMA_VERSION = "0003"


class Environment(SQLModel, table=True):
    """One proposed environment and everything the log says about it."""

    __tablename__ = "environments"

    env_id: str = Field(primary_key=True)
    skill: str = Field(default="", index=True)
    difficulty: Optional[float] = None
    code: str = ""
    code_sha256: str = ""
    document_source: Optional[str] = None
    document_id: Optional[str] = None
    document_sha256: Optional[str] = None
    document_title: Optional[str] = None
    parents: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    repair_of: Optional[str] = None
    attempt: int = 0
    policy_version: Optional[str] = None
    verdict: str = Field(default="proposed", index=True)
    valid: Optional[bool] = None
    error_kind: Optional[str] = None
    failed_check: Optional[str] = None
    class_name: Optional[str] = None
    novel: Optional[bool] = None
    novelty: Optional[float] = None
    nearest_env_id: Optional[str] = None
    hint: Optional[str] = None
    hint_policy_version: Optional[str] = None
    plays_plain: int = 0
    plays_hinted: int = 0
    win_rate_plain: Optional[float] = Field(default=None, index=True)
    win_rate_hinted: Optional[float] = None
    regret: Optional[float] = None
    designer_reward: Optional[float] = None
    agent_policy_version: Optional[str] = None
    win_rate_smoothed: Optional[float] = None
    rounds: int = 0
    replays: int = 0
    proposed_at: Optional[str] = None
    partition: int = 0
    first_offset: Optional[int] = None
    last_offset: Optional[int] = None
    #: event type -> [offset, event_id] of the event that last set its fields (audit + ordering)
    sources: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Play(SQLModel, table=True):
    """One play (RolloutCompleted) of an environment."""

    __tablename__ = "plays"

    event_id: str = Field(primary_key=True)
    env_id: str = Field(index=True)
    play_id: str = ""
    hinted: bool = False
    seed: int = 0
    policy_version: str = ""
    episode_reward: float = 0.0
    turns: int = 0
    terminated: bool = False
    truncated: bool = False
    step_timeout: bool = False
    error: Optional[str] = None
    seconds: float = 0.0
    occurred_at: str = ""
    partition: int = 0
    offset: int = 0
    round: int = 0


class Estimate(SQLModel, table=True):
    """One round's RegretEstimated of an environment (its win-rate series)."""

    __tablename__ = "estimates"

    event_id: str = Field(primary_key=True)
    env_id: str = Field(index=True)
    round: int = 0
    replay: bool = False
    designer_final: bool = True
    win_rate_plain: float = 0.0
    win_rate_hinted: float = 0.0
    win_rate_smoothed: Optional[float] = None
    regret: float = 0.0
    designer_reward: float = 0.0
    policy_version: str = ""
    partition: int = 0
    offset: int = 0


class PolicyVersion(SQLModel, table=True):
    """A policy version written by the trainer (PolicyUpdated)."""

    __tablename__ = "policy_versions"

    version: str = Field(primary_key=True)
    parent_version: Optional[str] = None
    step: int = 0
    checkpoint_uri: Optional[str] = None
    checkpoint_sha256: Optional[str] = None
    base_model: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    event_id: str = ""
    occurred_at: str = ""
    partition: int = 0
    offset: int = 0


class ProjectionState(SQLModel, table=True):
    """The cursor the tables reflect (a snapshot), and the events skipped, per projection."""

    __tablename__ = "projection_state"

    name: str = Field(primary_key=True)
    cursor: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    skipped: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    updated_at: str = ""


metadata = SQLModel.metadata
