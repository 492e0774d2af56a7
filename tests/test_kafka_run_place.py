"""A Kafka run as a user drives it: after `start --backend kafka --bootstrap B` the run's data
directory remembers where its log lives, so the `next:` commands printed at the end work as
printed; the environment (`SPADE_LOG__BACKEND`, `SPADE_KAFKA_BOOTSTRAP`) selects Kafka as the
docs say; `events tail` shows the newest events of the run across partitions. Real broker."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from factories import run_events
from spade_engine.cli import app
from spade_engine.events.datadir import PLACE_FILENAME, DataDir, RunLogPlace
from spade_engine.events.kafka.log import KafkaEventLog
from spade_engine.events.store import locate_run

pytestmark = pytest.mark.kafka

#: no backend chosen by the environment this test runs in
CLEAN = {"SPADE_LOG__BACKEND": None, "SPADE_KAFKA_BOOTSTRAP": None, "SPADE_LOG__BOOTSTRAP": None, "SPADE_DATA": None,
         "COLUMNS": "200"}


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env={**CLEAN, **(env or {})})


@pytest.mark.sandbox
def test_the_next_commands_of_a_kafka_run_work_as_printed(tmp_path, kafka_bootstrap):
    data = tmp_path / "data"
    res = _cli("start", "--new", "--backend", "kafka", "--bootstrap", kafka_bootstrap, "--max-envs", "2", "--plays", "1",
               "-d", str(data), "--no-progress")
    assert res.exit_code == 0, res.output
    run_id = next(line.split()[3] for line in res.output.splitlines() if line.startswith("starting new run"))
    place = json.loads((DataDir(data).run_dir(run_id) / PLACE_FILENAME).read_text())
    assert place == {"backend": "kafka", "bootstrap": kafka_bootstrap}
    nexts = [line.split(":", 1)[1].split("   (")[0].strip() for line in res.output.splitlines()
             if line.startswith("  ") and "spade-engine " in line]
    assert any(" status " in n for n in nexts) and all("--backend" not in n and "--bootstrap" not in n for n in nexts)
    for command in nexts:
        argv = shlex.split(command)[1:]
        if argv[0] in ("dashboard", "start"):  # a server / more work: resolved like the others below
            continue
        if argv[0] == "audit":
            argv += ["--out", str(tmp_path / "audit")]
        done = _cli(*argv)
        assert done.exit_code == 0, (command, done.output)
    status = json.loads(_cli("status", "-d", str(data), "--json").stdout)
    assert status["run_id"] == run_id and status["roots"] == 2 and status["stopped"] == "max_envs"
    where = locate_run(None, data_dir=data)
    assert (where.run_id, where.backend, where.bootstrap) == (run_id, "kafka", kafka_bootstrap)
    # resuming with no flags finds the run where it lives, and goes on on Kafka
    more = _cli("start", "--run", run_id, "--max-envs", "3", "--plays", "1", "-d", str(data), "--no-progress")
    assert more.exit_code == 0, more.output
    assert json.loads(_cli("status", run_id, "-d", str(data), "--json").stdout)["roots"] == 3
    # an explicit choice still wins: the sqlite backend has no such run
    wrong = _cli("status", run_id, "-d", str(data), "--backend", "sqlite")
    assert wrong.exit_code == 2 and "no run" in wrong.output


def test_the_environment_selects_kafka(tmp_path, kafka_bootstrap):
    run_id = "run-20260502-000000-kenv01"
    source = tmp_path / "run.jsonl"
    source.write_bytes(b"".join(e.to_json() + b"\n" for e in run_events(run_id, n_envs=2)))
    # SPADE_LOG__BACKEND + SPADE_KAFKA_BOOTSTRAP: an import goes to Kafka, and is remembered
    first = tmp_path / "first"
    env = {"SPADE_LOG__BACKEND": "kafka", "SPADE_KAFKA_BOOTSTRAP": kafka_bootstrap}
    res = _cli("events", "import", str(source), "-d", str(first), env=env)
    assert res.exit_code == 0, res.output
    log = KafkaEventLog(kafka_bootstrap, run_id, create=False)
    try:
        assert sum(log.count_by_type().values()) == len(run_events(run_id, n_envs=2))
    finally:
        log.close()
    assert DataDir(first).place(run_id) == RunLogPlace("kafka", kafka_bootstrap)
    assert not DataDir(first).log_path(run_id).exists(), "nothing went to an embedded log"
    # SPADE_KAFKA_BOOTSTRAP alone, in a data directory that does not know the run: Kafka is asked
    other = tmp_path / "other"
    res = _cli("events", "count", run_id, "--json", "-d", str(other), env={"SPADE_KAFKA_BOOTSTRAP": kafka_bootstrap})
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["total"] == len(run_events(run_id, n_envs=2))
    # SPADE_LOG__BOOTSTRAP too (the documented SPADE_<SECTION>__<KEY> form)
    res = _cli("events", "count", run_id, "--json", "-d", str(other), env={"SPADE_LOG__BOOTSTRAP": kafka_bootstrap})
    assert res.exit_code == 0, res.output
    # and `config show` says where the values came from
    shown = json.loads(_cli("config", "show", "--json", env={"SPADE_LOG__BACKEND": "kafka",
                                                              "SPADE_KAFKA_BOOTSTRAP": kafka_bootstrap}).stdout)
    assert shown["log.backend"] == {"value": "kafka", "source": "env SPADE_LOG__BACKEND"}
    assert shown["log.bootstrap"]["value"] == kafka_bootstrap
    # an unknown backend in the environment is a clear error
    bad = _cli("status", "-d", str(first), env={"SPADE_LOG__BACKEND": "kafak"})
    assert bad.exit_code == 2 and "unknown backend 'kafak'" in bad.output


def test_events_tail_shows_the_newest_events_of_the_run(tmp_path, kafka_bootstrap):
    run_id = "run-20260503-000000-ktail1"
    events = run_events(run_id, n_envs=6)  # env chains keyed by environment: spread over partitions
    log = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
    try:
        log.append(events)
        used = {r.partition for r in log.read()}
    finally:
        log.close()
    assert len(used) > 1, "the run's events lie on several partitions"
    res = _cli("events", "tail", run_id, "-n", "4", "--json", "--backend", "kafka", "--bootstrap", kafka_bootstrap)
    assert res.exit_code == 0, res.output
    shown = [json.loads(line)["event_id"] for line in res.stdout.splitlines()]
    assert shown == [e.event_id for e in events[-4:]], "the last four events of the run, in order"
    assert json.loads(res.stdout.splitlines()[-1])["type"] == "RunStopped"
