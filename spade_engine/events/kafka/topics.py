"""Kafka naming and client helpers shared by the log and the group consumer: the topic of a run,
its dead-letter topic, record header names, the admin client, and error wrapping."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from ..errors import EventLogError, RunNotFound
from ..sizes import MAX_EVENT_BYTES

__all__ = [
    "TOPIC_PREFIX", "DLQ_SUFFIX", "H_TYPE", "H_VERSION", "H_ID", "topic_for", "dlq_topic_for", "broker_error",
    "admin_client", "list_kafka_runs", "retrying", "header",
]

TOPIC_PREFIX = "spade."
DLQ_SUFFIX = ".dlq"
_RUN_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,200}$")
H_TYPE, H_VERSION, H_ID = "event_type", "schema_version", "event_id"
#: every topic of a run: kept for ever, and records up to MAX_EVENT_BYTES (the broker's default,
#: message.max.bytes of about 1 MiB, stopped a run at its first large play)
_TOPIC_CONFIG = {"retention.ms": "-1", "retention.bytes": "-1", "max.message.bytes": str(MAX_EVENT_BYTES)}


def topic_for(run_id: str) -> str:
    """The topic holding ``run_id``'s events."""
    if not _RUN_ID.match(run_id) or run_id.endswith(DLQ_SUFFIX):
        raise RunNotFound(f"invalid run id {run_id!r} for Kafka (letters, digits, . _ - only)")
    return TOPIC_PREFIX + run_id


def dlq_topic_for(run_id: str) -> str:
    """The dead-letter topic of ``run_id``."""
    return topic_for(run_id) + DLQ_SUFFIX


def broker_error(bootstrap: str, exc: BaseException, what: str = "") -> EventLogError:
    doing = f" while {what}" if what else ""
    return EventLogError(f"Kafka broker at {bootstrap} failed{doing}: {type(exc).__name__}: {exc}")


def admin_client(bootstrap: str, connect_timeout_s: float) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(
            bootstrap_servers=bootstrap,
            bootstrap_timeout_ms=int(connect_timeout_s * 1000),
            request_timeout_ms=30000,
            client_id="spade-engine-admin",
        )
    except KafkaError as exc:
        raise EventLogError(
            f"Kafka broker at {bootstrap} is not reachable (waited {connect_timeout_s:g}s): {exc}; "
            "start one with `python3 scripts/kafka_broker.py start`"
        ) from None


def list_kafka_runs(bootstrap: str, *, connect_timeout_s: float = 10.0) -> list[str]:
    """Run ids with a topic on the broker, sorted (run ids sort by creation time)."""
    if not bootstrap:
        raise EventLogError("the kafka backend needs --bootstrap HOST:PORT (or SPADE_KAFKA_BOOTSTRAP)")
    admin = admin_client(bootstrap, connect_timeout_s)
    try:
        topics = admin.list_topics()
    except KafkaError as exc:
        raise broker_error(bootstrap, exc, "listing topics") from None
    finally:
        admin.close()
    runs = []
    for t in topics:
        if t.startswith(TOPIC_PREFIX) and not t.endswith(DLQ_SUFFIX):
            run_id = t[len(TOPIC_PREFIX):]
            if _RUN_ID.match(run_id):
                runs.append(run_id)
    return sorted(runs)


def retrying(fn, *, timeout_s: float = 30.0):
    """Call ``fn`` until it succeeds, retrying Kafka's retriable errors (coordinator loading...)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return fn()
        except KafkaError as exc:
            if not getattr(exc, "retriable", False) or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def header(headers: Iterable[tuple[str, bytes]] | None, name: str) -> bytes | None:
    for k, v in headers or ():
        if k == name:
            return v
    return None
