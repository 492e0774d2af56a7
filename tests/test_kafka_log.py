"""The Kafka event log against a real broker: the shared contract suite plus Kafka specifics."""

from __future__ import annotations

import pytest

from spade_engine.events import EventLogError, RunNotFound
from spade_engine.events.kafka.log import KafkaEventLog, list_kafka_runs

from eventlog_contract import EventLogContract
from factories import run_events

pytestmark = pytest.mark.kafka


@pytest.fixture
def make_log(kafka_bootstrap):
    logs = []

    def factory(run_id):
        log = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
        logs.append(log)
        return log

    yield factory
    for log in logs:
        log.close()


@pytest.fixture
def reopen():
    return lambda log: KafkaEventLog(log.bootstrap, log.run_id, create=False)


class TestKafkaContract(EventLogContract):
    pass


def test_missing_run_is_not_created_by_readers(kafka_bootstrap):
    with pytest.raises(RunNotFound):
        KafkaEventLog(kafka_bootstrap, "run-never-written", create=False)
    assert "run-never-written" not in list_kafka_runs(kafka_bootstrap)


def test_runs_are_listed_from_topic_names_sorted(kafka_bootstrap):
    for run_id in ("run-20260105-000000-bbbbbb", "run-20260104-000000-aaaaaa"):
        KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=1).close()
    runs = list_kafka_runs(kafka_bootstrap)
    assert runs == sorted(runs)
    assert {"run-20260104-000000-aaaaaa", "run-20260105-000000-bbbbbb"} <= set(runs)
    assert not [r for r in runs if r.endswith(".dlq")]


def test_reopened_log_skips_events_another_writer_recorded(kafka_bootstrap):
    run_id = "run-kafka-two-writers"
    events = run_events(run_id, n_envs=1)
    a = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=2)
    b = KafkaEventLog(kafka_bootstrap, run_id, create=False)
    try:
        assert a.append(events[:5]) == 5
        assert b.append(events) == len(events) - 5  # b indexes what a wrote before appending
        assert a.append(events) == 0
        assert sorted(r.envelope.event_id for r in a.read()) == sorted(e.event_id for e in events)
    finally:
        a.close()
        b.close()


def test_invalid_run_id_is_refused(kafka_bootstrap):
    with pytest.raises(RunNotFound):
        KafkaEventLog(kafka_bootstrap, "bad/run id", create=True)


def test_unreachable_broker_error_names_it():
    from spade_engine.devtools.kafka_broker import free_port

    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(EventLogError, match=dead):
        KafkaEventLog(dead, "run-x", create=True, connect_timeout_s=1)


def test_reads_reuse_their_consumers(kafka_bootstrap, monkeypatch):
    """The engine appends an event and reads the log from its cursor, once per event: the reads
    reuse idle reader consumers instead of connecting a new one each time (a new consumer costs a
    connection, metadata and offset lookups, about 0.1 s; one per read made Kafka runs crawl)."""
    import spade_engine.events.kafka.log as kafka_log

    created = []

    class CountingConsumer(kafka_log.KafkaConsumer):  # the real kafka-python consumer, counted
        def __init__(self, *args, **kwargs):
            created.append(kwargs.get("client_id"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(kafka_log, "KafkaConsumer", CountingConsumer)
    run_id = "run-kafka-reader-reuse"
    events = run_events(run_id, n_envs=7)
    assert len(events) > 50
    log = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
    try:
        log.append(events[:3])
        cursor: dict[int, int] = {}
        seen = []
        for r in log.read(cursor):
            cursor[r.partition] = r.offset + 1
            seen.append(r.envelope.event_id)
        before = len(created)
        for e in events[3:53]:  # 50 rounds of the engine's pattern: append one event, read from the cursor
            log.append([e])
            new = list(log.read(cursor))
            assert [r.envelope.event_id for r in new] == [e.event_id]
            for r in new:
                cursor[r.partition] = r.offset + 1
            seen.append(new[0].envelope.event_id)
        made = len(created) - before
    finally:
        log.close()
    assert sorted(seen) == sorted(e.event_id for e in events[:53])
    assert made <= 2, f"{made} consumers created over 50 reads: readers are not reused"
