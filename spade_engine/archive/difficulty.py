"""DifficultySeries: how difficulty evolved, per window of N environments and per skill.

State is one small record per environment (skill, when it was proposed, validation verdict,
novelty, win rates, regret, designer reward), folded idempotently from the log. Windows are
formed when read, by sorting environments by (proposal time, env_id), so the series does not
depend on how events of different environments were interleaved in delivery. Each row of
``rows()`` is one (window, skill) pair, plus ``skill="*"`` for all skills together: counts,
validation pass rate, acceptance rate, and means of novelty, plain, hinted and smoothed win
rates, regret and designer reward, plus how many rounds were estimated and how many of them were
level replays. An environment's win rates and regret are its latest round's (by offset), its
designer reward the designer-final estimate's, and its estimated rounds are kept by round number
(``rounds``), so replays extend its record instead of overwriting it. The snapshot is
``<run dir>/difficulty.json`` (state, cursor, rows).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..events.catalogue import EnvironmentProposed, EnvironmentValidated, RegretEstimated
from ..events.log import Cursor, Record
from .reader import LogReader
from .records import Skipped

__all__ = ["DifficultySeries", "DIFFICULTY_FILENAME", "DEFAULT_WINDOW"]

DIFFICULTY_FILENAME = "difficulty.json"
DEFAULT_WINDOW = 10
_MEANS = ("novelty", "win_rate_plain", "win_rate_hinted", "win_rate_smoothed", "regret", "designer_reward")


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 12) if values else None


class DifficultySeries(LogReader):
    """Per-window, per-skill difficulty statistics of a run (a :class:`Projection`)."""

    name = "difficulty"

    def __init__(self, path: Path | None = None, *, window: int = DEFAULT_WINDOW):
        if window < 1:
            raise ValueError("window must be >= 1")
        self.path = Path(path) if path is not None else None
        self.window = window
        self.envs: dict[str, dict[str, Any]] = {}
        self._saved_cursor: Cursor = {}
        self._skipped = Skipped()
        self._dirty = False
        if self.path is not None and self.path.exists():
            self._load()

    @classmethod
    def open(cls, run_dir: str | Path, *, window: int = DEFAULT_WINDOW) -> "DifficultySeries":
        return cls(Path(run_dir) / DIFFICULTY_FILENAME, window=window)

    # -- Projection protocol ---------------------------------------------------------------------

    def position(self) -> Cursor:
        return dict(self._saved_cursor)

    def _env(self, env_id: str, record: Record, kind: str) -> dict[str, Any] | None:
        env = self.envs.get(env_id)
        if env is None:
            env = self.envs[env_id] = {"skill": "", "t": record.envelope.occurred_at, "src": {}}
        prev = env["src"].get(kind)
        if prev is not None and prev > record.offset:
            return None
        env["src"][kind] = record.offset
        self._dirty = True
        return env

    def _proposed(self, record: Record, event: EnvironmentProposed) -> None:
        env = self._env(event.env_id, record, "p")
        if env is not None:
            env["skill"], env["t"] = event.skill, record.envelope.occurred_at

    def _validated(self, record: Record, event: EnvironmentValidated) -> None:
        env = self._env(event.env_id, record, "v")
        if env is not None:
            env.update(valid=bool(event.valid), accepted=bool(event.accepted), novelty=event.novelty)

    def _regret(self, record: Record, event: RegretEstimated) -> None:
        env = self.envs.get(event.env_id)
        if env is None:
            env = self.envs[event.env_id] = {"skill": "", "t": record.envelope.occurred_at, "src": {}}
        # every round is kept (idempotent: one estimate per round)
        env.setdefault("rounds", {})[str(event.round)] = {
            "win_rate_plain": event.win_rate_plain, "replay": bool(event.replay)
        }
        self._dirty = True
        if event.designer_final:
            fin = self._env(event.env_id, record, "rf")
            if fin is not None:
                fin["designer_reward"] = event.designer_reward
        env = self._env(event.env_id, record, "r")
        if env is not None:
            env.update(
                win_rate_plain=event.win_rate_plain, win_rate_hinted=event.win_rate_hinted,
                win_rate_smoothed=event.win_rate_smoothed, regret=event.regret,
            )
            env["skill"] = env["skill"] or event.skill

    WANTED = frozenset({"EnvironmentProposed", "EnvironmentValidated", "RegretEstimated"})
    HANDLERS = {EnvironmentProposed: _proposed, EnvironmentValidated: _validated, RegretEstimated: _regret}

    def skipped_changed(self) -> None:
        self._dirty = True

    def flush(self, cursor: Mapping[int, int]) -> None:
        cursor = {int(p): int(o) for p, o in cursor.items()}
        if self.path is not None and (self._dirty or cursor != self._saved_cursor):
            body = {
                "cursor": {str(p): o for p, o in sorted(cursor.items())},
                "skipped": self._skipped.by_event,
                "window": self.window,
                "envs": self.envs,
                "rows": self.rows(),
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".difficulty.")
            with os.fdopen(fd, "wb") as fh:
                fh.write(msgspec.json.encode(body, order="sorted"))
            os.replace(tmp, self.path)
        self._saved_cursor = cursor
        self._dirty = False

    def _load(self) -> None:
        from .embedder import EmbeddingError  # SpadeError subclass reused for snapshot errors

        try:
            body = json.loads(self.path.read_text())
            self.envs = dict(body["envs"])
            self._saved_cursor = {int(p): int(o) for p, o in body["cursor"].items()}
            self._skipped = Skipped(body.get("skipped", {}))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"difficulty snapshot {self.path} is unreadable ({exc}); rebuild it with `spade-engine replay`"
            ) from None

    # -- reading ---------------------------------------------------------------------------------

    def rows(self, window: int | None = None) -> list[dict[str, Any]]:
        """One dict per (window, skill), and per window for ``skill="*"``, in window order."""
        size = window or self.window
        order = sorted(self.envs.items(), key=lambda kv: (kv[1]["t"], kv[0]))
        out: list[dict[str, Any]] = []
        for w in range(0, len(order), size):
            chunk = order[w : w + size]
            groups: dict[str, list[dict[str, Any]]] = {"*": []}
            for _, env in chunk:
                groups["*"].append(env)
                groups.setdefault(env["skill"] or "?", []).append(env)
            for skill in sorted(groups):
                envs = groups[skill]
                validated = [e for e in envs if "valid" in e]
                row: dict[str, Any] = {
                    "window": w // size,
                    "skill": skill,
                    "first_env": chunk[0][0],
                    "last_env": chunk[-1][0],
                    "start": chunk[0][1]["t"],
                    "end": chunk[-1][1]["t"],
                    "environments": len(envs),
                    "validated": len(validated),
                    "valid": sum(1 for e in validated if e["valid"]),
                    "accepted": sum(1 for e in validated if e.get("accepted")),
                    "estimated": sum(1 for e in envs if e.get("regret") is not None),
                    "rounds": sum(len(e.get("rounds", {})) for e in envs),
                    "replays": sum(1 for e in envs for r in e.get("rounds", {}).values() if r["replay"]),
                }
                row["validation_pass_rate"] = round(row["valid"] / len(validated), 12) if validated else None
                row["acceptance_rate"] = round(row["accepted"] / len(validated), 12) if validated else None
                for key in _MEANS:
                    row[key] = _mean([e[key] for e in envs if e.get(key) is not None])
                out.append(row)
        return out

    def dump(self) -> dict[str, Any]:
        """Canonical content (for equality checks)."""
        return {
            "state": {"cursor": {str(p): o for p, o in sorted(self._saved_cursor.items())}, "skipped": dict(self._skipped.by_event)},
            "rows": self.rows(),
        }
