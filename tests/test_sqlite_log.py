"""The embedded SQLite event log: the shared contract suite plus SQLite-specific behaviour."""

from __future__ import annotations

import multiprocessing as mp
import re
import sqlite3
import time

import pytest

from spade_engine.events import EventLogError, SqliteEventLog
from spade_engine.events.sqlite.log import LOG_FILENAME
from spade_engine.events.store import DataDir, new_run_id, open_event_log

from eventlog_contract import EventLogContract
from factories import env_chain, run_events


@pytest.fixture
def make_log(tmp_path):
    logs = []

    def factory(run_id):
        log = SqliteEventLog(tmp_path / run_id / "events.sqlite", run_id)
        logs.append(log)
        return log

    yield factory
    for log in logs:
        log.close()


@pytest.fixture
def reopen():
    return lambda log: SqliteEventLog(log.path, log.run_id, create=False)


class TestSqliteContract(EventLogContract):
    pass


def _writer(path: str, run_id: str, start: int) -> None:
    log = SqliteEventLog(path, run_id, create=False)
    for i in range(start, start + 10):
        log.append(env_chain(run_id, f"env-{i}"))
    log.close()


def test_several_processes_append_safely(tmp_path):
    path = tmp_path / "r" / "events.sqlite"
    SqliteEventLog(path, "r").close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), "r", k * 10)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    log = SqliteEventLog(path, "r", create=False)
    counts = log.count_by_type()
    assert counts["EnvironmentProposed"] == 30
    assert len({r.envelope.event_id for r in log.read()}) == sum(counts.values())


def test_corrupt_file_gives_clear_error(tmp_path):
    path = tmp_path / "bad" / "events.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EventLogError) as exc:
        SqliteEventLog(path, "bad", create=False)
    assert str(path) in str(exc.value)
    assert "corrupt" in str(exc.value)


def test_locked_database_gives_clear_error(tmp_path):
    log = SqliteEventLog(tmp_path / "l" / "events.sqlite", "l")
    blocker = sqlite3.connect(log.path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(EventLogError) as exc:
            other = SqliteEventLog(log.path, "l", create=False, busy_timeout_s=0.2)
            other.append(run_events("l", n_envs=1))
        assert "locked" in str(exc.value) and str(log.path) in str(exc.value)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    # nothing was lost, and the log works once the lock is gone
    log.append(run_events("l", n_envs=1))
    assert sum(log.count_by_type().values()) == len(run_events("l", n_envs=1))


def test_log_of_another_run_is_refused(tmp_path):
    SqliteEventLog(tmp_path / "x.sqlite", "run-a").close()
    with pytest.raises(EventLogError, match="run-a"):
        SqliteEventLog(tmp_path / "x.sqlite", "run-b")


def test_data_dir_latest_run_and_prefix(tmp_path):
    dd = DataDir(tmp_path)
    for rid in ("run-20260101-000000-aaaaaa", "run-20260102-000000-bbbbbb"):
        open_event_log(rid, data_dir=tmp_path, create=True).close()
    assert dd.latest_run() == "run-20260102-000000-bbbbbb"
    assert dd.resolve("run-20260101") == "run-20260101-000000-aaaaaa"


def test_a_data_dir_given_as_a_string_opens_the_same_log(tmp_path):
    """A script passing ``data_dir="..."`` reads the run (it once failed with a TypeError inside)."""
    rid = "run-20260101-000000-aaaaaa"
    events = run_events(rid, n_envs=1)
    log = open_event_log(rid, data_dir=tmp_path, create=True)
    log.append(events)
    log.close()
    assert DataDir(str(tmp_path)) == DataDir(tmp_path) and DataDir(str(tmp_path)).latest_run() == rid  # type: ignore[arg-type]
    again = open_event_log(rid, data_dir=str(tmp_path), read_only=True)  # type: ignore[arg-type]
    try:
        assert [r.envelope.event_id for r in again.read()] == [e.event_id for e in events]
    finally:
        again.close()


def test_run_ids_started_within_one_second_sort_in_the_order_they_were_made(tmp_path):
    """The latest run is the last one made, also when several start in the same second (their
    random suffix alone once decided, so `status` after two quick `start --new` named either)."""
    ids = []
    for _ in range(40):
        ids.append(new_run_id())
        time.sleep(0.001)  # > 1/4096 s: the fraction part moves on
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)
    data = DataDir(tmp_path)
    for run_id in ids:
        data.run_dir(run_id).mkdir(parents=True)
        (data.run_dir(run_id) / LOG_FILENAME).write_bytes(b"")  # runs() lists a run by its log file
    assert data.latest_run() == ids[-1]
