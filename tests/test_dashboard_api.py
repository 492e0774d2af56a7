"""The dashboard's HTTP API on a real uvicorn server: data, token enforcement (including the SSE
stream), the live stream itself, and the CLI's refusal to bind a public address without a token."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from dashboard_support import RUN_ID, Served, audit_run, write_run
from typer.testing import CliRunner

from spade_engine.cli import app as cli_app
from spade_engine.dashboard.app import create_app
from spade_engine.dashboard.cli import is_loopback
from spade_engine.events import PolicyUpdated, SqliteEventLog, make_envelope
from spade_engine.events.store import DataDir


@pytest.fixture()
def data_dir(tmp_path):
    write_run(tmp_path / "data", audit_run())
    return tmp_path / "data"


def _wait(fn, timeout=30.0):  # returns as soon as fn() is truthy; generous on a loaded machine
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_api_serves_the_projections(data_dir):
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        assert _wait(lambda: c.get("api/summary").json()["verdicts"].get("accepted") == 4)
        s = c.get("api/summary").json()
        assert s["run_id"] == RUN_ID and s["caught_up"] and s["stopped"]
        assert s["counts"]["EnvironmentProposed"] == 6 and s["events"] == len(audit_run())
        envs = c.get("api/envs", params={"sort": "regret", "desc": "true", "verdict": "accepted"}).json()
        assert envs["total"] == 4 and [r["env_id"] for r in envs["rows"]][:1] == ["env-b"]
        f = c.get("api/envs/env-f").json()
        assert "CountEnv" in f["code_html"] and '<span class="k">class</span>' in f["code_html"]
        assert [ch["name"] for ch in f["checks"]] == ["parse", "solution_replay"]
        assert f["lineage"]["repair_chain"][0]["env_id"] == "env-c"
        assert f["lineage"]["parents"][0]["env_id"] == "env-a" and len(f["plays"]) == 4
        e = c.get("api/envs/env-e").json()
        assert e["neighbours"][0]["env_id"] == "env-a" and e["verdict"] == "rejected"
        assert c.get("api/envs/nope").status_code == 404
        series = c.get("api/series").json()
        assert {r["skill"] for r in series["rows"]} == {"*", "math", "logic"}
        assert c.get("api/policies").json()[0]["version"] == "v1"
        assert c.get("api/rejections").json()[0] == {"error_kind": "duplicate", "failed_check": "novelty", "count": 1}
        page = c.get("").text
        assert 'src="static/plotly.min.js"' in page
        js = c.get("static/plotly.min.js")
        assert js.status_code == 200 and len(js.content) > 1_000_000
        assert c.get("static/../app.py").status_code == 404


def test_token_is_required_on_every_request_including_sse(data_dir):
    token = "s3cret-tok"
    with Served(create_app(data_dir, None, token=token)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        for path in ("", "api/summary", "api/envs/env-a", "static/plotly.min.js", "static/app.js", "api/stream"):
            assert c.get(path).status_code == 401, path
            assert c.get(path, params={"token": "wrong"}).status_code == 401, path
        assert c.get("api/summary", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        assert c.get("api/summary", headers={"X-Spade-Token": token}).status_code == 200
        page = c.get("", params={"token": token})
        assert page.status_code == 200 and f'static/app.js?token={token}' in page.text
        with c.stream("GET", "api/stream", params={"token": token}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")


def test_sse_pushes_a_new_event(data_dir):
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        with c.stream("GET", "api/stream") as r:
            lines = r.iter_lines()
            assert next(line for line in lines if line.startswith("event:")) == "event: hello"
            log = SqliteEventLog(DataDir(data_dir).log_path(RUN_ID), RUN_ID)
            log.append([make_envelope(PolicyUpdated(version="v2", parent_version="v1", checkpoint=None, step=2),
                                      run_id=RUN_ID, producer="trainer")])
            log.close()
            event = None
            for line in lines:
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "events":
                    items = json.loads(line[6:])
                    assert [i["type"] for i in items] == ["PolicyUpdated"] and "version=v2" in items[0]["summary"]
                    break
        assert _wait(lambda: any(p["version"] == "v2" for p in c.get("api/policies").json()))


def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.1.2.3")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.org")


def test_cli_refuses_public_bind_without_token(data_dir, monkeypatch):
    monkeypatch.delenv("SPADE_DASHBOARD_TOKEN", raising=False)
    res = CliRunner().invoke(cli_app, ["dashboard", "--data-dir", str(data_dir), "--host", "0.0.0.0"])
    assert res.exit_code == 2
    assert "token" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(cli_app, ["dashboard", "--data-dir", str(data_dir / "nowhere")])
    assert res.exit_code == 2 and "no runs" in res.output


def test_cli_serves_and_stops_cleanly_with_an_open_stream(data_dir, tmp_path):
    """`spade-engine dashboard` as a real process: serves the run, then exits promptly on Ctrl-C
    even while a browser holds the SSE stream open."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from dashboard_support import free_port

    root = Path(__file__).resolve().parent.parent
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(root), SPADE_DASHBOARD_TOKEN="")
    proc = subprocess.Popen([sys.executable, "-m", "spade_engine.cli", "dashboard", "--data-dir", str(data_dir),
                             "--port", str(port)], cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/"

        def up():
            try:
                return httpx.get(base + "api/summary", timeout=2).status_code == 200
            except httpx.TransportError:
                return proc.poll() is not None

        assert _wait(up, timeout=90) and proc.poll() is None
        with httpx.Client(base_url=base, timeout=10) as c, c.stream("GET", "api/stream") as r:
            assert next(line for line in r.iter_lines() if line.startswith("event:")) == "event: hello"
            proc.send_signal(signal.SIGINT)
            # uvicorn re-raises the signal after its graceful shutdown: the shell convention 130
            assert proc.wait(timeout=20) in (0, 130, -signal.SIGINT)
        output = proc.stdout.read().decode()
        assert f"127.0.0.1:{port}" in output and "Traceback" not in output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
