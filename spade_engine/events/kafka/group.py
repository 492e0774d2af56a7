"""Kafka consumer-group membership for role workers (see :mod:`spade_engine.events.group`).

A :class:`KafkaGroupConsumer` is a kafka-python ``KafkaConsumer`` subscribed to a run's topic
with ``group_id=<group>``: the group coordinator assigns partitions to live members, heartbeats
(a background thread) detect a dead member after ``session_timeout_s``, and its partitions move to
the others, which resume from the group's committed offsets. Auto-commit is off: offsets are
committed only by :meth:`commit`, after the outputs of the records were appended and acknowledged.
A commit refused because the group rebalanced meanwhile is not an error: the new owner gets the
records again, and the workers' deterministic output ids make the repeated outputs no-ops.
Undecodable records go to the run's dead-letter topic (once) and are skipped, as in ``read``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from ..log import Record
from .topics import broker_error

if TYPE_CHECKING:  # pragma: no cover
    from .log import KafkaEventLog

__all__ = ["KafkaGroupConsumer"]

log = logging.getLogger(__name__)


class KafkaGroupConsumer:
    """One member of consumer group ``group`` on ``log``'s topic.

    Args:
        log: the run's :class:`~spade_engine.events.kafka.log.KafkaEventLog`.
        group: the consumer group id (one per role, e.g. ``spade.<run>.validator``).
        session_timeout_s: how long the group waits for a silent member before rebalancing.
        max_records: most records one ``poll`` returns.
        max_poll_interval_s: most time between two polls before the member is considered stuck.
        client_id: shown in the broker's group description (e.g. ``validator-<pid>``).
    """

    def __init__(
        self,
        log: "KafkaEventLog",
        group: str,
        *,
        session_timeout_s: float = 10.0,
        max_records: int = 50,
        max_poll_interval_s: float = 900.0,
        client_id: str = "spade-engine-worker",
    ):
        self.log = log
        self.group = group
        self._seen: set[str] = set()
        session_ms = int(session_timeout_s * 1000)
        try:
            self._consumer = KafkaConsumer(
                bootstrap_servers=log.bootstrap,
                group_id=group,
                client_id=client_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=session_ms,
                heartbeat_interval_ms=max(100, session_ms // 3),
                max_poll_interval_ms=int(max_poll_interval_s * 1000),
                max_poll_records=max_records,
                request_timeout_ms=max(30000, session_ms + 5000),
                bootstrap_timeout_ms=int(log.connect_timeout_s * 1000),
            )
            self._consumer.subscribe([log.topic])
        except KafkaError as exc:
            raise broker_error(log.bootstrap, exc, f"joining consumer group {group!r}") from None

    def poll(self, timeout: float = 1.0) -> list[Record]:
        try:
            batch = self._consumer.poll(timeout_ms=max(1, int(timeout * 1000)))
        except KafkaError as exc:
            if getattr(exc, "retriable", False):
                return []
            raise broker_error(self.log.bootstrap, exc, f"polling group {self.group!r}") from None
        out: list[Record] = []
        for tp in sorted(batch, key=lambda t: t.partition):
            for msg in batch[tp]:
                rec = self.log._to_record(msg, self._seen)
                if rec is not None:  # None: a duplicate copy, or dead-lettered
                    out.append(rec)
        return out

    def commit(self, records: Sequence[Record]) -> None:
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        owned = self._consumer.assignment()
        for rec in records:
            tp = TopicPartition(self.log.topic, rec.partition)
            if tp not in owned:
                continue  # revoked meanwhile: the new owner re-processes it (idempotently)
            nxt = rec.offset + 1
            if tp not in offsets or offsets[tp].offset < nxt:
                offsets[tp] = OffsetAndMetadata(nxt, "", -1)
        if not offsets:
            return
        try:
            self._consumer.commit(offsets)
        except CommitFailedError as exc:
            log.warning("group %s: commit refused after a rebalance (records will be re-delivered): %s", self.group, exc)
        except KafkaError as exc:
            if not getattr(exc, "retriable", False):
                raise
            log.warning("group %s: commit failed (%s); records will be re-delivered", self.group, exc)

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self._consumer.assignment())

    def close(self) -> None:
        try:
            self._consumer.close()  # leaves the group: its partitions move at once
        except Exception:  # noqa: BLE001
            pass

