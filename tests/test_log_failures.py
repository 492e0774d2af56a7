"""Issue 31, class 8: the log's own failures.

* a full disk: every writer (the event log, each projection, blobs) says "disk full", what it
  could not write and how to go on, with no traceback, and the run resumes once there is space
  (a real size-limited tmpfs, mounted in a private mount namespace; SQLite's own SQLITE_FULL for
  the event log alone);
* a log that lost its last writes (its WAL file gone after a kill) while the projections kept
  them: ``status`` says so, ``start`` (resume) and the archive commands rebuild the projections
  from the log, and ``replay --verify`` then agrees.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.errors import DiskFull
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import RunStopped
from spade_engine.events.sqlite.log import LOG_FILENAME, SqliteEventLog

REPO = Path(__file__).resolve().parent.parent


def test_a_full_event_log_says_disk_full_and_keeps_what_it_had(tmp_path):
    """SQLITE_FULL (the database reached its page limit, what a full disk gives) used to surface
    as "cannot rollback - no transaction is active", the error of the failed rollback."""
    log = SqliteEventLog(tmp_path / "events.sqlite", "r")
    try:
        log.append([make_envelope(RunStopped(reason="completed"), run_id="r", producer="t")])
        conn = log._conn()
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")
        big = RunStopped(reason="error", detail="x" * 200_000)
        with pytest.raises(DiskFull) as exc:
            log.append([make_envelope(big, run_id="r", producer="t")])
        msg = str(exc.value)
        assert msg.startswith("disk full: the event log") and "rollback" not in msg and "resume" in msg
        assert len(log) == 1  # what it had is intact
        conn.execute("PRAGMA max_page_count = 1073741823")
        assert log.append([make_envelope(big, run_id="r", producer="t")]) == 1  # and it goes on once there is room
    finally:
        log.close()


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a size-limited tmpfs (in a private mount namespace)")
@pytest.mark.parametrize("size", ["700k", "1500k", "4m"])
def test_a_full_disk_stops_a_run_with_disk_full_and_it_resumes_with_space(tmp_path, size):
    """A real full device under the data directory, at several sizes (so different writers hit it
    first): one line saying disk full, no traceback; after the device grows, `start` resumes the
    run to its end and `replay --verify` agrees with the live projections."""
    data = tmp_path / "data"
    data.mkdir()
    py = sys.executable
    script = textwrap.dedent(
        f"""
        set -u
        mount -t tmpfs -o size={size} tmpfs {data}
        cd {REPO}
        {py} -m spade_engine.cli start --seed 1 --max-envs 40 --plays 1 -d {data} --no-progress > {tmp_path}/first.out 2>&1
        echo $? > {tmp_path}/first.rc
        mount -o remount,size=256m {data}
        {py} -m spade_engine.cli start --max-envs 40 --plays 1 -d {data} --no-progress > {tmp_path}/second.out 2>&1
        echo $? > {tmp_path}/second.rc
        {py} -m spade_engine.cli replay --verify -d {data} > {tmp_path}/verify.out 2>&1
        echo $? > {tmp_path}/verify.rc
        """
    )
    subprocess.run(["unshare", "-m", "sh", "-c", script], check=True, timeout=900)
    first = (tmp_path / "first.out").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "2", first
    assert "error: disk full: " in first and "Traceback" not in first and "cannot rollback" not in first, first
    assert "start the run again to resume it" in first
    second = (tmp_path / "second.out").read_text()
    assert (tmp_path / "second.rc").read_text().strip() == "0" and "Traceback" not in second, second
    verify = (tmp_path / "verify.out").read_text()
    assert (tmp_path / "verify.rc").read_text().strip() == "0" and "live projections equal the replay" in verify, verify


def test_a_log_behind_its_projections_is_noticed_and_the_projections_rebuilt(tmp_path):
    data = tmp_path / "data"
    res = _cli("start", "--seed", "2", "--max-envs", "2", "--plays", "1", "-d", str(data), "--no-progress")
    assert res.exit_code == 0, res.output
    (run_dir,) = (data / "runs").iterdir()
    log_path = run_dir / LOG_FILENAME
    with sqlite3.connect(log_path) as conn:  # everything in the main file: this is what survives
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(log_path, tmp_path / "survives.sqlite")
    res = _cli("start", "--max-envs", "4", "--plays", "1", "-d", str(data), "--no-progress", "--run", run_dir.name)
    assert res.exit_code == 0, res.output
    # the kill: the log loses what it wrote since (its WAL), the projections keep it
    for suffix in ("", "-wal", "-shm"):
        Path(f"{log_path}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "survives.sqlite", log_path)
    status = _cli("status", "-d", str(data))
    assert status.exit_code == 0 and "ends before its projections" in status.output, status.output
    assert "archive at offset" in status.output and "`start` rebuilds them" in status.output
    verify = _cli("replay", "--verify", "-d", str(data))
    assert verify.exit_code == 0, verify.output
    assert "rebuilding them from the log" in verify.output and "live projections equal the replay" in verify.output
    assert any(p.name.startswith("stale-projections-") for p in run_dir.iterdir())  # kept, not deleted
    again = _cli("start", "--max-envs", "4", "--plays", "1", "-d", str(data), "--no-progress", "--run", run_dir.name)
    assert again.exit_code == 0, again.output
    status = _cli("status", "-d", str(data))
    assert "ends before its projections" not in status.output
    assert _cli("replay", "--verify", "-d", str(data)).exit_code == 0


def test_start_alone_rebuilds_projections_ahead_of_the_log(tmp_path):
    """The resume path on its own (runs/context.build_context -> open_checked_projections): no
    `status`, `replay` or archive command runs first, so nothing but `start` can notice that the
    projections are ahead of the log. It moves them aside, rebuilds them from the log, and the run
    goes on from what the log holds."""
    data = tmp_path / "data"
    res = _cli("start", "--seed", "3", "--max-envs", "2", "--plays", "1", "-d", str(data), "--no-progress")
    assert res.exit_code == 0, res.output
    (run_dir,) = (data / "runs").iterdir()
    log_path = run_dir / LOG_FILENAME
    with sqlite3.connect(log_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(log_path, tmp_path / "survives.sqlite")
    survived = len(SqliteEventLog(tmp_path / "survives.sqlite", run_dir.name, create=False))
    res = _cli("start", "--max-envs", "4", "--plays", "1", "-d", str(data), "--no-progress", "--run", run_dir.name)
    assert res.exit_code == 0, res.output
    for suffix in ("", "-wal", "-shm"):  # the kill: the log loses its last writes, the projections keep them
        Path(f"{log_path}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "survives.sqlite", log_path)
    assert not any(p.name.startswith("stale-projections-") for p in run_dir.iterdir())

    again = _cli("start", "--max-envs", "4", "--plays", "1", "-d", str(data), "--no-progress", "--run", run_dir.name)
    assert again.exit_code == 0, again.output
    (stale,) = [p for p in run_dir.iterdir() if p.name.startswith("stale-projections-")]  # moved aside by start
    assert any(stale.iterdir())
    log = SqliteEventLog(log_path, run_dir.name, create=False)
    try:
        assert len(log) > survived  # the run went on from what the log held
        envs = {r.envelope.payload["env_id"] for r in log.read() if r.envelope.type == "EnvironmentProposed"}
    finally:
        log.close()
    status = _cli("status", "-d", str(data))
    assert status.exit_code == 0 and "ends before its projections" not in status.output, status.output
    listed = _cli("archive", "list", "-d", str(data), "--json")
    assert listed.exit_code == 0, listed.output
    assert {e["env_id"] for e in json.loads(listed.output)} == envs  # the rebuilt archive holds the log's environments
    verify = _cli("replay", "--verify", "-d", str(data))
    assert verify.exit_code == 0 and "rebuilding them" not in verify.output, verify.output
    assert "live projections equal the replay" in verify.output
    assert len([p for p in run_dir.iterdir() if p.name.startswith("stale-projections-")]) == 1  # start's rebuild, the only one
