"""The Kafka event log: one topic per run on an Apache Kafka broker, through kafka-python.

Layout and record format:

* topic ``spade.<run_id>`` with the configured number of partitions, replication 1 on a
  single-node broker, unlimited retention (``retention.ms=-1``, ``retention.bytes=-1``);
* topic ``spade.<run_id>.dlq`` (one partition): records that could not be decoded, the reason and
  the source position in headers (``reason``, ``source``, ``received_at``, ``source_topic``,
  ``source_partition``, ``source_offset``);
* record key = envelope key (the environment id, else the run id), so one environment's events
  stay in one partition, in order; value = the canonical JSON envelope, byte for byte;
  headers ``event_type``, ``schema_version``, ``event_id``;
* the producer uses ``acks=all`` with idempotence: an ``append`` returns once every record is
  acknowledged, and broker-side retries never duplicate a record;
* a cursor is partition -> next offset; consumer groups are Kafka consumer groups whose offsets
  are committed explicitly (after processing) through the admin API.

Idempotence on ``event_id``: a broker cannot reject a duplicate key, so the log keeps an index
``event_id -> (partition, offset, type)`` built from record headers. Before each append it brings
the index up to date (the end offsets at that moment, then only the records it has not seen; its
own acknowledged writes are added without reading them back) and skips events already recorded.
Two writers racing to append the *same* event at the same instant can still both write it; readers
therefore yield only the first copy of an ``event_id`` they know of, and ``count_by_type`` counts
distinct ids. Reading an existing log = the topic from the cursor up to the end offsets at call
time; records that do not decode (bad JSON, missing fields, another run) are sent to the
dead-letter topic once and skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

from ..codec import decode_envelope, encode_envelope
from ..envelope import Envelope, utc_now
from ..errors import EventLogError, MalformedEvent, RunNotFound
from ..log import Cursor, DeadLetter, Record
from ..sizes import KAFKA_REQUEST_BYTES, MAX_EVENT_BYTES
from .topics import (
    _TOPIC_CONFIG,
    H_ID,
    H_TYPE,
    H_VERSION,
    TOPIC_PREFIX,
    admin_client,
    broker_error,
    dlq_topic_for,
    header,
    list_kafka_runs,
    retrying,
    topic_for,
)

if TYPE_CHECKING:  # pragma: no cover
    from .group import KafkaGroupConsumer

__all__ = ["KafkaEventLog", "list_kafka_runs", "topic_for", "dlq_topic_for", "TOPIC_PREFIX"]

log = logging.getLogger("spade_engine.events")

class KafkaEventLog:
    """:class:`~spade_engine.events.log.EventLog` on a Kafka topic per run.

    Args:
        bootstrap: ``HOST:PORT`` of a broker.
        run_id: the run; its topic is ``spade.<run_id>``.
        create: create the run's topics if missing (else :class:`RunNotFound` when absent).
        partitions: partitions of a newly created topic (an existing topic keeps its own).
        connect_timeout_s: how long to wait for the broker before :class:`EventLogError`.
    """

    backend = "kafka"

    def __init__(
        self,
        bootstrap: str,
        run_id: str,
        *,
        create: bool = True,
        partitions: int = 3,
        connect_timeout_s: float = 10.0,
        producer_options: Mapping[str, object] | None = None,
    ):
        self.bootstrap = bootstrap
        self.run_id = run_id
        self.topic = topic_for(run_id)
        self.dlq_topic = dlq_topic_for(run_id)
        self.connect_timeout_s = connect_timeout_s
        self._producer_options = dict(producer_options or {})
        self._lock = threading.RLock()
        self._producer: KafkaProducer | None = None
        self._index_consumer: KafkaConsumer | None = None
        self._index: dict[str, tuple[int, int, str]] = {}
        self._scanned: Cursor = {}
        self._dead_positions: set[tuple[int, int]] | None = None
        #: the largest record the run's topic takes (max.message.bytes, raised on open where allowed)
        self.max_event_bytes = MAX_EVENT_BYTES
        #: idle reader consumers, assigned to the run's partitions, reused by :meth:`read` (a new
        #: consumer costs a connection, metadata and offset lookups: about 0.1 s, once per read
        #: made the engine's append-then-refresh loop run at a few events per second)
        self._readers: list[KafkaConsumer] = []
        self._closed = False
        self._admin = admin_client(bootstrap, connect_timeout_s)
        try:
            self._ensure_topics(create, partitions)
        except BaseException:
            self._admin.close()
            raise

    # -- topics --------------------------------------------------------------------------------

    def _ensure_topics(self, create: bool, partitions: int) -> None:
        try:
            described = {t["name"]: t for t in self._admin.describe_topics([self.topic, self.dlq_topic])}
            missing = [t for t in (self.topic, self.dlq_topic) if not described.get(t, {}).get("partitions")]
            if missing and not create:
                if self.topic in missing:
                    raise RunNotFound(f"no run {self.run_id!r} on the Kafka broker at {self.bootstrap}")
            if missing:
                spec = {
                    t: {
                        "num_partitions": partitions if t == self.topic else 1,
                        "replication_factor": 1,
                        "configs": dict(_TOPIC_CONFIG),
                    }
                    for t in missing
                }
                try:
                    self._admin.create_topics(spec, wait_for_metadata=True)
                except TopicAlreadyExistsError:
                    pass  # another process created it meanwhile
                described = {t["name"]: t for t in self._admin.describe_topics([self.topic, self.dlq_topic])}
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, f"opening topic {self.topic}") from None
        self.partitions = sorted(p["partition_index"] for p in described[self.topic]["partitions"])
        self._tps = [TopicPartition(self.topic, p) for p in self.partitions]
        self._ensure_record_size()

    def _ensure_record_size(self) -> None:
        """Raise the run's topics' ``max.message.bytes`` to :data:`MAX_EVENT_BYTES` (topics made
        by older engines have the broker's default, about 1 MiB); where the broker does not let
        us, remember the topic's own limit so that a larger event gets a clear error."""
        from kafka.admin import ConfigResource, ConfigResourceType

        for topic in (self.topic, self.dlq_topic):
            try:
                found = self._admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
                entry = found.get("topic", {}).get(topic, {}).get("max.message.bytes", {})
                current = int(entry.get("value") or 0)
            except (KafkaError, ValueError, AttributeError, TypeError) as exc:
                log.warning("could not read %s's max.message.bytes: %s", topic, exc)
                continue
            if current >= MAX_EVENT_BYTES:
                continue
            try:
                self._admin.alter_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": str(MAX_EVENT_BYTES)})],
                    incremental=True,
                )
            except KafkaError as exc:
                log.warning("could not raise %s's max.message.bytes from %d to %d: %s", topic, current, MAX_EVENT_BYTES, exc)
                if topic == self.topic and current > 0:
                    self.max_event_bytes = current

    # -- clients -------------------------------------------------------------------------------

    def _new_consumer(self, **extra: object) -> KafkaConsumer:
        try:
            return KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                bootstrap_timeout_ms=int(self.connect_timeout_s * 1000),
                request_timeout_ms=30000,
                max_poll_records=5000,
                client_id="spade-engine-reader",
                **extra,
            )
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, "connecting a consumer") from None

    def _producer_(self) -> KafkaProducer:
        if self._producer is None:
            opts: dict[str, object] = dict(
                bootstrap_servers=self.bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                batch_size=256 * 1024,
                max_request_size=KAFKA_REQUEST_BYTES,  # one event of MAX_EVENT_BYTES (sizes.py)
                delivery_timeout_ms=120000,
                bootstrap_timeout_ms=int(self.connect_timeout_s * 1000),
                client_id="spade-engine-producer",
            )
            opts.update(self._producer_options)
            try:
                self._producer = KafkaProducer(**opts)
            except KafkaError as exc:
                raise broker_error(self.bootstrap, exc, "connecting the producer") from None
        return self._producer

    # -- writing -------------------------------------------------------------------------------

    @staticmethod
    def headers_for(env: Envelope) -> list[tuple[str, bytes]]:
        """The record headers of an envelope: type, schema version, event id."""
        return [
            (H_TYPE, env.type.encode()),
            (H_VERSION, str(env.schema_version).encode()),
            (H_ID, env.event_id.encode()),
        ]

    def append(self, envelopes: Iterable[Envelope]) -> int:
        items = []
        for env in envelopes:
            self._check_run(env)
            items.append((env, encode_envelope(env)))
        return self._send(items)

    def _check_size(self, env: Envelope, raw: bytes) -> None:
        if len(raw) > self.max_event_bytes:
            raise EventLogError(
                f"event {env.event_id} ({env.type}) is {len(raw):,} bytes, over the {self.max_event_bytes:,} bytes topic "
                f"{self.topic} takes (max.message.bytes); raise it with kafka-configs --alter --entity-type topics "
                f"--entity-name {self.topic} --add-config max.message.bytes={MAX_EVENT_BYTES}"
            )

    def append_raw(self, items: Iterable[tuple[Envelope, bytes]]) -> int:
        """Append envelopes with their already-encoded bytes (import keeps bytes exactly)."""
        checked = []
        for env, raw in items:
            self._check_run(env)
            checked.append((env, bytes(raw)))
        return self._send(checked)

    def _check_run(self, env: Envelope) -> None:
        if env.run_id != self.run_id:
            raise MalformedEvent(f"event {env.event_id} belongs to run {env.run_id!r}, not {self.run_id!r}")

    def _send(self, items: list[tuple[Envelope, bytes]]) -> int:
        if not items:
            return 0
        with self._lock:
            self._refresh_index()
            producer = self._producer_()
            batch: set[str] = set()
            sent = []
            try:
                for env, raw in items:
                    if env.event_id in self._index or env.event_id in batch:
                        continue
                    self._check_size(env, raw)
                    batch.add(env.event_id)
                    fut = producer.send(self.topic, key=env.key.encode(), value=raw, headers=self.headers_for(env))
                    sent.append((env, fut))
                producer.flush()
                acked: dict[int, list[int]] = {}
                for env, fut in sent:
                    md = fut.get(timeout=self.connect_timeout_s + 120)
                    self._index.setdefault(env.event_id, (md.partition, md.offset, env.type))
                    acked.setdefault(md.partition, []).append(md.offset)
            except KafkaError as exc:
                raise broker_error(self.bootstrap, exc, f"appending to {self.topic}") from None
            # our own contiguous writes need not be read back by the next index refresh
            for p, offsets in acked.items():
                pos = self._scanned.get(p)
                if pos is None:
                    continue
                for o in sorted(offsets):
                    if o == pos:
                        pos += 1
                    elif o > pos:
                        break
                self._scanned[p] = pos
            return len(sent)

    # -- the event-id index --------------------------------------------------------------------

    def _end_offsets(self, consumer: KafkaConsumer) -> dict[TopicPartition, int]:
        try:
            return consumer.end_offsets(self._tps)
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, f"reading the end offsets of {self.topic}") from None

    def _refresh_index(self) -> None:
        """Index the records written since the last refresh (headers only, values as fallback)."""
        with self._lock:
            if self._index_consumer is None:
                self._index_consumer = self._new_consumer()
                self._index_consumer.assign(self._tps)
            consumer = self._index_consumer
            end = self._end_offsets(consumer)
            todo = {tp for tp in self._tps if self._scanned.get(tp.partition, 0) < end[tp]}
            if not todo:
                for tp in self._tps:
                    self._scanned.setdefault(tp.partition, end[tp])
                return
            for tp in self._tps:
                if tp in todo:
                    consumer.seek(tp, self._scanned.get(tp.partition, 0))
                    consumer.resume(tp)
                else:
                    consumer.pause(tp)
                    self._scanned.setdefault(tp.partition, end[tp])
            for msg in self._consume_until(consumer, end, todo):
                eid = header(msg.headers, H_ID)
                etype = header(msg.headers, H_TYPE)
                if eid is not None and etype is not None:
                    self._index.setdefault(eid.decode(), (msg.partition, msg.offset, etype.decode()))
                else:
                    try:
                        env = decode_envelope(msg.value)
                    except MalformedEvent:
                        env = None
                    if env is not None and env.run_id == self.run_id:
                        self._index.setdefault(env.event_id, (msg.partition, msg.offset, env.type))
                self._scanned[msg.partition] = msg.offset + 1
            for tp in todo:
                self._scanned[tp.partition] = max(self._scanned.get(tp.partition, 0), end[tp])

    def _consume_until(self, consumer: KafkaConsumer, end: Mapping[TopicPartition, int], todo: set[TopicPartition]):
        """Poll ``consumer`` until every partition in ``todo`` reached its ``end`` offset."""
        todo = set(todo)
        deadline_idle = time.monotonic() + 120
        while todo:
            try:
                batch = consumer.poll(timeout_ms=500)
            except KafkaError as exc:
                raise broker_error(self.bootstrap, exc, f"reading {self.topic}") from None
            if batch:
                deadline_idle = time.monotonic() + 120
            for tp, msgs in batch.items():
                if tp not in todo:
                    continue
                for msg in msgs:
                    if msg.offset >= end[tp]:
                        break
                    yield msg
            for tp in list(todo):
                if consumer.position(tp) >= end[tp]:
                    todo.discard(tp)
                    consumer.pause(tp)
            if todo and time.monotonic() > deadline_idle:
                raise EventLogError(f"Kafka broker at {self.bootstrap}: no progress reading {self.topic} for 120s")

    # -- reading -------------------------------------------------------------------------------

    def _to_record(self, msg, seen: set[str]) -> Record | None:
        raw = msg.value if msg.value is not None else b""
        try:
            env = decode_envelope(raw)
            if env.run_id != self.run_id:
                raise MalformedEvent(f"event {env.event_id} belongs to run {env.run_id!r}, not {self.run_id!r}")
        except MalformedEvent as exc:
            self._dead_letter_record(msg, str(exc))
            return None
        eid = env.event_id
        first = self._index.get(eid)
        if eid in seen or (first is not None and (first[0], first[1]) != (msg.partition, msg.offset)):
            return None  # a duplicate copy of an event already recorded
        seen.add(eid)
        return Record(msg.partition, msg.offset, env, raw)

    def _seek(self, consumer: KafkaConsumer, cursor: Mapping[int, int] | None) -> None:
        consumer.assign(self._tps)
        try:
            begin = consumer.beginning_offsets(self._tps)
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, f"reading {self.topic}") from None
        for tp in self._tps:
            consumer.seek(tp, max(int((cursor or {}).get(tp.partition, 0)), begin[tp]))

    def _reader(self) -> KafkaConsumer:
        """An idle reader consumer (assigned to the run's partitions), or a new one."""
        with self._lock:
            if self._readers:
                return self._readers.pop()
        consumer = self._new_consumer()
        consumer.assign(self._tps)
        return consumer

    def _release(self, consumer: KafkaConsumer, healthy: bool) -> None:
        """Keep a reader for the next :meth:`read` (two at most: reads may nest), else close it."""
        with self._lock:
            if healthy and not self._closed and len(self._readers) < 2:
                self._readers.append(consumer)
                return
        consumer.close()

    def read(self, cursor: Mapping[int, int] | None = None, *, limit: int | None = None) -> Iterator[Record]:
        if limit is not None and limit <= 0:
            return
        consumer = self._reader()
        healthy = False
        try:
            # seek straight to the cursor: an offset below the partition's first one (records
            # deleted) is reset to the earliest by the consumer (auto_offset_reset), so no
            # beginning-offset lookup is needed
            consumer.resume(*self._tps)
            for tp in self._tps:
                consumer.seek(tp, max(0, int((cursor or {}).get(tp.partition, 0))))
            end = self._end_offsets(consumer)
            todo = {tp for tp in self._tps if consumer.position(tp) < end[tp]}
            consumer.pause(*[tp for tp in self._tps if tp not in todo])
            seen: set[str] = set()
            n = 0
            healthy = True  # a reader left by a generator closed early is still fine: the next read seeks
            for msg in self._consume_until(consumer, end, todo):
                rec = self._to_record(msg, seen)
                if rec is None:
                    continue
                yield rec
                n += 1
                if limit is not None and n >= limit:
                    return
        except GeneratorExit:  # the caller stopped early: the reader is fine (the next read seeks)
            raise
        except BaseException:
            healthy = False
            raise
        finally:
            self._release(consumer, healthy)

    def follow(
        self,
        cursor: Mapping[int, int] | None = None,
        *,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        poll_interval: float = 0.05,
    ) -> Iterator[Record]:
        consumer = self._new_consumer()
        try:
            self._seek(consumer, cursor)
            seen: set[str] = set()
            last_seen = time.monotonic()
            timeout_ms = max(10, int(poll_interval * 1000))
            while stop is None or not stop.is_set():
                try:
                    batch = consumer.poll(timeout_ms=timeout_ms)
                except KafkaError as exc:
                    raise broker_error(self.bootstrap, exc, f"following {self.topic}") from None
                if batch:
                    last_seen = time.monotonic()
                for msgs in batch.values():
                    for msg in msgs:
                        rec = self._to_record(msg, seen)
                        if rec is not None:
                            yield rec
                        if stop is not None and stop.is_set():
                            return
                if not batch and idle_timeout is not None and time.monotonic() - last_seen >= idle_timeout:
                    return
        finally:
            consumer.close()

    def end_cursor(self) -> Cursor:
        with self._lock:
            if self._index_consumer is None:
                self._index_consumer = self._new_consumer()
                self._index_consumer.assign(self._tps)
            end = self._end_offsets(self._index_consumer)
        return {tp.partition: int(end[tp]) for tp in self._tps}

    # -- consumer groups -----------------------------------------------------------------------

    def commit(self, group: str, cursor: Mapping[int, int]) -> None:
        offsets = {
            TopicPartition(self.topic, int(p)): OffsetAndMetadata(int(o), "", -1) for p, o in cursor.items()
        }
        if not offsets:
            return
        def attempt() -> dict:
            result = self._admin.alter_group_offsets(group, offsets)
            for err in result.values():
                if getattr(err, "errno", 0) and getattr(err, "retriable", False):
                    raise err()  # e.g. the coordinator is still loading: try again
            return result

        try:
            result = retrying(attempt)
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, f"committing offsets of group {group!r}") from None
        failed = {tp.partition: err.__name__ for tp, err in result.items() if getattr(err, "errno", 0)}
        if failed:
            raise EventLogError(f"committing offsets of group {group!r} on {self.topic} failed: {failed}")

    def committed(self, group: str) -> Cursor:
        try:
            got = retrying(lambda: self._admin.list_group_offsets({group: None})).get(group, {})
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, f"reading offsets of group {group!r}") from None
        return {
            tp.partition: int(om.offset)
            for tp, om in got.items()
            if tp.topic == self.topic and om.offset is not None and om.offset >= 0
        }

    def group_consumer(
        self, group: str, *, session_timeout_s: float = 10.0, client_id: str = "spade-engine-worker", **options: Any
    ) -> "KafkaGroupConsumer":
        """Join consumer group ``group`` on this run's topic: a
        :class:`~spade_engine.events.kafka.group.KafkaGroupConsumer` (partition assignment,
        rebalance, explicit commits); other ``options`` go to its constructor."""
        from .group import KafkaGroupConsumer

        return KafkaGroupConsumer(self, group, session_timeout_s=session_timeout_s, client_id=client_id, **options)

    def reopen_args(self) -> dict[str, str]:
        """What another process needs to open this log (:func:`~spade_engine.events.backends.reopen_log`)."""
        return {"bootstrap": self.bootstrap, "run_id": self.run_id}

    def has_event(self, event_id: str) -> bool:
        """Whether an event with this id is recorded (the id index, brought up to date)."""
        with self._lock:
            if event_id in self._index:
                return True
            self._refresh_index()
            return event_id in self._index

    # -- statistics and dead letters -----------------------------------------------------------

    def count_by_type(self) -> dict[str, int]:
        with self._lock:
            self._refresh_index()
            counts: dict[str, int] = {}
            for _, _, etype in self._index.values():
                counts[etype] = counts.get(etype, 0) + 1
        return dict(sorted(counts.items()))

    def scan_counts(self) -> tuple[dict[str, int], list[tuple[int, int, str]]]:
        """Decode every record now in the topic: ``(distinct events by type, undecodable records
        as (partition, offset, reason))``. Unlike :meth:`count_by_type` (record headers only), a
        record whose value does not decode is not counted under its header's type; each such
        record is also sent to the dead-letter topic (once)."""
        counts: dict[str, int] = {}
        bad: list[tuple[int, int, str]] = []
        consumer = self._new_consumer()
        try:
            self._seek(consumer, None)
            end = self._end_offsets(consumer)
            todo = {tp for tp in self._tps if consumer.position(tp) < end[tp]}
            seen: set[str] = set()
            for msg in self._consume_until(consumer, end, todo):
                raw = msg.value if msg.value is not None else b""
                try:
                    env = decode_envelope(raw)
                    if env.run_id != self.run_id:
                        raise MalformedEvent(f"event {env.event_id} belongs to run {env.run_id!r}, not {self.run_id!r}")
                except MalformedEvent as exc:
                    bad.append((msg.partition, msg.offset, str(exc)))
                    self._dead_letter_record(msg, str(exc))
                    continue
                if env.event_id in seen:
                    continue
                seen.add(env.event_id)
                counts[env.type] = counts.get(env.type, 0) + 1
        finally:
            consumer.close()
        return dict(sorted(counts.items())), bad

    def dead_letter(
        self, raw: bytes, reason: str, *, source: str = "", position: tuple[int, int] | None = None, key: bytes | None = None
    ) -> None:
        headers = [("reason", reason.encode()), ("source", source.encode()), ("received_at", utc_now().encode())]
        if position is not None:
            headers += [
                ("source_topic", self.topic.encode()),
                ("source_partition", str(position[0]).encode()),
                ("source_offset", str(position[1]).encode()),
            ]
        try:
            fut = self._producer_().send(self.dlq_topic, key=key, value=bytes(raw), headers=headers)
            self._producer_().flush()
            fut.get(timeout=self.connect_timeout_s + 120)
        except KafkaError as exc:
            raise broker_error(self.bootstrap, exc, f"writing to {self.dlq_topic}") from None

    def _dead_letter_record(self, msg, reason: str) -> None:
        with self._lock:
            if self._dead_positions is None:
                self._dead_positions = set()
                for m in self._dlq_messages():
                    p, o = header(m.headers, "source_partition"), header(m.headers, "source_offset")
                    if p is not None and o is not None and header(m.headers, "source_topic") == self.topic.encode():
                        try:
                            self._dead_positions.add((int(p), int(o)))
                        except ValueError:  # a foreign record on the dead-letter topic
                            continue
            pos = (msg.partition, msg.offset)
            if pos in self._dead_positions:
                return
            self.dead_letter(
                msg.value or b"", reason, source=f"{self.topic}/{pos[0]}@{pos[1]}", position=pos, key=msg.key
            )
            self._dead_positions.add(pos)

    def _dlq_messages(self):
        consumer = self._new_consumer()
        try:
            tp = TopicPartition(self.dlq_topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            try:
                end = consumer.end_offsets([tp])
            except KafkaError as exc:
                raise broker_error(self.bootstrap, exc, f"reading {self.dlq_topic}") from None
            yield from self._consume_until(consumer, end, {tp} if end[tp] > 0 else set())
        finally:
            consumer.close()

    def dead_letters(self) -> list[DeadLetter]:
        out = []
        for m in self._dlq_messages():
            h = {k: (v or b"").decode(errors="replace") for k, v in (m.headers or [])}
            out.append(DeadLetter(
                reason=h.get("reason", ""), raw=m.value or b"", received_at=h.get("received_at", ""),
                source=h.get("source", ""), key=m.key,
            ))
        return out

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                try:
                    self._producer.close(timeout=30)
                finally:
                    self._producer = None
            if self._index_consumer is not None:
                self._index_consumer.close()
                self._index_consumer = None
            self._closed = True
            readers, self._readers = self._readers, []
            for consumer in readers:
                consumer.close()
            self._admin.close()

    def __enter__(self) -> "KafkaEventLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
