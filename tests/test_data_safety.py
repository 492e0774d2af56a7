"""A user's data after things went wrong: an emptied log is an error that changes nothing, a
damaged log can be salvaged (every intact event, and what was lost), a start that fails or is
interrupted before it recorded anything leaves no "never started" run behind (and one left by a
kill is resumed), and `replay --verify` leaves no folder behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factories import run_events
from spade_engine.cli import app
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.sqlite.salvage import salvage_log
from spade_engine.events.store import DataDir

RUN = "run-20260601-000000-safe01"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "SPADE_LOG__BACKEND": None,
                                                     "SPADE_KAFKA_BOOTSTRAP": None})


def _write(data: Path, events, run_id: str = RUN) -> Path:
    path = DataDir(data).log_path(run_id)
    log = SqliteEventLog(path, run_id)
    try:
        log.append(events)
    finally:
        log.close()
    return path


def _lines(text: bytes | str) -> list[bytes]:
    data = text.encode() if isinstance(text, str) else text
    return [line for line in data.split(b"\n") if line]


# -- an emptied log --------------------------------------------------------------------------------


def test_an_emptied_log_is_an_error_and_nothing_is_written(tmp_path):
    data = tmp_path / "data"
    path = _write(data, run_events(RUN, n_envs=2))
    (path.parent / "archive.sqlite").write_bytes(b"the run's projections stay as they are")
    path.write_bytes(b"")  # a copy gone wrong
    for wal in path.parent.glob("events.sqlite-*"):
        wal.unlink()
    for argv in (["status", RUN], ["status"], ["events", "export", RUN], ["events", "count", RUN], ["replay", RUN]):
        res = _cli(*argv, "-d", str(data))
        assert res.exit_code == 2, (argv, res.output)
        assert "is empty (0 bytes)" in res.output and "never started" not in res.output, (argv, res.output)
        assert path.stat().st_size == 0, f"{argv} wrote to the emptied log"
    assert not list(path.parent.glob("events.sqlite-*")), "no WAL or shared-memory file was created either"
    # a file that is a database but not a log (the tables gone) is refused the same way
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE other(x)")
    conn.commit()
    conn.close()
    res = _cli("status", RUN, "-d", str(data))
    assert res.exit_code == 2 and "no events table" in res.output


# -- salvage ---------------------------------------------------------------------------------------


def test_salvage_of_an_intact_log_is_the_export(tmp_path):
    data = tmp_path / "data"
    _write(data, run_events(RUN, n_envs=5))
    exported = _cli("events", "export", RUN, "-d", str(data))
    salvaged = _cli("events", "export", RUN, "--salvage", "-d", str(data))
    assert exported.exit_code == salvaged.exit_code == 0, salvaged.output
    assert _lines(salvaged.stdout_bytes) == _lines(exported.stdout_bytes)
    assert f"salvaged {RUN}: {len(run_events(RUN, n_envs=5))} intact events" in salvaged.stderr


def test_a_truncated_log_is_salvaged_with_what_was_lost(tmp_path):
    data = tmp_path / "data"
    events = run_events(RUN, n_envs=40, k=4)
    path = _write(data, events)
    original = _lines(_cli("events", "export", RUN, "-d", str(data)).stdout_bytes)
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # a copy cut off inside a page
        fh.truncate(size * 6 // 10 + 123)
    refused = _cli("events", "export", RUN, "-d", str(data))
    assert refused.exit_code == 2 and "--salvage" in refused.output
    out = tmp_path / "salvaged.jsonl"
    res = _cli("events", "export", RUN, "--salvage", "-o", str(out), "-d", str(data))
    assert res.exit_code == 0, res.output
    got = _lines(out.read_bytes())
    assert 0 < len(got) < len(original)
    assert got == original[:len(got)], "the intact events, byte for byte, in log order"
    assert "truncated" in res.stderr and f"offsets 0-{len(got) - 1}" in res.stderr
    assert path.stat().st_size == size * 6 // 10 + 123, "salvage never writes to the damaged file"
    # the salvaged events import into a fresh data directory and make a readable run
    res = _cli("events", "import", str(out), "-d", str(tmp_path / "fresh"))
    assert res.exit_code == 0, res.output
    count = json.loads(_cli("events", "count", RUN, "--json", "-d", str(tmp_path / "fresh")).stdout)
    assert count["total"] == len(got)


def test_salvage_names_the_events_lost_in_the_middle(tmp_path):
    data = tmp_path / "data"
    events = run_events(RUN, n_envs=40, k=4)
    path = _write(data, events)
    report = salvage_log(path, RUN)
    assert report.events == len(events) and not report.lost and not report.cut
    page = report.page_size
    leaves = []
    raw = path.read_bytes()
    for pgno in range(2, len(raw) // page + 1):
        if raw[(pgno - 1) * page] == 0x0D:  # a table-leaf page
            leaves.append(pgno)
    victim = leaves[len(leaves) // 2]
    with open(path, "r+b") as fh:  # one page in the middle overwritten
        fh.seek((victim - 1) * page)
        fh.write(b"\x00" * page)
    report = salvage_log(path, RUN)
    assert report.lost, "the offsets of the events on the overwritten page are named"
    assert report.events + len(report.lost) + len(report.cut) == len(events)
    kept = {r.envelope.event_id for r in report.records}
    assert kept < {e.event_id for e in events}
    assert [r.offset for r in report.records] == sorted(r.offset for r in report.records)
    assert "lost" in report.summary()


def test_salvage_reads_what_is_still_in_the_write_ahead_log(tmp_path):
    data = tmp_path / "data"
    events = run_events(RUN, n_envs=6)
    path = DataDir(data).log_path(RUN)
    log = SqliteEventLog(path, RUN)
    try:
        log.append(events)
        copy = tmp_path / "copy"
        copy.mkdir()
        for f in path.parent.glob("events.sqlite*"):  # copied while the WAL was not checkpointed
            shutil.copy(f, copy / f.name)
    finally:
        log.close()
    assert (copy / "events.sqlite-wal").stat().st_size > 0
    report = salvage_log(copy / "events.sqlite", RUN)
    assert report.events == len(events) and report.wal_pages > 0
    assert [r.envelope.event_id for r in report.records] == [e.event_id for e in events]


def test_salvage_refuses_what_has_nothing_to_salvage(tmp_path):
    bad = tmp_path / "events.sqlite"
    bad.write_bytes(b"not a database at all")
    from spade_engine.events.errors import EventLogError

    with pytest.raises(EventLogError, match="no SQLite header"):
        salvage_log(bad, RUN)


# -- runs that never started -----------------------------------------------------------------------


@pytest.mark.sandbox
def test_a_start_that_fails_to_load_its_model_leaves_no_run(tmp_path):
    data = tmp_path / "data"
    res = _cli("start", "-d", str(data), "--model", str(tmp_path / "no-such-model"), "--max-envs", "1")
    assert res.exit_code == 2 and "cannot load model" in res.output
    assert DataDir(data).known_runs() == [], "no 'never started' run is left behind"
    assert "no runs in" in _cli("status", "-d", str(data)).output


@pytest.mark.sandbox
def test_ctrl_c_during_start_up_leaves_no_run(tmp_path, monkeypatch):
    from spade_engine.archive.embedder import Embedder

    def interrupted(self, texts):
        raise KeyboardInterrupt  # Ctrl-C while the embedding model loads

    monkeypatch.setattr(Embedder, "embed", interrupted)
    data = tmp_path / "data"
    res = _cli("start", "-d", str(data), "--max-envs", "1")
    assert res.exit_code != 0
    assert DataDir(data).known_runs() == []


@pytest.mark.sandbox
def test_a_run_a_kill_left_before_it_started_is_resumed(tmp_path):
    data = tmp_path / "data"
    left = "run-20260601-000000-killed"
    SqliteEventLog(DataDir(data).log_path(left), left).close()  # killed right after creating its log
    assert "never started" in _cli("status", "-d", str(data)).output
    res = _cli("start", "-d", str(data), "--max-envs", "1", "--plays", "1", "--seed", "5", "--no-progress")
    assert res.exit_code == 0, res.output
    assert DataDir(data).known_runs() == [left], "the same run, started now"
    status = json.loads(_cli("status", "-d", str(data), "--json").stdout)
    assert status["run_id"] == left and status["starts"] == 1 and status["roots"] == 1 and status["seed"] == 5


# -- replay --verify -------------------------------------------------------------------------------


@pytest.mark.sandbox
def test_replay_verify_leaves_no_folder_behind(tmp_path):
    data = tmp_path / "data"
    res = _cli("start", "-d", str(data), "--max-envs", "2", "--plays", "1", "--no-progress")
    assert res.exit_code == 0, res.output
    run_dir = DataDir(data).run_dir(DataDir(data).known_runs()[-1])
    before = sorted(p.name for p in run_dir.iterdir())
    for _ in range(2):
        res = _cli("replay", "--verify", "-d", str(data), "--json")
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert doc["verify"] == "equal" and doc["into"] is None
    assert sorted(p.name for p in run_dir.iterdir()) == before, "no replays/ folder left"
    # an explicit --into is kept: the user asked for it
    res = _cli("replay", "--verify", "--into", str(tmp_path / "kept"), "-d", str(data))
    assert res.exit_code == 0 and (tmp_path / "kept").is_dir()
