"""Read-side queries of the archive for people and tools: list with filters, show one
environment with its plays, policy versions, projection state, and a canonical dump (used by
``replay --verify`` to compare two archives)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from .models import Environment, Estimate, Play, PolicyVersion, ProjectionState

__all__ = [
    "list_environments", "get_environment", "count_environments", "plays_of", "estimates_of", "policy_versions", "archive_state", "dump_archive",
]

_ENV = Environment.__table__
_PLAY = Play.__table__
_EST = Estimate.__table__
_POLICY = PolicyVersion.__table__
_STATE = ProjectionState.__table__


def _filtered(q: Any, skill, verdict, win_min, win_max, env_ids) -> Any:
    if skill:
        q = q.where(_ENV.c.skill == skill)
    if verdict:
        q = q.where(_ENV.c.verdict == verdict)
    if win_min is not None:
        q = q.where(_ENV.c.win_rate_plain >= win_min)
    if win_max is not None:
        q = q.where(_ENV.c.win_rate_plain <= win_max)
    if env_ids is not None:
        q = q.where(_ENV.c.env_id.in_(env_ids))
    return q


def list_environments(
    engine: Engine,
    *,
    skill: str | None = None,
    verdict: str | None = None,
    win_min: float | None = None,
    win_max: float | None = None,
    env_ids: list[str] | None = None,
    limit: int | None = 50,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Environments matching every given filter, in log order (first offset): ``limit`` of them
    (``None``: all) after skipping the first ``offset``."""
    q = _filtered(select(_ENV), skill, verdict, win_min, win_max, env_ids)
    q = q.order_by(_ENV.c.partition, _ENV.c.first_offset, _ENV.c.env_id)
    if limit is not None:
        q = q.limit(limit)
    if offset:
        q = q.offset(offset)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(q).mappings()]


def count_environments(
    engine: Engine,
    *,
    skill: str | None = None,
    verdict: str | None = None,
    win_min: float | None = None,
    win_max: float | None = None,
    env_ids: list[str] | None = None,
) -> int:
    """How many environments :func:`list_environments` would list without a limit."""
    from sqlalchemy import func

    q = _filtered(select(func.count()).select_from(_ENV), skill, verdict, win_min, win_max, env_ids)
    with engine.connect() as conn:
        return int(conn.execute(q).scalar_one())


def get_environment(engine: Engine, env_id: str) -> dict[str, Any] | None:
    """One environment by id (a unique prefix is accepted)."""
    with engine.connect() as conn:
        row = conn.execute(select(_ENV).where(_ENV.c.env_id == env_id)).mappings().first()
        if row is None:
            rows = conn.execute(select(_ENV).where(_ENV.c.env_id.startswith(env_id)).limit(2)).mappings().all()
            row = rows[0] if len(rows) == 1 else None
    return dict(row) if row is not None else None


def plays_of(engine: Engine, env_id: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        q = select(_PLAY).where(_PLAY.c.env_id == env_id).order_by(_PLAY.c.partition, _PLAY.c.offset)
        return [dict(r) for r in conn.execute(q).mappings()]


def estimates_of(engine: Engine, env_id: str) -> list[dict[str, Any]]:
    """An environment's estimates, one per round, in round order (its win-rate series)."""
    with engine.connect() as conn:
        q = select(_EST).where(_EST.c.env_id == env_id).order_by(_EST.c.round, _EST.c.partition, _EST.c.offset)
        return [dict(r) for r in conn.execute(q).mappings()]


def policy_versions(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(_POLICY).order_by(_POLICY.c.step, _POLICY.c.version)).mappings()]


def archive_state(engine: Engine) -> dict[str, Any]:
    """The projection's cursor and skipped events, and row counts."""
    from sqlalchemy import func

    with engine.connect() as conn:
        row = conn.execute(select(_STATE).where(_STATE.c.name == "archive")).mappings().first()
        counts = {
            "environments": conn.execute(select(func.count()).select_from(_ENV)).scalar_one(),
            "plays": conn.execute(select(func.count()).select_from(_PLAY)).scalar_one(),
            "estimates": conn.execute(select(func.count()).select_from(_EST)).scalar_one(),
            "policy_versions": conn.execute(select(func.count()).select_from(_POLICY)).scalar_one(),
        }
    skipped: dict[str, int] = {}
    for reason in ((row or {}).get("skipped") or {}).values():
        skipped[reason] = skipped.get(reason, 0) + 1
    return {"cursor": dict((row or {}).get("cursor") or {}), "skipped": skipped, "counts": counts}


def _norm(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 12) if isinstance(v, float) else v) for k, v in sorted(row.items())}


def dump_archive(engine: Engine) -> dict[str, Any]:
    """Every table's content in a canonical order (for equality checks); ``updated_at`` left out."""
    with engine.connect() as conn:
        envs = [_norm(dict(r)) for r in conn.execute(select(_ENV).order_by(_ENV.c.env_id)).mappings()]
        plays = [_norm(dict(r)) for r in conn.execute(select(_PLAY).order_by(_PLAY.c.event_id)).mappings()]
        estimates = [_norm(dict(r)) for r in conn.execute(select(_EST).order_by(_EST.c.event_id)).mappings()]
        pols = [_norm(dict(r)) for r in conn.execute(select(_POLICY).order_by(_POLICY.c.version)).mappings()]
        st = conn.execute(select(_STATE).where(_STATE.c.name == "archive")).mappings().first()
    state = {"cursor": dict(st["cursor"]), "skipped": dict(st["skipped"])} if st else {}
    return {"state": state, "environments": envs, "plays": plays, "estimates": estimates, "policy_versions": pols}
