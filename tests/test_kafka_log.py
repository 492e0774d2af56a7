"""The Kafka event log against a real broker: the shared contract suite plus Kafka specifics."""

from __future__ import annotations

import pytest

from spade_engine.events import EventLogError, RunNotFound
from spade_engine.events.kafka_log import KafkaEventLog, list_kafka_runs

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
