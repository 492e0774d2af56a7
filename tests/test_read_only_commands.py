"""Commands that only read a run never write to its event log.

``status``, ``events tail/count/export/dead-letters``, ``audit``, ``compare``, ``config show
--run``, ``archive`` queries and ``replay --verify`` open the embedded log read-only
(:class:`~spade_engine.events.sqlite.log.SqliteEventLog` with ``read_only=True``): a SQLite
``mode=ro`` connection, no schema step, no journal-mode change. Checked here on the bytes and
modification times of the run's files:

* a finished run (its log closed by ``start``: no ``-wal``/``-shm`` files) is left exactly as it
  was, and no ``-wal``/``-shm`` file appears;
* a log whose last writer died before checkpointing (part of its events only in the ``-wal``
  file) is read whole, and neither file is changed (a read-write connection checkpointed the WAL
  into the main file when it closed, and deleted it);
* a log with tables missing is a clear error and is not repaired;
* the writers (``start`` resuming a run, ``events import``) still write.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factories import run_events
from spade_engine.cli import app
from spade_engine.events.errors import EventLogError
from spade_engine.events.jsonl import export_jsonl
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import DataDir, open_event_log

RUN = "run-20260601-000000-rdonly"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "SPADE_LOG__BACKEND": None,
                                                     "SPADE_KAFKA_BOOTSTRAP": None})


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: (sha256, mtime in ns)."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _read_commands(run_id: str, out: Path) -> list[list[str]]:
    return [
        ["status", run_id], ["status", "--json"], ["events", "tail", run_id], ["events", "tail", "--json", "-n", "3"],
        ["events", "count", run_id], ["events", "export", run_id, "-o", str(out / "export.jsonl")],
        ["events", "dead-letters", run_id], ["audit", run_id, "--out", str(out / "audit")],
        ["config", "show", "--run", run_id],
    ]


def _write_log(path: Path, events) -> None:
    log = SqliteEventLog(path, RUN)
    try:
        log.append(events)
    finally:
        log.close()


def _log_left_by_a_killed_writer(data: Path, events, tmp_path: Path) -> Path:
    """A run directory whose log holds the first events in its main file and the rest only in its
    ``-wal`` file, as a writer killed before it checkpointed leaves it (copied while it was open)."""
    source = tmp_path / "writer"
    path = source / "events.sqlite"
    half = len(events) // 2
    _write_log(path, events[:half])  # closed: checkpointed into the main file
    log = SqliteEventLog(path, RUN, create=False)
    try:
        log.append(events[half:])
        run_dir = DataDir(data).run_dir(RUN)
        run_dir.mkdir(parents=True)
        for f in source.glob("events.sqlite*"):
            shutil.copy2(f, run_dir / f.name)
    finally:
        log.close()
    assert (run_dir / "events.sqlite-wal").stat().st_size > 0
    return run_dir / "events.sqlite"


# -- a finished run --------------------------------------------------------------------------------


@pytest.mark.sandbox
def test_read_commands_leave_a_finished_run_exactly_as_it_was(tmp_path):
    data = tmp_path / "data"
    res = _cli("start", "-d", str(data), "--max-envs", "2", "--plays", "1", "--no-progress")
    assert res.exit_code == 0, res.output
    run_id = DataDir(data).known_runs()[-1]
    run_dir = DataDir(data).run_dir(run_id)
    assert not list(run_dir.glob("events.sqlite-*")), "start closed its log (no -wal/-shm left)"
    before = _snapshot(run_dir)
    out = tmp_path / "out"
    out.mkdir()
    commands = [*_read_commands(run_id, out), ["compare", run_id, run_id], ["archive", "list", run_id],
                ["replay", run_id, "--verify"]]
    for argv in commands:
        res = _cli(*argv, "-d", str(data))
        assert res.exit_code == 0, (argv, res.output)
        assert _snapshot(run_dir) == before, f"{argv} changed the run's files"
    assert json.loads(_cli("status", "--json", "-d", str(data)).stdout)["run_id"] == run_id
    # the writer still writes: start resumes the same run and appends to its log
    events_before = sum(json.loads(_cli("events", "count", "--json", run_id, "-d", str(data)).stdout)["counts"].values())
    res = _cli("start", "--run", run_id, "-d", str(data), "--max-envs", "3", "--plays", "1", "--no-progress")
    assert res.exit_code == 0, res.output
    after = json.loads(_cli("events", "count", "--json", run_id, "-d", str(data)).stdout)
    assert sum(after["counts"].values()) > events_before


# -- a log whose writer died before it checkpointed ------------------------------------------------


def test_read_commands_read_a_write_ahead_log_without_touching_it(tmp_path):
    data = tmp_path / "data"
    events = run_events(RUN, n_envs=4)
    path = _log_left_by_a_killed_writer(data, events, tmp_path)
    run_dir = path.parent
    before = _snapshot(run_dir)
    out = tmp_path / "out"
    out.mkdir()
    for argv in _read_commands(RUN, out):
        res = _cli(*argv, "-d", str(data))
        assert res.exit_code == 0, (argv, res.output)
        after = _snapshot(run_dir)
        for name in ("events.sqlite", "events.sqlite-wal"):
            assert after[name] == before[name], f"{argv} changed {name}"
        assert set(after) == set(before), f"{argv} added or removed files: {set(after) ^ set(before)}"
    # every event was read, those only in the -wal file included
    exported = [json.loads(line)["event_id"] for line in (out / "export.jsonl").read_text().splitlines()]
    assert exported == [e.event_id for e in events]
    counts = json.loads(_cli("events", "count", "--json", RUN, "-d", str(data)).stdout)
    assert counts["total"] == len(events)


# -- a log with tables missing ---------------------------------------------------------------------


def test_a_log_with_missing_tables_is_an_error_for_read_commands_and_is_not_repaired(tmp_path):
    data = tmp_path / "data"
    path = DataDir(data).log_path(RUN)
    _write_log(path, run_events(RUN, n_envs=2))
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE consumer_offsets")
    conn.execute("DROP TABLE dead_letters")
    conn.commit()
    conn.close()
    assert not list(path.parent.glob("events.sqlite-*"))
    before = _snapshot(path.parent)
    out = tmp_path / "out"
    out.mkdir()
    for argv in _read_commands(RUN, out):
        res = _cli(*argv, "-d", str(data))
        assert res.exit_code == 2, (argv, res.output)
        assert "is incomplete" in res.output and "consumer_offsets, dead_letters" in res.output, (argv, res.output)
        assert "Traceback" not in res.output
        assert _snapshot(path.parent) == before, f"{argv} changed the log"
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert tables == {"events", "meta"}, "no table was added"


# -- the log class ---------------------------------------------------------------------------------


def test_a_read_only_log_refuses_writes_and_reopens_read_only(tmp_path):
    path = tmp_path / "events.sqlite"
    events = run_events(RUN, n_envs=1)
    _write_log(path, events)
    log = SqliteEventLog(path, RUN, create=False, read_only=True)
    try:
        assert len(log) == len(events)
        for write in (lambda: log.append(run_events(RUN, n_envs=1)), lambda: log.commit("g", {0: 1}),
                      lambda: log.dead_letter(b"x", "bad")):
            with pytest.raises(EventLogError, match="open read-only"):
                write()
        assert log.reopen_args() == {"path": str(path), "run_id": RUN, "read_only": "1"}
        from spade_engine.events.backends import reopen_log

        again = reopen_log("sqlite", log.reopen_args())
        try:
            with pytest.raises(EventLogError, match="open read-only"):
                again.append(run_events(RUN, n_envs=1))
        finally:
            again.close()
    finally:
        log.close()
    assert not list(tmp_path.glob("events.sqlite-*"))
    with pytest.raises(ValueError):
        SqliteEventLog(path, RUN, read_only=True)  # create=True: a read-only log is never created
    with pytest.raises(ValueError):
        open_event_log(RUN, data_dir=tmp_path, create=True, read_only=True)


def test_a_read_only_reader_sees_what_a_writer_appends_after_it_opened(tmp_path):
    """Opened while no writer had the log (read as immutable), the reader switches to the writer's
    WAL once one appears, so ``follow`` (``events tail -f``, the dashboard) sees new events."""
    path = tmp_path / "events.sqlite"
    events = run_events(RUN, n_envs=3)
    _write_log(path, events[:4])
    reader = SqliteEventLog(path, RUN, create=False, read_only=True)
    try:
        assert len(reader) == 4
        writer = SqliteEventLog(path, RUN, create=False)
        try:
            writer.append(events[4:])
            assert len(reader) == len(events)
            assert [r.envelope.event_id for r in reader.read()] == [e.event_id for e in events]
        finally:
            writer.close()
        assert len(reader) == len(events), "still read after the writer closed"
    finally:
        reader.close()


def test_a_read_only_reader_sees_what_a_short_lived_writer_appended_and_closed(tmp_path):
    """A writer that opens, appends and closes between two reads leaves no WAL behind (its last
    close checkpoints into the main file): the immutable reading notices the main file changed and
    reads afresh (the dashboard's live stream missed such events)."""
    path = tmp_path / "events.sqlite"
    events = run_events(RUN, n_envs=3)
    _write_log(path, events[:4])
    reader = SqliteEventLog(path, RUN, create=False, read_only=True)
    try:
        assert len(reader) == 4
        for i in range(4, len(events)):
            writer = SqliteEventLog(path, RUN, create=False)
            writer.append([events[i]])
            writer.close()
            assert not path.with_name(path.name + "-wal").exists()
            assert len(reader) == i + 1
        assert [r.envelope.event_id for r in reader.read()] == [e.event_id for e in events]
    finally:
        reader.close()


def test_the_writers_still_complete_and_write_the_log(tmp_path):
    """``events import`` into an existing run appends to it; a writer opening a log with tables
    missing (an older or partly copied log) still adds them, as before."""
    data = tmp_path / "data"
    path = DataDir(data).log_path(RUN)
    events = run_events(RUN, n_envs=3)
    _write_log(path, events[:5])
    export = tmp_path / "all.jsonl"
    source = tmp_path / "source.sqlite"
    _write_log(source, events)
    with SqliteEventLog(source, RUN, create=False, read_only=True) as log, open(export, "wb") as fh:
        export_jsonl(log, fh)
    res = _cli("events", "import", str(export), "-d", str(data))
    assert res.exit_code == 0, res.output
    assert json.loads(_cli("events", "count", "--json", RUN, "-d", str(data)).stdout)["total"] == len(events)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE dead_letters")
    conn.commit()
    conn.close()
    SqliteEventLog(path, RUN, create=False).close()
    conn = sqlite3.connect(path)
    assert "dead_letters" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
