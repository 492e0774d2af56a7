"""Shared pytest configuration: tests import helpers from this folder, run offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


# -- real PostgreSQL for tests marked `postgres` (server control: scripts/pg_server.py) ----------
import uuid  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server():
    """A private PostgreSQL cluster for the test session, stopped and deleted afterwards."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from pg_server import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """URL of a fresh, empty database on the session's PostgreSQL server."""
    return postgres_server.create_database("t_" + uuid.uuid4().hex[:12])
# a real Kafka broker for tests marked `kafka` (started on first use, once per session)
from kafka_broker_fixture import kafka_bootstrap, kafka_broker, kafka_faults  # noqa: E402,F401
