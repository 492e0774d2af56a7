"""Faults on a real broker: SIGKILL and restart under load, and a broker that is not there."""

from __future__ import annotations

import threading
import time

import pytest
from consumer_support import counted, read_snapshot, start_supervisor, wait_until
from factories import env_chain
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.consumers import EmbeddedRunner
from spade_engine.consumers.stats import RunStatsProjection
from spade_engine.devtools.kafka_broker import free_port
from spade_engine.events import EventLogError
from spade_engine.events.kafka.log import KafkaEventLog, list_kafka_runs

pytestmark = pytest.mark.kafka


def _nonempty(cursor: dict) -> dict:
    return {p: o for p, o in cursor.items() if o}


@pytest.mark.slow
def test_sigkill_and_restart_under_load_loses_nothing(kafka_bootstrap, kafka_faults, tmp_path):
    run_id = "run-fault-sigkill"
    writer = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
    acked: list[str] = []
    retried = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            i = 0
            while not stop.is_set():
                batch = env_chain(run_id, f"env-{i:04d}")
                while True:  # the broker may be down: retry the same batch (appends are idempotent)
                    try:
                        writer.append(batch)
                        break
                    except EventLogError:
                        retried.append(i)
                        time.sleep(0.5)
                acked.extend(e.event_id for e in batch)
                i += 1
                time.sleep(0.02)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    # the consumer: the embedded driver following the Kafka log, committing after each flush
    snap = tmp_path / "stats.json"
    reader = KafkaEventLog(kafka_bootstrap, run_id, create=False)
    runner = EmbeddedRunner(reader, [RunStatsProjection(run_id, snap)], flush_interval_s=0.5, retry_backoff_s=0.5)
    stop_consumer = threading.Event()
    consumer = threading.Thread(target=lambda: _guard(errors, runner.run, stop_consumer), daemon=True)
    producer = threading.Thread(target=produce, daemon=True)
    consumer.start()
    producer.start()
    try:
        wait_until(lambda: counted(snap) > 0, 120, "the consumer to apply events")
        wait_until(lambda: len(acked) >= 100, 60, "100 acknowledged events")
        kafka_faults.kill()
        killed_at = len(acked)
        time.sleep(2)
        kafka_faults.restart()
        wait_until(lambda: len(acked) >= killed_at + 100, 180, "100 more acknowledged events after the restart")
        stop.set()
        producer.join(180)
        assert not producer.is_alive() and not errors, errors

        check = KafkaEventLog(kafka_bootstrap, run_id, create=False)
        try:
            in_topic = [r.envelope.event_id for r in check.read()]
            # no acknowledged event is lost, and each event is in the log once
            assert set(acked) <= set(in_topic)
            assert len(in_topic) == len(set(in_topic))
            total = len(in_topic)

            wait_until(lambda: counted(snap) >= total, 120, "the consumer to catch up")
            stop_consumer.set()
            consumer.join(120)
            assert not consumer.is_alive() and not errors, errors
            state = read_snapshot(snap)["state"]
            assert state["counts"] == check.count_by_type()  # every event counted exactly once
            assert sum(state["counts"].values()) == total == len(set(state["event_ids"]))
            # offsets committed after processing, up to the end
            committed = check.committed("projection:stats")
            assert committed == _nonempty(check.end_cursor())
        finally:
            check.close()
    finally:
        stop.set()
        stop_consumer.set()
        consumer.join(60)
        reader.close()
        writer.close()

    # a restarted consumer resumes from the committed offsets: it reads only what is new
    assert {int(p): o for p, o in read_snapshot(snap)["cursor"].items()} == committed
    log = KafkaEventLog(kafka_bootstrap, run_id, create=False)
    try:
        more = env_chain(run_id, "env-after")
        log.append(more)
        proj = RunStatsProjection(run_id, snap)
        assert EmbeddedRunner(log, [proj]).run(idle_timeout=5.0) == len(more)  # generous on a loaded machine
        assert proj.state.total == total + len(more)
        assert log.committed("projection:stats") == _nonempty(log.end_cursor())
    finally:
        log.close()


def _guard(errors: list, fn, *args) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def test_broker_down_at_start_is_a_clear_error_after_a_boundedwait_until():
    dead = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(EventLogError) as exc:
        KafkaEventLog(dead, "run-nobroker", create=True, connect_timeout_s=3)
    assert time.monotonic() - t0 < 30
    assert dead in str(exc.value) and "not reachable" in str(exc.value)
    with pytest.raises(EventLogError):
        list_kafka_runs(dead, connect_timeout_s=2)
    res = CliRunner().invoke(app, ["events", "count", "--backend", "kafka", "--bootstrap", dead])
    assert res.exit_code == 2
    assert "not reachable" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_faust_driver_survives_sigkill_and_restart(kafka_bootstrap, kafka_faults, tmp_path):
    """The faust driver (supervised worker) keeps consuming across a broker crash: every event
    is counted exactly once, and offsets are committed up to the end."""
    import signal
    import subprocess

    from spade_engine.consumers.faust_app import app_id_for

    run_id = "run-fault-faust"
    writer = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=3)
    snap = tmp_path / "runs" / run_id / "projections" / "stats.json"
    err_path = tmp_path / "consumer.err"
    consumer = start_supervisor(kafka_bootstrap, run_id, tmp_path, err_path, "--stall-s", "30")
    acked: list[str] = []
    try:
        def append(batch):
            while True:
                try:
                    writer.append(batch)
                    acked.extend(e.event_id for e in batch)
                    return
                except EventLogError:
                    time.sleep(0.5)

        for i in range(10):
            append(env_chain(run_id, f"env-{i:04d}"))
        wait_until(lambda: counted(snap) > 0, 120, "the faust worker to apply events")
        kafka_faults.kill()
        time.sleep(2)
        kafka_faults.restart()
        for i in range(10, 30):
            append(env_chain(run_id, f"env-{i:04d}"))

        check = KafkaEventLog(kafka_bootstrap, run_id, create=False)
        try:
            in_topic = [r.envelope.event_id for r in check.read()]
            assert set(acked) <= set(in_topic) and len(in_topic) == len(set(in_topic))
            total = len(in_topic)
            # generous: a worker wedged by the broker crash is noticed (--stall-s), killed and
            # replaced, and the replacement must wait for the group to drop the dead member
            wait_until(lambda: counted(snap) >= total, 480, "the faust worker to catch up after the restart")
            state = read_snapshot(snap)["state"]
            assert state["counts"] == check.count_by_type()
            assert sum(state["counts"].values()) == total
            wait_until(lambda: check.committed(app_id_for(run_id)) == _nonempty(check.end_cursor()), 120,
                       "the worker to commit up to the end")
        finally:
            check.close()
    finally:
        writer.close()
        if consumer.poll() is None:
            consumer.send_signal(signal.SIGINT)
        try:
            consumer.wait(timeout=90)
        except subprocess.TimeoutExpired:
            consumer.kill()
            consumer.wait()
        print("consumer stderr tail:", err_path.read_text()[-3000:])
