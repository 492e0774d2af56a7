"""Exporting a run's environments, plays and turns as tables for other tools: Apache Parquet
(pyarrow) or JSON Lines.

* ``environments``: one row per environment of the archive projection (code, document, lineage,
  verdict and failed check, novelty, hint, play counts, win rates, regret, designer reward...);
* ``plays``: one row per play of the archive (env, play id, hinted, seed, policy version,
  episode reward, turns, how it ended: terminated/truncated/step timeout/error and the recorded
  ``end_reason``), the play's ``round`` (0 for the first plays, r for a repeated or level-replay
  round), with the environment's skill;
* ``turns``: one row per agent turn, read from the ``RolloutCompleted`` events of the log
  (observation, action, reward, terminated/truncated, step time, and the completion's token ids,
  behaviour log-probs and finish reason; ``generation_ref`` when the tokens were offloaded to a
  blob).

Every table has a fixed schema (:func:`schema`), so an empty run and a full one give files of the
same shape, and ``pyarrow.parquet.read_table`` / ``pandas.read_parquet`` / ``polars`` / DuckDB read
them as they are. Times (``proposed_at``, ``occurred_at``) are Parquet timestamps (microseconds,
UTC), so tools read them as times, not text; JSON Lines write them as the log's ISO 8601 text.
Rows follow log order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import select
from sqlalchemy.engine import Engine

from ..errors import SpadeError
from ..events.catalogue import RolloutCompleted
from ..events.errors import EventError
from ..events.log import EventLog
from .models import Environment, Play

__all__ = ["TABLES", "FORMATS", "schema", "ExportError", "table_rows", "write_table", "export_tables"]

TABLES = ("environments", "plays", "turns")
FORMATS = ("parquet", "jsonl")


class ExportError(SpadeError):
    """An export cannot be done as asked (unknown table or format, pyarrow missing)."""


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    s, i, f, b, t = pa.string(), pa.int64(), pa.float64(), pa.bool_(), pa.timestamp("us", tz="UTC")
    return {
        "environments": pa.schema([
            ("env_id", s), ("skill", s), ("difficulty", f), ("code", s), ("code_sha256", s),
            ("document_source", s), ("document_id", s), ("document_sha256", s), ("document_title", s),
            ("parents", pa.list_(s)), ("repair_of", s), ("attempt", i), ("policy_version", s), ("verdict", s),
            ("valid", b), ("error_kind", s), ("failed_check", s), ("class_name", s), ("novel", b), ("novelty", f),
            ("nearest_env_id", s), ("hint", s), ("hint_policy_version", s), ("plays_plain", i), ("plays_hinted", i),
            ("win_rate_plain", f), ("win_rate_hinted", f), ("regret", f), ("designer_reward", f),
            ("agent_policy_version", s), ("proposed_at", t), ("partition", i), ("first_offset", i), ("last_offset", i),
        ]),
        "plays": pa.schema([
            ("event_id", s), ("env_id", s), ("skill", s), ("play_id", s), ("hinted", b), ("seed", i),
            ("policy_version", s), ("round", i), ("episode_reward", f), ("turns", i), ("terminated", b), ("truncated", b),
            ("step_timeout", b), ("error", s), ("end_reason", s), ("seconds", f), ("occurred_at", t), ("partition", i),
            ("offset", i),
        ]),
        "turns": pa.schema([
            ("event_id", s), ("env_id", s), ("play_id", s), ("hinted", b), ("seed", i), ("policy_version", s),
            ("turn", i), ("observation", s), ("action", s), ("reward", f), ("terminated", b), ("truncated", b),
            ("step_seconds", f), ("completion_token_ids", pa.list_(i)), ("logprobs", pa.list_(f)),
            ("finish_reason", s), ("generation_ref", s), ("partition", i), ("offset", i),
        ]),
    }


def schema(name: str) -> Any:
    """The pyarrow schema of table ``name`` (pyarrow is imported only when an export runs)."""
    if name not in TABLES:
        raise ExportError(f"unknown table {name!r} (expected {', '.join(TABLES)})")
    return _schemas()[name]


def _env_rows(engine: Engine) -> Iterator[dict[str, Any]]:
    t = Environment.__table__
    q = select(t).order_by(t.c.partition, t.c.first_offset, t.c.env_id)
    with engine.connect() as conn:
        for r in conn.execute(q).mappings():
            row = dict(r)
            row.pop("sources", None)
            yield row


def _end_reasons(log: EventLog, skipped: dict[str, int]) -> dict[str, str]:
    """Why each play ended, by event id, as its RolloutCompleted records it (older versions upcast)."""
    out: dict[str, str] = {}
    for rec in log.read():
        if b'"type":"RolloutCompleted"' not in rec.raw:  # canonical JSON: a cheap filter before decoding
            continue
        try:
            ev = rec.envelope.event()
        except EventError as exc:
            reason = type(exc).__name__
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        if isinstance(ev, RolloutCompleted) and ev.end_reason:
            out[rec.envelope.event_id] = ev.end_reason
    return out


def _play_rows(engine: Engine, log: EventLog, skipped: dict[str, int]) -> Iterator[dict[str, Any]]:
    reasons = _end_reasons(log, skipped)
    p, e = Play.__table__, Environment.__table__
    q = select(p, e.c.skill).join(e, e.c.env_id == p.c.env_id, isouter=True).order_by(p.c.partition, p.c.offset)
    with engine.connect() as conn:
        for r in conn.execute(q).mappings():
            yield {**r, "end_reason": reasons.get(r["event_id"])}


def _turn_rows(log: EventLog, skipped: dict[str, int]) -> Iterator[dict[str, Any]]:
    for rec in log.read():
        try:
            env = rec.envelope
            if env.type != RolloutCompleted.TYPE:
                continue
            ev = env.event()
        except EventError as exc:
            reason = type(exc).__name__
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        for n, turn in enumerate(ev.turns):
            gen = turn.generation
            yield {
                "event_id": env.event_id, "env_id": ev.env_id, "play_id": ev.play_id, "hinted": ev.hinted,
                "seed": ev.seed, "policy_version": ev.policy_version, "turn": n, "observation": turn.observation,
                "action": turn.action, "reward": turn.reward, "terminated": turn.terminated, "truncated": turn.truncated,
                "step_seconds": turn.step_seconds,
                "completion_token_ids": list(gen.completion_token_ids) if gen else [],
                "logprobs": list(gen.logprobs) if gen else [],
                "finish_reason": gen.finish_reason if gen else None,
                "generation_ref": gen.ref.uri if gen and gen.ref else None,
                "partition": rec.partition, "offset": rec.offset,
            }


def table_rows(name: str, *, archive: Engine, log: EventLog, skipped: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of table ``name`` (one of :data:`TABLES`), in log order."""
    if name == "environments":
        return _env_rows(archive)
    if name == "plays":
        return _play_rows(archive, log, skipped if skipped is not None else {})
    if name == "turns":
        return _turn_rows(log, skipped if skipped is not None else {})
    raise ExportError(f"unknown table {name!r} (expected {', '.join(TABLES)})")


def _write_parquet(name: str, rows: Iterator[dict[str, Any]], path: Path, batch_rows: int = 10_000) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sch = schema(name)
    columns = sch.names
    times = [field.name for field in sch if pa.types.is_timestamp(field.type)]
    n = 0
    with pq.ParquetWriter(str(path), sch, compression="zstd") as writer:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            if batch:
                rows = [{c: r.get(c) for c in columns} for r in batch]
                for row in rows:
                    for c in times:
                        row[c] = _timestamp(row[c])
                writer.write_table(pa.Table.from_pylist(rows, schema=sch))
                batch.clear()

        for row in rows:
            batch.append(row)
            n += 1
            if len(batch) >= batch_rows:
                flush()
        flush()
    return n


def _timestamp(value: Any) -> datetime | None:
    """A recorded time (ISO 8601 text, ``Z`` for UTC) as an aware datetime; ``None`` when absent
    or not a time (an old or hand-made record)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def _write_jsonl(name: str, rows: Iterator[dict[str, Any]], fh: BinaryIO) -> int:
    from ..textout import json_text

    columns = schema(name).names
    n = 0
    for row in rows:
        doc = {c: row.get(c) for c in columns}
        fh.write(json_text(doc).encode("utf-8", "backslashreplace") + b"\n")
        n += 1
    return n


def write_table(name: str, rows: Iterator[dict[str, Any]], fmt: str, out: Path | BinaryIO) -> int:
    """Write ``rows`` of table ``name`` as ``fmt`` to a path (atomically: a ``.part`` file renamed
    at the end) or, for JSON Lines, a binary stream; return the row count."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (expected {' or '.join(FORMATS)})")
    if not isinstance(out, Path):
        if fmt == "parquet":
            raise ExportError("a Parquet export needs --out FILE")
        return _write_jsonl(name, rows, out)
    tmp = out.with_name(out.name + ".part")
    try:
        if fmt == "parquet":
            n = _write_parquet(name, rows, tmp)
        else:
            with open(tmp, "wb") as fh:
                n = _write_jsonl(name, rows, fh)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return n


def export_tables(
    names: list[str], fmt: str, out: Path | BinaryIO, *, archive: Engine, log: EventLog
) -> dict[str, tuple[Any, int, dict[str, int]]]:
    """Export each table of ``names``: to ``out`` itself for one table, into the directory ``out``
    as ``<table>.<fmt>`` for several. Returns ``{table: (where, rows, skipped events)}``."""
    result: dict[str, tuple[Any, int, dict[str, int]]] = {}
    several = len(names) > 1
    if several:
        if not isinstance(out, Path):
            raise ExportError("several tables need --out DIR")
        out.mkdir(parents=True, exist_ok=True)
    for name in names:
        target: Any = out / f"{name}.{fmt}" if several and isinstance(out, Path) else out
        skipped: dict[str, int] = {}
        n = write_table(name, table_rows(name, archive=archive, log=log, skipped=skipped), fmt, target)
        result[name] = (target, n, skipped)
    return result


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a JSON Lines export (for tests and notebooks)."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
