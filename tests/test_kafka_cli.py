"""`events count` and `events dead-letters` on a Kafka topic holding records that do not decode
(written by another client): counted apart and said so, listed from the dead-letter topic with
their original record key, as a table or JSON lines."""

from __future__ import annotations

import base64
import json

import pytest
from kafka import KafkaProducer
from typer.testing import CliRunner

from factories import run_events
from spade_engine.cli import app
from spade_engine.events.kafka.log import KafkaEventLog

pytestmark = pytest.mark.kafka


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_undecodable_records_are_reported_and_listed_with_their_keys(kafka_bootstrap):
    run_id = "run-20260501-000000-kcli01"
    events = run_events(run_id, n_envs=2)
    log = KafkaEventLog(kafka_bootstrap, run_id, create=True)
    log.append(events)
    log.close()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    # garbage without headers, garbage whose headers claim a type, bytes that are not UTF-8
    producer.send(f"spade.{run_id}", key=b"env-x", value=b"garbage [/bold]\x1b[31m")
    producer.send(f"spade.{run_id}", key=b"env-y", value=b"{not json",
                  headers=[("event_type", b"RolloutCompleted"), ("event_id", b"fake-1")])
    producer.send(f"spade.{run_id}", key=b"\xff\xfe", value=b"\xff\x00\x01")
    producer.flush()
    producer.close()
    kafka = ["--backend", "kafka", "--bootstrap", kafka_bootstrap]

    res = _cli("events", "count", run_id, *kafka)
    assert res.exit_code == 0, res.output
    rows = dict(line.split("\t") for line in res.stdout.splitlines()[1:])
    assert rows["RolloutCompleted"] == "8" and rows["total"] == str(len(events))  # the fake one is not counted
    assert "warning: 3 record(s) of run" in res.stderr and "do not decode and are not counted" in res.stderr
    doc = json.loads(_cli("events", "count", run_id, *kafka, "--json").stdout)
    assert doc["undecodable"] == 3 and doc["total"] == len(events)

    res = _cli("events", "dead-letters", run_id, *kafka, "--json")
    assert res.exit_code == 0, res.output
    letters = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(letters) == 3  # each once, however often the topic was scanned
    by_key = {d.get("key") or d.get("key_base64"): d for d in letters}
    assert by_key["env-x"]["raw"] == "garbage [/bold]\x1b[31m" and "\x1b" not in res.stdout
    assert by_key["env-y"]["raw"] == "{not json" and "not valid JSON" in by_key["env-y"]["reason"]
    binary = by_key[base64.b64encode(b"\xff\xfe").decode()]
    assert base64.b64decode(binary["raw_base64"]) == b"\xff\x00\x01"
    assert all(d["source"].startswith(f"spade.{run_id}/") for d in letters)

    res = _cli("events", "dead-letters", run_id, *kafka)
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0] == ["received_at", "source", "key", "reason", "raw"] and len(rows) == 4
    assert "\x1b" not in res.stdout and "3 dead letter(s)" in res.stderr
