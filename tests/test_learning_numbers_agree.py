"""The learning curves' numbers agree wherever they are shown (issue 30, item 4): held-out
accuracy of each evaluated version as ``spade-engine compare --json`` reports it (a real CLI
subprocess), as the dashboard's training panel serves it (``/api/evaluations`` on a real server),
and as ``bench/learning.py`` writes it into the results pages (``curves``), all read from the same
run's ``EvaluationCompleted`` events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from dashboard_support import RUN_ID, Served, write_run
from test_dashboard_evaluations import _wait_caught_up, evaluation_run

from spade_engine.dashboard.app import create_app

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def data_dir(tmp_path):
    write_run(tmp_path / "data", evaluation_run())
    return tmp_path / "data"


def _compare(data_dir: Path, version_a: str, version_b: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-m", "spade_engine.cli", "compare", RUN_ID, RUN_ID, "--version-a", version_a,
                          "--version-b", version_b, "--json", "-d", str(data_dir)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_compare_dashboard_and_results_pages_show_the_same_accuracies(data_dir):
    sys.path.insert(0, str(ROOT / "bench"))
    from learning import curves

    cmp = _compare(data_dir, "v0", "v4")
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        _wait_caught_up(c)
        panel = c.get("api/evaluations").json()
    bench = curves(data_dir, RUN_ID)

    by_task = {t["task"]: t for t in panel["tasks"]}
    rows = cmp["accuracy"]["tasks"]
    assert {r["task"] for r in rows} == set(by_task) == {"gcd", "maze"}
    for r in rows:
        t = by_task[r["task"]]
        assert r["accuracy_a"] == pytest.approx(t["y"][t["versions"].index("v0")])
        assert r["accuracy_b"] == pytest.approx(t["y"][t["versions"].index("v4")])
    # the results pages pool the tasks (items-weighted): the same numbers, pooled
    points = {p["version"]: p for p in bench["heldout"]}
    for version, key in (("v0", "accuracy_a"), ("v4", "accuracy_b")):
        pooled = sum(r[key] * r["items"] for r in rows) / sum(r["items"] for r in rows)
        assert points[version]["accuracy"] == pytest.approx(pooled, abs=1e-4)
        assert points[version]["items"] == sum(r["items"] for r in rows)
    assert points["v0"]["tokens"] == 0 and points["v4"]["tokens"] > points["v2"]["tokens"] > 0
