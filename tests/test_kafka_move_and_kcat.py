"""A run moves SQLite -> Kafka -> SQLite with identical payloads, and a real third-party client
(kcat) reads what we write and writes what we read."""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.consumers import EmbeddedRunner
from spade_engine.consumers.stats import RunStatsProjection
from spade_engine.events import SqliteEventLog, decode_envelope, encode_envelope, make_envelope
from spade_engine.events.catalogue import RunStopped
from spade_engine.events.kafka.log import KafkaEventLog, list_kafka_runs

from factories import run_events

pytestmark = pytest.mark.kafka


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _by_key(lines: list[bytes]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        env = decode_envelope(line)
        out[env.key].append(env.event_id)
    return dict(out)


def test_run_moves_sqlite_to_kafka_to_sqlite_unchanged(kafka_bootstrap, tmp_path):
    run_id = "run-20260102-030405-move01"
    src, dst = tmp_path / "src", tmp_path / "dst"
    log = SqliteEventLog(src / "runs" / run_id / "events.sqlite", run_id)
    log.append(run_events(run_id, n_envs=4))
    log.close()
    cli = CliRunner()
    kafka = ["--backend", "kafka", "--bootstrap", kafka_bootstrap]

    def ok(*args: str) -> str:
        res = cli.invoke(app, list(args))
        assert res.exit_code == 0, res.output
        return res.output

    ok("events", "export", run_id, "--data-dir", str(src), "-o", str(tmp_path / "a.jsonl"))
    out = ok("events", "import", str(tmp_path / "a.jsonl"), *kafka)
    assert "34 new events" in out
    assert "0 new events (34 already present)" in ok("events", "import", str(tmp_path / "a.jsonl"), *kafka)
    assert run_id in list_kafka_runs(kafka_bootstrap)
    ok("events", "export", run_id, *kafka, "-o", str(tmp_path / "b.jsonl"))  # RUN given
    ok("events", "export", "run-20260102-030405", *kafka, "-o", str(tmp_path / "b2.jsonl"))  # a unique prefix
    ok("events", "import", str(tmp_path / "b.jsonl"), "--data-dir", str(dst))
    ok("events", "export", run_id, "--data-dir", str(dst), "-o", str(tmp_path / "c.jsonl"))

    a, b, c = (_lines(tmp_path / f"{n}.jsonl") for n in "abc")
    assert len(a) == 34
    # the same bytes for every event; Kafka interleaves partitions, so compare as multisets...
    assert sorted(a) == sorted(b) == sorted(c)
    assert sorted(_lines(tmp_path / "b2.jsonl")) == sorted(a)
    # ... and each environment's events keep their order everywhere
    assert _by_key(a) == _by_key(b) == _by_key(c)
    counts = ok("events", "count", run_id, *kafka, "--json")
    assert "\"total\": 34" in counts


def _kcat(*args: str, data: bytes | None = None) -> bytes:
    proc = subprocess.run(["kcat", *args], input=data, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def test_kcat_reads_our_records_and_we_read_kcats(kafka_bootstrap, tmp_path):
    run_id = "run-kcat"
    log = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
    try:
        events = run_events(run_id, n_envs=2)
        log.append(events)
        by_id = {e.event_id: e for e in events}

        out = _kcat("-b", kafka_bootstrap, "-C", "-t", log.topic, "-o", "beginning", "-e", "-q",
                    "-f", "%p\t%k\t%h\t%s\n")
        rows = [line.split(b"\t", 3) for line in out.splitlines()]
        assert len(rows) == len(events)
        partition_of_key: dict[bytes, bytes] = {}
        for part, key, headers, value in rows:
            env = decode_envelope(value)
            assert value == encode_envelope(by_id[env.event_id])  # canonical JSON, unchanged
            assert key == env.key.encode()
            assert partition_of_key.setdefault(key, part) == part  # one key, one partition
            h = dict(kv.split(b"=", 1) for kv in headers.split(b","))
            assert h == {
                b"event_type": env.type.encode(),
                b"schema_version": str(env.schema_version).encode(),
                b"event_id": env.event_id.encode(),
            }

        # kcat writes a valid envelope (no headers at all) and a garbage record
        extra = make_envelope(RunStopped(reason="interrupted", detail="by kcat"), run_id=run_id, producer="kcat")
        _kcat("-b", kafka_bootstrap, "-P", "-t", log.topic, "-k", run_id, data=extra.to_json() + b"\n")
        _kcat("-b", kafka_bootstrap, "-P", "-t", log.topic, "-k", "junk", data=b"this is not json\n")

        stats = RunStatsProjection(run_id, tmp_path / "stats.json")
        assert EmbeddedRunner(log, [stats]).catch_up() == len(events) + 1
        assert stats.state.counts["RunStopped"] == 2
        assert extra.event_id in stats.state.event_ids
        assert log.count_by_type()["RunStopped"] == 2

        letters = log.dead_letters()
        assert [d.raw for d in letters] == [b"this is not json"]
        dlq = _kcat("-b", kafka_bootstrap, "-C", "-t", log.dlq_topic, "-o", "beginning", "-e", "-q", "-f", "%h\t%s\n")
        headers, value = dlq.splitlines()[0].split(b"\t", 1)
        assert value == b"this is not json"
        assert b"reason=not valid JSON" in headers and f"source_topic={log.topic}".encode() in headers
        # reading again does not dead-letter the same record twice
        assert len(list(log.read())) == len(events) + 1
        assert len(log.dead_letters()) == 1
    finally:
        log.close()


def test_topics_have_partitions_and_unlimited_retention(kafka_bootstrap):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    log = KafkaEventLog(kafka_bootstrap, "run-topic-config", create=True, partitions=4)
    log.close()
    assert log.partitions == [0, 1, 2, 3]
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, log.topic)])
        configs = res["topic"][log.topic]
        assert configs["retention.ms"]["value"] == "-1"
        assert configs["retention.bytes"]["value"] == "-1"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"  # set by us
    finally:
        admin.close()
