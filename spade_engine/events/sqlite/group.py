"""The consumer group of the embedded SQLite log: one member per group (the log has one partition)."""

from __future__ import annotations

import fcntl
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import EventLogError
from ..group import positions_after
from ..log import Cursor, Record

__all__ = ["SqliteGroupConsumer"]


class SqliteGroupConsumer:
    """The single member of ``group`` on an embedded SQLite log.

    Reads from the group's committed cursor; ``commit`` stores the cursor in the log's
    ``consumer_offsets`` table. An exclusive ``flock`` on ``<log>.group-<group>.lock`` makes a
    second member of the same group fail fast instead of doing the same work twice.
    """

    def __init__(self, log: Any, group: str, *, max_records: int = 100):
        self.log = log
        self.group = group
        self.max_records = max_records
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", group)
        self._lock_path = Path(str(log.path) + f".group-{safe}.lock")
        self._fh = open(self._lock_path, "a+")
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._fh.close()
            raise EventLogError(
                f"consumer group {group!r} already has a member on {log.path} (the embedded log allows one per group)"
            ) from None
        self._position: Cursor = dict(log.committed(group))

    def poll(self, timeout: float = 1.0) -> list[Record]:
        deadline = time.monotonic() + timeout
        while True:
            recs = list(self.log.read(self._position, limit=self.max_records))
            if recs:
                self._position = positions_after(recs, self._position)
                return recs
            if time.monotonic() >= deadline:
                return []
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def commit(self, records: Sequence[Record]) -> None:
        if records:
            self.log.commit(self.group, positions_after(records, self.log.committed(self.group)))

    def assignment(self) -> list[int]:
        return [0]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
