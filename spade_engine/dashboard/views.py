"""The dashboard's read model of one run: the archive and difficulty projections it feeds, and
the JSON shapes the web page and the audit read from them.

Nothing here derives a number the projections already hold: environments, plays and policy
versions come from :class:`~spade_engine.archive.projection.ArchiveProjection` (SQL tables),
the windowed statistics from the difficulty series, and what the archive does not keep (each
validation check, the turns of a play) is read back from the log at the offset the archive
records for the event.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import String, cast, func, select

from ..archive.difficulty import DEFAULT_WINDOW
from ..archive.models import Environment, Play, PolicyVersion
from ..archive.queries import get_environment, plays_of, policy_versions
from ..archive.replay import open_projections
from ..recorded import recorded_config_or_default
from ..events.log import Cursor, EventLog, Record
from .evaluations import EvaluationPoints

__all__ = ["RunView", "EventCounts", "highlight_python", "highlight_css", "SORTS", "METRICS"]

#: difficulty-series metric -> label, in display order
METRICS: dict[str, str] = {
    "win_rate_plain": "win rate (plain)",
    "win_rate_hinted": "win rate (hinted)",
    "regret": "regret",
    "designer_reward": "designer reward",
    "validation_pass_rate": "validation pass rate",
    "novelty": "novelty",
}

_ENV = Environment.__table__
_PLAY = Play.__table__
_POLICY = PolicyVersion.__table__

#: sort key accepted by :meth:`RunView.envs` -> column
SORTS = {
    "offset": _ENV.c.first_offset,
    "regret": _ENV.c.regret,
    "win_rate_plain": _ENV.c.win_rate_plain,
    "win_rate_hinted": _ENV.c.win_rate_hinted,
    "designer_reward": _ENV.c.designer_reward,
    "novelty": _ENV.c.novelty,
}
_LIST_COLUMNS = (
    "env_id", "skill", "verdict", "error_kind", "failed_check", "attempt", "repair_of", "novelty",
    "win_rate_plain", "win_rate_hinted", "regret", "designer_reward", "plays_plain", "plays_hinted",
    "first_offset", "proposed_at",
)


class EventCounts:
    """Events seen by type (a tiny Projection persisted as JSON next to the others)."""

    name = "dashboard-counts"

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.counts: dict[str, int] = {}
        self._cursor: Cursor = {}
        self.skipped: dict[str, int] = {}
        if self.path is not None and self.path.exists():
            data = json.loads(self.path.read_text())
            self.counts = {k: int(v) for k, v in data["counts"].items()}
            self._cursor = {int(p): int(o) for p, o in data["cursor"].items()}

    def apply(self, record: Record) -> None:
        t = record.envelope.type
        self.counts[t] = self.counts.get(t, 0) + 1

    def flush(self, cursor: Mapping[int, int]) -> None:
        self._cursor = {int(p): int(o) for p, o in cursor.items()}
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"counts": self.counts, "cursor": {str(p): o for p, o in self._cursor.items()}}))
        os.replace(tmp, self.path)

    def position(self) -> Cursor:
        return dict(self._cursor)


@lru_cache(maxsize=1)
def highlight_css() -> str:
    """Pygments CSS for highlighted code (class ``hl``)."""
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="friendly", cssclass="hl").get_style_defs(".hl")


def highlight_python(code: str) -> str:
    """Python source as highlighted HTML (pygments; escaped, no scripts)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(code, PythonLexer(), HtmlFormatter(cssclass="hl", linenos="table"))


class RunView:
    """The projections of one run the dashboard keeps, and the queries it answers.

    ``state_dir`` holds the projections' snapshots (archive, memory and difficulty as
    :func:`~spade_engine.archive.replay.open_projections` lays them out, plus ``counts.json``);
    a dashboard restarted on the same run resumes from them instead of re-reading the log. The
    dashboard keeps its own copy (``<run dir>/dashboard``) so it never writes the projections a
    running engine maintains.
    """

    def __init__(self, log: EventLog, state_dir: str | Path, *, window: int = DEFAULT_WINDOW):
        self.log = log
        self.state_dir = Path(state_dir)
        self.config = recorded_config_or_default(log)
        self.band = (self.config.reward.band_low, self.config.reward.band_high)
        self.projs = open_projections(self.state_dir, self.config, window=window)
        self.archive = self.projs.archive
        self.memory = self.projs.memory
        self.difficulty = self.projs.difficulty
        self.counts = EventCounts(self.state_dir / "counts.json")
        self.evaluations = EvaluationPoints(self.state_dir / "evaluations.json")
        self.projections = [*self.projs.all, self.counts, self.evaluations]
        self.engine = self.archive.engine
        self._add_lineage_indexes()
        #: where each projection's snapshot was when opened: older records are not re-applied
        self._starts = [p.position() for p in self.projections]

    def _add_lineage_indexes(self) -> None:
        """Indexes for the environment browser's lineage and neighbour look-ups, on this private
        copy of the archive only (a covering index for ``parents``, so finding the environments
        that used one as an example scans the index rather than every row's code)."""
        from sqlalchemy import text

        with self.engine.begin() as conn:
            for name, cols in (("dash_ix_repair_of", "repair_of"), ("dash_ix_nearest", "nearest_env_id"),
                               ("dash_ix_parents", "parents, env_id, first_offset")):
                conn.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON environments ({cols})"))

    # -- feeding ---------------------------------------------------------------------------------

    def position(self) -> Cursor:
        """The earliest cursor any projection needs to resume from."""
        cursors = [p.position() for p in self.projections]
        if any(not c for c in cursors):
            return {}
        parts = set().union(*[c.keys() for c in cursors])
        return {p: min(c.get(p, 0) for c in cursors) for p in parts}

    def apply(self, record: Record) -> None:
        for proj, start in zip(self.projections, self._starts):
            if record.offset >= start.get(record.partition, 0):
                proj.apply(record)

    def flush(self, cursor: Mapping[int, int], *, light: bool = False) -> None:
        """Snapshot the projections at ``cursor``; ``light`` only the archive and the counters
        (incremental writes), leaving the full-state memory and difficulty snapshots for later."""
        names = {self.archive.name, self.counts.name, self.evaluations.name} if light else {p.name for p in self.projections}
        self.flush_only(cursor, names)

    def flush_only(self, cursor: Mapping[int, int], names: set[str] | tuple[str, ...]) -> None:
        """Snapshot the named projections at ``cursor``."""
        for proj in self.projections:
            if proj.name in names:
                proj.flush(cursor)

    def close(self) -> None:
        self.projs.close()

    # -- queries ---------------------------------------------------------------------------------

    def verdicts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(_ENV.c.verdict, func.count()).group_by(_ENV.c.verdict)).all()
        return {v: int(n) for v, n in sorted(rows)}

    def rejections(self) -> list[dict[str, Any]]:
        """Rejected environments grouped by error kind and failed check, most frequent first."""
        q = (
            select(_ENV.c.error_kind, _ENV.c.failed_check, func.count().label("n"))
            .where(_ENV.c.verdict == "rejected")
            .group_by(_ENV.c.error_kind, _ENV.c.failed_check)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(q).all()
        out = [{"error_kind": e or "", "failed_check": c or "", "count": int(n)} for e, c, n in rows]
        return sorted(out, key=lambda r: (-r["count"], r["error_kind"], r["failed_check"]))

    def skills(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(s for (s,) in conn.execute(select(_ENV.c.skill).distinct()) if s)

    def series(self, rows: list[dict[str, Any]] | None = None, window: int | None = None) -> dict[str, Any]:
        return {"metrics": METRICS, "window": window or self.difficulty.window, "band": list(self.band),
                "rows": self.difficulty.rows(window) if rows is None else rows}

    def evaluation_rows(self) -> list[dict[str, Any]]:
        """The run's EvaluationCompleted rows, in log order (see :mod:`.evaluations`)."""
        return list(self.evaluations.rows)

    def policies(self) -> list[dict[str, Any]]:
        return [
            {k: r[k] for k in ("version", "parent_version", "step", "checkpoint_uri", "checkpoint_sha256",
                               "base_model", "metrics", "occurred_at", "offset")}
            for r in policy_versions(self.engine)
        ]

    def envs(
        self,
        *,
        verdict: str | None = None,
        skill: str | None = None,
        q: str | None = None,
        sort: str = "offset",
        desc: bool = False,
        limit: int = 50,
        offset: int = 0,
    ) -> dict[str, Any]:
        """A page of the environment table with the total matching; ``repaired_by`` is the first
        environment proposed as a repair of each row's (``None`` if none)."""
        col = SORTS.get(sort, SORTS["offset"])
        cond = []
        if verdict:
            cond.append(_ENV.c.verdict == verdict)
        if skill:
            cond.append(_ENV.c.skill == skill)
        if q:
            cond.append(_ENV.c.env_id.startswith(q))
        order = [col.is_(None), col.desc() if desc else col.asc(), _ENV.c.env_id]
        fix = _ENV.alias("fix")
        repaired_by = (select(fix.c.env_id).where(fix.c.repair_of == _ENV.c.env_id)
                       .order_by(fix.c.first_offset, fix.c.env_id).limit(1).scalar_subquery().label("repaired_by"))
        stmt = select(*[_ENV.c[c] for c in _LIST_COLUMNS], repaired_by).where(*cond).order_by(*order)
        stmt = stmt.limit(max(1, min(limit, 500))).offset(max(0, offset))
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(_ENV).where(*cond)).scalar_one()
            rows = [dict(r) for r in conn.execute(stmt).mappings()]
        return {"total": int(total), "rows": rows}

    def all_envs(self) -> list[dict[str, Any]]:
        """Every environment (table columns without code), in log order."""
        cols = [c for c in _ENV.columns if c.name not in ("code", "sources")]
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(
                select(*cols).order_by(_ENV.c.partition, _ENV.c.first_offset, _ENV.c.env_id)).mappings()]

    def event_at(self, source: Any, partition: int = 0) -> Record | None:
        """The log record an archive ``sources`` entry ``[offset, event_id]`` points at."""
        if not source:
            return None
        off, event_id = int(source[0]), source[1]
        for rec in self.log.read({partition: off}, limit=1):
            if rec.envelope.event_id == event_id:
                return rec
        return None

    def _brief(self, env_ids: list[str]) -> list[dict[str, Any]]:
        if not env_ids:
            return []
        cols = [_ENV.c[c] for c in ("env_id", "skill", "verdict", "error_kind", "failed_check", "attempt", "regret",
                                    "win_rate_plain", "novelty")]
        with self.engine.connect() as conn:
            found = {r["env_id"]: dict(r) for r in conn.execute(select(*cols).where(_ENV.c.env_id.in_(env_ids))).mappings()}
        return [found.get(e, {"env_id": e, "verdict": "unknown"}) for e in env_ids]

    def memory_neighbours(self, env_id: str, k: int = 5) -> list[dict[str, Any]]:
        """The ``k`` most similar environments in the novelty memory (accepted ones only)."""
        vec = self.memory.vector(env_id)
        if vec is None:
            return []
        sims, rows = self.memory.search(vec, k + 1)
        found = []
        for sim, r in zip(sims[0], rows[0]):
            if r < 0:
                continue
            other = self.memory.entries[int(r)]["env_id"]
            if other != env_id:
                found.append((other, float(sim)))
        out = self._brief([e for e, _ in found[:k]])
        for b, (_, sim) in zip(out, found):
            b["relation"] = f"similarity {sim:.3f} in memory"
        return out

    def env(self, env_id: str) -> dict[str, Any] | None:
        """Everything about one environment: code (highlighted), hint, each validation check,
        plays, lineage (memory parents, repair chain, children) and nearest neighbours."""
        row = get_environment(self.engine, env_id)
        if row is None:
            return None
        env_id = row["env_id"]
        sources = row.get("sources") or {}
        checks: list[dict[str, Any]] = []
        validated = self.event_at(sources.get("EnvironmentValidated"), int(row.get("partition") or 0))
        if validated is not None:
            checks = list(validated.envelope.payload.get("checks") or [])
        ancestors = []
        seen = {env_id}
        cur = row.get("repair_of")
        while cur and cur not in seen and len(ancestors) < 50:
            seen.add(cur)
            ancestors.append(cur)
            parent = get_environment(self.engine, cur)
            cur = parent.get("repair_of") if parent and parent["env_id"] == cur else None
        with self.engine.connect() as conn:
            repairs = [r for (r,) in conn.execute(select(_ENV.c.env_id).where(_ENV.c.repair_of == env_id).order_by(_ENV.c.first_offset))]
            like = f'%"{env_id}"%'
            children = [r for (r,) in conn.execute(
                select(_ENV.c.env_id).where(cast(_ENV.c.parents, String).like(like)).order_by(_ENV.c.first_offset).limit(50))]
            near_of = [r for (r,) in conn.execute(
                select(_ENV.c.env_id).where(_ENV.c.nearest_env_id == env_id).order_by(_ENV.c.first_offset).limit(50))]
        neighbours = self._brief([row["nearest_env_id"]] if row.get("nearest_env_id") else [])
        for n in neighbours:
            n["relation"] = "nearest when validated"
        for n in self.memory_neighbours(env_id):
            if all(n["env_id"] != m["env_id"] for m in neighbours):
                neighbours.append(n)
        for n in self._brief(near_of):
            n["relation"] = "has this as nearest"
            neighbours.append(n)
        plays = [
            {k: p[k] for k in ("play_id", "hinted", "seed", "policy_version", "episode_reward", "turns", "terminated",
                               "truncated", "step_timeout", "error", "seconds", "offset")}
            for p in plays_of(self.engine, env_id)
        ]
        out = {k: v for k, v in row.items() if k != "sources"}
        out.update(
            code_html=highlight_python(row.get("code") or ""),
            checks=checks,
            plays=plays,
            lineage={
                "parents": self._brief(list(row.get("parents") or [])),
                "repair_chain": self._brief(ancestors),
                "repairs": self._brief(repairs),
                "children": self._brief([c for c in children if c != env_id]),
            },
            neighbours=neighbours,
        )
        return out
