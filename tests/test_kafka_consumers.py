"""Both consumer drivers end to end on a real Kafka broker: the embedded runner over the Kafka
log, and the faust-streaming app (run as `spade-engine consumers run --driver faust`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spade_engine.consumers import EmbeddedRunner
from spade_engine.consumers.faust_app import app_id_for
from spade_engine.consumers.stats import RunStatsProjection
from spade_engine.events.kafka.log import KafkaEventLog

from factories import env_chain, run_events

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parent.parent


def _nonempty(cursor: dict) -> dict:
    """A cursor without the partitions nothing was read from (never committed)."""
    return {p: o for p, o in cursor.items() if o}


def test_embedded_runner_on_kafka_resumes_from_committed_offsets(kafka_bootstrap, tmp_path, request):
    log = KafkaEventLog(kafka_bootstrap, "run-embedded-kafka", create=True, partitions=3)
    request.addfinalizer(log.close)
    first = run_events("run-embedded-kafka", n_envs=3)
    log.append(first)
    snap = tmp_path / "stats.json"
    runner = EmbeddedRunner(log, [RunStatsProjection("run-embedded-kafka", snap)])
    assert runner.catch_up() == len(first)
    committed = log.committed("projection:stats")
    assert committed == _nonempty(log.end_cursor()) and sum(committed.values()) == len(first)

    more = env_chain("run-embedded-kafka", "env-late") + env_chain("run-embedded-kafka", "env-later")
    log.append(more)
    proj = RunStatsProjection("run-embedded-kafka", snap)  # restarted consumer
    assert proj.position() == committed
    assert EmbeddedRunner(log, [proj]).run(idle_timeout=5.0) == len(more)  # generous on a loaded machine
    assert proj.state.total == len(first) + len(more)
    assert proj.state.counts["EnvironmentProposed"] == 5
    assert log.committed("projection:stats") == _nonempty(log.end_cursor()) == proj.position()


def _run_faust(bootstrap: str, run_id: str, data_dir: Path) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "spade_engine.cli", "consumers", "run", run_id, "--backend", "kafka",
         "--bootstrap", bootstrap, "--data-dir", str(data_dir), "--until-idle", "3"],
        capture_output=True, text=True, timeout=180, env=env, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    applied = re.search(r"applied (\d+) records of \S+ \(faust driver\)", proc.stderr)
    assert applied, proc.stderr
    summary = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert summary, proc.stdout
    return int(applied.group(1)), json.loads(summary[-1])


def test_faust_driver_projects_commits_and_resumes(kafka_bootstrap, tmp_path, request):
    run_id = "run-faust-e2e"
    log = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
    request.addfinalizer(log.close)
    first = run_events(run_id, n_envs=4)
    log.append(first)
    producer = log._producer_()
    producer.send(log.topic, key=b"env-0000", value=b"{not an envelope").get(timeout=30)

    applied, stats = _run_faust(kafka_bootstrap, run_id, tmp_path)
    assert applied == len(first)
    assert stats["total"] == len(first)
    assert stats["counts"]["RolloutCompleted"] == 16
    assert stats["first_at"] == min(e.occurred_at for e in first)
    # offsets committed after processing, the garbage record included (it went to the DLQ)
    assert log.committed(app_id_for(run_id)) == _nonempty(log.end_cursor())
    letters = log.dead_letters()
    assert [d.raw for d in letters] == [b"{not an envelope"]
    assert "JSON" in letters[0].reason

    more = env_chain(run_id, "env-late")
    log.append(more)
    applied, stats = _run_faust(kafka_bootstrap, run_id, tmp_path)
    assert applied == len(more)  # resumed from the committed offsets, not from the start
    assert stats["total"] == len(first) + len(more)
    assert len(log.dead_letters()) == 1
