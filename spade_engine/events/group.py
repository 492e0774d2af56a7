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

Backends: :class:`~spade_engine.events.kafka.group.KafkaGroupConsumer` (Kafka consumer groups:
partition assignment, heartbeats, rebalance when a member dies or joins) and
:class:`~spade_engine.events.sqlite.group.SqliteGroupConsumer` (the embedded log has one partition, so a group has a single
member: a second one is refused while the first holds the group's lock file).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .log import Cursor, Record, advance

__all__ = ["GroupConsumer", "positions_after"]


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
