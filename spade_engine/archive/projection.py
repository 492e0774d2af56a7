"""ArchiveProjection: the environment archive (SQL) as a pure, idempotent fold of the log.

Every round's RegretEstimated is kept as a row of ``estimates`` (the environment's win-rate
series); the environment row holds the latest round's win rates and regret and the designer-final
estimate's designer reward, and counts its rounds and level replays (recounted from
``estimates``, like the play counts from ``plays``).

State lives in the archive database (:mod:`.models`); the projection keeps a write-back cache of
the environments it touched and the plays and policy versions it saw since the last flush, and
writes them in one transaction together with its cursor (table ``projection_state``), so the
tables always reflect exactly the cursor recorded beside them.

Idempotence and order: every row remembers, per event type, the offset and id of the event that
last set its fields (``sources``); an older or re-delivered event never overwrites a newer one.
Plays are keyed by event id and play counts are recounted from the plays table, so re-applying a
log changes nothing. Events it cannot read are counted in ``skipped``, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import json
from operator import itemgetter

from sqlalchemy import JSON, func, select, update
from sqlalchemy.engine import Engine

from ..events.catalogue import (
    EnvironmentProposed,
    EnvironmentValidated,
    HintWritten,
    PolicyUpdated,
    RegretEstimated,
)
from ..events.log import Cursor, Record
from .db import open_engine
from .models import Environment, Estimate, Play, PolicyVersion, ProjectionState
from .reader import LogReader
from .records import RolloutSummary, Skipped

__all__ = ["ArchiveProjection", "env_defaults"]

_ENV = Environment.__table__
_PLAY = Play.__table__
_EST = Estimate.__table__
_POLICY = PolicyVersion.__table__
_STATE = ProjectionState.__table__
_CACHE_LIMIT = 50_000


_ENV_TEMPLATE: dict[str, Any] = {c.name: None for c in _ENV.columns}
_ENV_TEMPLATE.update(
    skill="", code="", code_sha256="", attempt=0, verdict="proposed", plays_plain=0, plays_hinted=0, partition=0,
    rounds=0, replays=0,
)
_PLAY_ORDER = (
    "event_id", "env_id", "play_id", "hinted", "seed", "policy_version", "episode_reward", "turns",
    "terminated", "truncated", "step_timeout", "error", "seconds", "occurred_at", "partition", "offset", "round",
)
assert tuple(c.name for c in _PLAY.columns) == _PLAY_ORDER
_EST_ORDER = (
    "event_id", "env_id", "round", "replay", "designer_final", "win_rate_plain", "win_rate_hinted", "win_rate_smoothed",
    "regret", "designer_reward", "policy_version", "partition", "offset",
)
assert tuple(c.name for c in _EST.columns) == _EST_ORDER
_TABLES = (_ENV, _PLAY, _EST, _POLICY, _STATE)
_COLUMNS = {t.name: [c.name for c in t.columns] for t in _TABLES}
_JSON_COLUMNS = {t.name: {c.name for c in t.columns if isinstance(c.type, JSON)} for t in _TABLES}


def env_defaults(env_id: str) -> dict[str, Any]:
    """A fresh environment row."""
    row = dict(_ENV_TEMPLATE)
    row.update(env_id=env_id, parents=[], sources={})
    return row


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class ArchiveProjection(LogReader):
    """The archive of a run: environments, plays and policy versions (a :class:`Projection`)."""

    name = "archive"

    def __init__(self, engine: Engine):
        self.engine = engine
        self._envs: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._plays: dict[str, tuple] = {}
        self._estimates: dict[str, tuple] = {}
        self._policies: dict[str, dict[str, Any]] = {}
        self._cursor: Cursor = {}
        self._saved_cursor: Cursor = {}
        self._skipped = Skipped()
        self._skipped_dirty = False
        with engine.connect() as conn:
            row = conn.execute(select(_STATE.c.cursor, _STATE.c.skipped).where(_STATE.c.name == self.name)).first()
            # ids already in the database: a cache miss on any other id needs no query
            self._stored: set[str] = set(conn.execute(select(_ENV.c.env_id)).scalars())
        if row is not None:
            self._cursor = {int(p): int(o) for p, o in (row[0] or {}).items()}
            self._saved_cursor = dict(self._cursor)
            self._skipped = Skipped(row[1] or {})

    @classmethod
    def open(cls, url_or_path: str | Path, *, create: bool = True) -> "ArchiveProjection":
        """Open (creating at the current schema) the archive at a URL, a file or a run directory."""
        return cls(open_engine(url_or_path, create=create))

    # -- Projection protocol ---------------------------------------------------------------------

    def position(self) -> Cursor:
        return dict(self._saved_cursor)

    def skipped_changed(self) -> None:
        self._skipped_dirty = True

    def flush(self, cursor: Mapping[int, int]) -> None:
        cursor = {int(p): int(o) for p, o in cursor.items()}
        if not (self._dirty or self._plays or self._estimates or self._policies or self._skipped_dirty) and cursor == self._saved_cursor:
            return
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self.engine.begin() as conn:
            if self._plays:
                self._upsert(conn, _PLAY, "event_id", list(self._plays.values()), (), tuples=True)
            if self._estimates:
                self._upsert(conn, _EST, "event_id", list(self._estimates.values()), (), tuples=True)
            if self._dirty:
                keep = {"env_id", "plays_plain", "plays_hinted", "rounds", "replays"}
                rows = [self._envs[e] for e in sorted(self._dirty)]
                self._upsert(conn, _ENV, "env_id", rows, [c.name for c in _ENV.columns if c.name not in keep])
                self._recount(conn, sorted(self._dirty))
            if self._policies:
                cols = [c.name for c in _POLICY.columns if c.name != "version"]
                self._upsert(conn, _POLICY, "version", list(self._policies.values()), cols)
            state = {
                "name": self.name,
                "cursor": {str(p): o for p, o in sorted(cursor.items())},
                "skipped": dict(self._skipped.by_event),
                "updated_at": now,
            }
            self._upsert(conn, _STATE, "name", [state], ["cursor", "skipped", "updated_at"])
        self._saved_cursor = dict(cursor)
        self._cursor = dict(cursor)
        self._dirty.clear()
        self._plays.clear()
        self._estimates.clear()
        self._policies.clear()
        self._skipped_dirty = False
        self._stored.update(self._envs)
        if len(self._envs) > _CACHE_LIMIT:
            self._envs.clear()

    def close(self) -> None:
        self.engine.dispose()

    # -- folding ---------------------------------------------------------------------------------

    def _upsert(self, conn, table, key: str, rows: list, update_cols, *, tuples: bool = False) -> None:
        """``INSERT ... ON CONFLICT (key) DO UPDATE|NOTHING`` as one DBAPI executemany.

        The same SQL works on SQLite and PostgreSQL; it goes straight to the driver because
        SQLAlchemy's per-row parameter processing dominated replay time. JSON columns are
        serialised here."""
        cols = _COLUMNS[table.name]
        json_cols = _JSON_COLUMNS[table.name]
        ph = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        sql = (
            f'INSERT INTO {table.name} ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in cols)}) '
            f'VALUES ({", ".join([ph] * len(cols))}) ON CONFLICT ("{key}") '
        )
        if update_cols:
            sql += "DO UPDATE SET " + ", ".join(f'"{c}" = excluded."{c}"' for c in update_cols)
        else:
            sql += "DO NOTHING"
        if tuples:
            params = rows
        elif json_cols:
            params = [tuple(_dumps(r[c]) if c in json_cols else r[c] for c in cols) for r in rows]
        else:
            getter = itemgetter(*cols)
            params = [getter(r) for r in rows]
        conn.exec_driver_sql(sql, params)

    def _recount(self, conn, env_ids: list[str]) -> None:
        plain = (
            select(func.count()).select_from(_PLAY)
            .where(_PLAY.c.env_id == _ENV.c.env_id, _PLAY.c.hinted.is_(False)).scalar_subquery()
        )
        hinted = (
            select(func.count()).select_from(_PLAY)
            .where(_PLAY.c.env_id == _ENV.c.env_id, _PLAY.c.hinted.is_(True)).scalar_subquery()
        )
        rounds = select(func.count()).select_from(_EST).where(_EST.c.env_id == _ENV.c.env_id).scalar_subquery()
        replays = (
            select(func.count()).select_from(_EST)
            .where(_EST.c.env_id == _ENV.c.env_id, _EST.c.replay.is_(True)).scalar_subquery()
        )
        for i in range(0, len(env_ids), 500):
            chunk = env_ids[i : i + 500]
            conn.execute(
                update(_ENV).where(_ENV.c.env_id.in_(chunk))
                .values(plays_plain=plain, plays_hinted=hinted, rounds=rounds, replays=replays)
            )

    def _row(self, env_id: str) -> dict[str, Any]:
        row = self._envs.get(env_id)
        if row is not None:
            return row
        loaded = None
        if env_id in self._stored:
            with self.engine.connect() as conn:
                loaded = conn.execute(select(_ENV).where(_ENV.c.env_id == env_id)).mappings().first()
        row = dict(loaded) if loaded is not None else env_defaults(env_id)
        row["sources"] = dict(row.get("sources") or {})
        row["parents"] = list(row.get("parents") or [])
        self._envs[env_id] = row
        return row

    def _touch(self, env_id: str, record: Record, event_type: str) -> tuple[dict[str, Any], bool]:
        """The env row, with offsets widened; ``True`` when ``record`` is not older than the event
        that last set this type's fields (so its fields should be written)."""
        row = self._row(env_id)
        off = record.offset
        row["partition"] = record.partition
        row["first_offset"] = off if row["first_offset"] is None else min(row["first_offset"], off)
        row["last_offset"] = off if row["last_offset"] is None else max(row["last_offset"], off)
        self._dirty.add(env_id)
        prev = row["sources"].get(event_type)
        if prev is not None and int(prev[0]) > off:
            return row, False
        row["sources"][event_type] = [off, record.envelope.event_id]
        return row, True

    def _proposed(self, record: Record, ev: EnvironmentProposed) -> None:
        row, fresh = self._touch(ev.env_id, record, "EnvironmentProposed")
        if not fresh:
            return
        doc = ev.document
        row.update(
            skill=ev.skill, difficulty=ev.difficulty, code=ev.code, code_sha256=ev.code_sha256,
            document_source=doc.source if doc else None, document_id=doc.doc_id if doc else None,
            document_sha256=doc.sha256 if doc else None, document_title=doc.title if doc else None,
            parents=list(ev.parents), repair_of=ev.repair_of, attempt=ev.attempt,
            policy_version=ev.policy_version, proposed_at=record.envelope.occurred_at,
        )

    def _validated(self, record: Record, ev: EnvironmentValidated) -> None:
        row, fresh = self._touch(ev.env_id, record, "EnvironmentValidated")
        if not fresh:
            return
        failed = ev.failed_check
        if failed is None and not ev.valid:
            failed = next((c.name for c in ev.checks if not c.passed), None)
        if ev.valid and not ev.accepted and ev.novel is False:
            failed = failed or "novelty"
        row.update(
            valid=ev.valid,
            error_kind=ev.error_kind or ("duplicate" if ev.valid and not ev.accepted and ev.novel is False else None),
            failed_check=failed, class_name=ev.class_name, novel=ev.novel, novelty=ev.novelty,
            nearest_env_id=ev.nearest_env_id, verdict="accepted" if ev.accepted else "rejected",
        )

    def _hint(self, record: Record, ev: HintWritten) -> None:
        row, fresh = self._touch(ev.env_id, record, "HintWritten")
        if fresh:
            row.update(hint=ev.hint, hint_policy_version=ev.policy_version)

    def _rollout(self, record: Record, ev: RolloutSummary) -> None:
        self._touch(ev.env_id, record, "RolloutCompleted")
        eid = record.envelope.event_id
        self._plays[eid] = (  # in _PLAY_ORDER
            eid, ev.env_id, ev.play_id, ev.hinted, ev.seed, ev.policy_version, ev.episode_reward, ev.turns,
            ev.terminated, ev.truncated, ev.step_timeout, ev.error, ev.seconds, record.envelope.occurred_at,
            record.partition, record.offset, ev.round,
        )

    def _regret(self, record: Record, ev: RegretEstimated) -> None:
        eid = record.envelope.event_id
        self._estimates[eid] = (  # in _EST_ORDER
            eid, ev.env_id, ev.round, ev.replay, ev.designer_final, ev.win_rate_plain, ev.win_rate_hinted,
            ev.win_rate_smoothed, ev.regret, ev.designer_reward, ev.policy_version, record.partition, record.offset,
        )
        if ev.designer_final:
            row, fresh = self._touch(ev.env_id, record, "RegretEstimated:final")
            if fresh:
                row["designer_reward"] = ev.designer_reward
        row, fresh = self._touch(ev.env_id, record, "RegretEstimated")
        if not row["skill"]:
            row["skill"] = ev.skill
        if not fresh:
            return
        row.update(
            win_rate_plain=ev.win_rate_plain, win_rate_hinted=ev.win_rate_hinted, regret=ev.regret,
            win_rate_smoothed=ev.win_rate_smoothed, agent_policy_version=ev.policy_version or None,
        )

    def _policy(self, record: Record, ev: PolicyUpdated) -> None:
        self._policies[ev.version] = {
            "version": ev.version, "parent_version": ev.parent_version, "step": ev.step,
            "checkpoint_uri": ev.checkpoint.uri if ev.checkpoint else None,
            "checkpoint_sha256": ev.checkpoint.sha256 if ev.checkpoint else None,
            "base_model": ev.base_model, "metrics": dict(ev.metrics), "event_id": record.envelope.event_id,
            "occurred_at": record.envelope.occurred_at, "partition": record.partition, "offset": record.offset,
        }

    HANDLERS = {
        EnvironmentProposed: _proposed,
        EnvironmentValidated: _validated,
        HintWritten: _hint,
        RolloutSummary: _rollout,
        RegretEstimated: _regret,
        PolicyUpdated: _policy,
    }
