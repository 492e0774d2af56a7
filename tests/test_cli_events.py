"""`spade-engine events ...` end to end through the Typer app."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.events import SqliteEventLog
from spade_engine.events.store import open_event_log

from factories import run_events

runner = CliRunner()


def _make_run(root, run_id, n_envs=2):
    log = open_event_log(run_id, data_dir=root, create=True)
    events = run_events(run_id, n_envs=n_envs)
    log.append(events)
    log.close()
    return events


def _invoke(*args, env=None):
    return runner.invoke(app, list(args), env=env or {}, catch_exceptions=False)


def test_every_command_has_help():
    def walk(group, prefix):
        import typer.main

        click_cmd = typer.main.get_command(group)
        yield prefix, click_cmd
        for name, sub in getattr(click_cmd, "commands", {}).items():
            yield from _walk_click(sub, prefix + [name])

    def _walk_click(cmd, prefix):
        yield prefix, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from _walk_click(sub, prefix + [name])

    seen = 0
    for prefix, cmd in walk(app, []):
        res = runner.invoke(app, prefix + ["--help"])
        assert res.exit_code == 0, (prefix, res.output)
        if prefix:
            assert cmd.help or cmd.short_help, f"command {' '.join(prefix)} has no help text"
        seen += 1
    assert seen >= 6


def test_count_latest_run_by_default(tmp_path):
    _make_run(tmp_path, "run-20260101-000000-aaaaaa", n_envs=1)
    _make_run(tmp_path, "run-20260102-000000-bbbbbb", n_envs=3)
    res = _invoke("events", "count", "--json", "--data-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["run_id"] == "run-20260102-000000-bbbbbb"
    assert data["counts"]["EnvironmentProposed"] == 3


def test_data_dir_from_env_then_default(tmp_path, monkeypatch):
    _make_run(tmp_path / "viaenv", "run-a", n_envs=1)
    res = _invoke("events", "count", "--json", env={"SPADE_DATA": str(tmp_path / "viaenv")})
    assert json.loads(res.stdout)["run_id"] == "run-a"
    monkeypatch.chdir(tmp_path)
    _make_run(tmp_path / "spade-data", "run-b", n_envs=1)
    res = _invoke("events", "count", "--json", env={"SPADE_DATA": ""})
    assert json.loads(res.stdout)["run_id"] == "run-b"


def test_export_import_round_trip_is_byte_for_byte(tmp_path):
    src = tmp_path / "src"
    events = _make_run(src, "run-rt", n_envs=3)
    res = _invoke("events", "export", "--data-dir", str(src))
    assert res.exit_code == 0
    exported = res.stdout_bytes
    assert exported.count(b"\n") == len(events)
    out_file = tmp_path / "run.jsonl"
    _invoke("events", "export", "--data-dir", str(src), "--out", str(out_file))
    assert out_file.read_bytes() == exported

    dst = tmp_path / "dst"
    res = _invoke("events", "import", str(out_file), "--data-dir", str(dst))
    assert res.exit_code == 0, res.output
    again = _invoke("events", "export", "run-rt", "--data-dir", str(dst)).stdout_bytes
    assert again == exported
    # importing twice is a no-op
    res = _invoke("events", "import", str(out_file), "--data-dir", str(dst))
    assert "0 new events" in res.stderr
    assert _invoke("events", "export", "--data-dir", str(dst)).stdout_bytes == exported


def test_import_is_all_or_nothing_and_names_bad_lines(tmp_path):
    src = tmp_path / "src"
    _make_run(src, "run-bad", n_envs=1)
    lines = _invoke("events", "export", "--data-dir", str(src)).stdout_bytes.splitlines()
    good_count = len(lines)
    broken = list(lines)
    broken.insert(2, b"{this is not json")
    missing = json.loads(lines[3])
    del missing["run_id"]
    broken.insert(4, json.dumps(missing).encode())
    unknown = json.loads(lines[5])
    unknown["type"] = "Nonsense"
    unknown["event_id"] = "0190e1c0-0000-7000-8000-000000000000"
    broken.insert(6, json.dumps(unknown).encode())
    f = tmp_path / "broken.jsonl"
    f.write_bytes(b"\n".join(broken) + b"\n")

    dst = tmp_path / "dst"
    res = _invoke("events", "import", str(f), "--data-dir", str(dst))
    assert res.exit_code == 2
    assert "line 3" in res.stderr and "not valid JSON" in res.stderr
    assert "line 5" in res.stderr and "run_id" in res.stderr
    assert "line 7" in res.stderr and "Nonsense" in res.stderr
    assert "nothing was imported" in res.stderr
    assert not (dst / "runs").exists() or not any((dst / "runs").iterdir())

    res = _invoke("events", "import", str(f), "--skip-invalid", "--data-dir", str(dst))
    assert res.exit_code == 0, res.output
    assert "skipped 3 invalid line(s)" in res.stderr
    log = SqliteEventLog(dst / "runs" / "run-bad" / "events.sqlite", "run-bad", create=False)
    assert sum(log.count_by_type().values()) == good_count
    assert len(log.dead_letters()) == 3


def test_corrupt_log_is_a_clear_error_not_a_traceback(tmp_path):
    d = tmp_path / "runs" / "run-c"
    d.mkdir(parents=True)
    (d / "events.sqlite").write_bytes(b"garbage" * 1000)
    res = _invoke("events", "count", "--data-dir", str(tmp_path))
    assert res.exit_code == 2
    assert "corrupt" in res.stderr and "events.sqlite" in res.stderr
    assert "Traceback" not in res.output


def test_no_runs_is_a_clear_error(tmp_path):
    res = _invoke("events", "tail", "--data-dir", str(tmp_path))
    assert res.exit_code == 2
    assert "no runs" in res.stderr


def test_tail_shows_last_events(tmp_path):
    events = _make_run(tmp_path, "run-t", n_envs=2)
    res = _invoke("events", "tail", "-n", "3", "--json", "--data-dir", str(tmp_path))
    lines = res.stdout_bytes.splitlines()
    assert lines == [e.to_json() for e in events[-3:]]


def test_schema_command_prints_every_type():
    res = _invoke("events", "schema")
    data = json.loads(res.stdout)
    assert "RolloutCompleted" in data and "RunStarted" in data
    one = json.loads(_invoke("events", "schema", "--type", "HintWritten").stdout)
    assert list(one) == ["HintWritten"]
    bad = _invoke("events", "schema", "--type", "Nope")
    assert bad.exit_code == 2


@pytest.mark.parametrize("backend", ["mongodb"])
def test_unknown_backend_is_rejected(tmp_path, backend):
    res = _invoke("events", "count", "--backend", backend, "--data-dir", str(tmp_path))
    assert res.exit_code == 2 and "unknown backend" in res.stderr
