"""Consumer-group membership: the work-sharing read API that distributed workers use.

:meth:`EventLog.read`/``follow`` read *every* partition of a run; a role worker instead joins a
consumer group and reads only the partitions the group assigns to it, so two validators split
the environments between them (an environment's events share a key, hence a partition, hence a
member). A :class:`GroupConsumer`:

* ``poll(timeout)`` returns the next records of the partitions assigned to this member (possibly
  none); after a rebalance it re-delivers from the group's committed offsets;
* ``commit(records)`` records the group's position just past the given records. Call it only
  after the outputs caused by them were appended (``EventLog.append`` returns once the broker
  acknowledged them), so a member that dies loses nothing: its input is re-delivered to
  whichever member takes over its partitions;
* ``close()`` leaves the group (the remaining members are rebalanced at once).

Backends: :class:`~spade_engine.events.kafka_group.KafkaGroupConsumer` (Kafka consumer groups:
partition assignment, heartbeats, rebalance when a member dies or joins) and
:class:`SqliteGroupConsumer` below (the embedded log has one partition, so a group has a single
member: a second one is refused while the first holds the group's lock file).
"""

from __future__ import annotations

import fcntl
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import EventLogError
from .log import Cursor, Record, advance

__all__ = ["GroupConsumer", "SqliteGroupConsumer", "positions_after"]


@runtime_checkable
class GroupConsumer(Protocol):
    """One member of a consumer group on a run's log (see the module docstring)."""

    group: str

    def poll(self, timeout: float = 1.0) -> list[Record]:
        """The next records of this member's partitions (waits up to ``timeout`` seconds)."""
        ...

    def commit(self, records: Sequence[Record]) -> None:
        """Commit the group's offsets just past ``records`` (after their outputs are recorded)."""
        ...

    def assignment(self) -> list[int]:
        """The partitions this member owns now."""
        ...

    def close(self) -> None:
        """Leave the group."""
        ...


def positions_after(records: Sequence[Record], base: Cursor | None = None) -> Cursor:
    """The cursor just past every record in ``records`` (starting from ``base``)."""
    cur: Cursor = dict(base or {})
    for rec in records:
        cur = advance(cur, rec)
    return cur


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
