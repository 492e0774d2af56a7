"""Held-out evaluation results of a run, as the dashboard and the audit show them.

:class:`EvaluationPoints` is a small projection (persisted as JSON next to the dashboard's
others) of the run's ``EvaluationCompleted`` events: one row per event with the task, the
evaluated policy version, accuracy and its interval, items and samples. :func:`evaluation_rows`
builds the same rows from records (the audit reads the log up to its cursor).
:func:`~spade_engine.dashboard.curves.evaluation_curves` puts the rows on the training charts'
x axis, the policy version's trainer step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..events.catalogue import EvaluationCompleted
from ..events.log import Cursor, Record

__all__ = ["EvaluationPoints", "evaluation_row", "evaluation_rows", "ROW_FIELDS"]

#: the payload fields each row keeps (per-item lists stay in the log)
ROW_FIELDS = ("evaluation_id", "suite", "task", "items", "k", "temperature", "greedy", "correct", "accuracy", "ci_low",
              "ci_high", "mean_score", "policy_version", "checkpoint_sha256", "model", "seed", "scoring_errors",
              "completion_tokens")


def evaluation_row(rec: Record) -> dict[str, Any] | None:
    """The row of one record (None: not a readable EvaluationCompleted)."""
    env = rec.envelope
    if env.type != EvaluationCompleted.TYPE:
        return None
    try:
        ev = env.event()
    except Exception:  # noqa: BLE001 - a reader never crashes on a bad event
        return None
    row = {f: getattr(ev, f) for f in ROW_FIELDS}
    row.update(label=f"{ev.suite}/{ev.task}", producer=env.producer, occurred_at=env.occurred_at,
               partition=rec.partition, offset=rec.offset)
    return row


def evaluation_rows(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Rows of every readable EvaluationCompleted in ``records``, in log order."""
    return [r for r in (evaluation_row(rec) for rec in records) if r is not None]


class EvaluationPoints:
    """The run's evaluation rows (a Projection persisted as JSON)."""

    name = "dashboard-evaluations"

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.rows: list[dict[str, Any]] = []
        self._cursor: Cursor = {}
        if self.path is not None and self.path.exists():
            data = json.loads(self.path.read_text())
            self.rows = list(data["rows"])
            self._cursor = {int(p): int(o) for p, o in data["cursor"].items()}

    def apply(self, record: Record) -> None:
        row = evaluation_row(record)
        if row is not None:
            self.rows.append(row)

    def flush(self, cursor: Mapping[int, int]) -> None:
        self._cursor = {int(p): int(o) for p, o in cursor.items()}
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"rows": self.rows, "cursor": {str(p): o for p, o in self._cursor.items()}}))
        os.replace(tmp, self.path)

    def position(self) -> Cursor:
        return dict(self._cursor)
