"""Pytest fixtures for a real Apache Kafka broker (see spade_engine/devtools/kafka_broker.py).

* ``kafka_broker`` (session): one single-node KRaft broker on free 127.0.0.1 ports for the whole
  test session, started on first use (jars fetched once into the jar cache,
  ``kafka_broker.default_cache_dir()``: ``$SPADE_KAFKA_CACHE`` or ``~/.cache/spade-engine/kafka``), stopped at the end;
* ``kafka_bootstrap``: its ``HOST:PORT``;
* ``kafka_faults`` (function): ``kill()`` (SIGKILL) and ``restart()`` the session broker for
  fault tests; it makes sure the broker serves again when the test ends.

Import them into a ``conftest.py`` (``from kafka_broker_fixture import *``) to use them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spade_engine.devtools.kafka_broker import KafkaBroker

__all__ = ["kafka_broker", "kafka_bootstrap", "kafka_faults", "BrokerFaults"]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), heap="512m")
    broker.start(timeout=180)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    if not kafka_broker.running:  # a previous fault test left it down
        kafka_broker.restart()
    return kafka_broker.bootstrap


class BrokerFaults:
    """Crash and restart the session broker (same ports, same data)."""

    def __init__(self, broker: KafkaBroker):
        self.broker = broker

    def kill(self) -> None:
        """SIGKILL the broker process."""
        self.broker.kill()

    def restart(self, timeout: float = 180) -> None:
        """Start it again and wait until it serves."""
        self.broker.restart(timeout=timeout)


@pytest.fixture
def kafka_faults(kafka_broker: KafkaBroker) -> Iterator[BrokerFaults]:
    faults = BrokerFaults(kafka_broker)
    try:
        yield faults
    finally:
        if not kafka_broker.running:
            kafka_broker.restart()
