"""Held-out evaluation points (EvaluationCompleted) in the dashboard and the audit: accuracy per
task against the step of the policy version evaluated, next to the training curves. The API on a
real server, the curves' placement rules, the page in headless Chromium, and the audit's table,
figure and CSV."""

from __future__ import annotations

import csv
import io

import httpx
import pytest
from dashboard_support import RUN_ID, Served, training_run, write_run
from test_dashboard_browser import _nums, _plotted, browser  # noqa: F401 - browser is the Chromium fixture

from spade_engine.dashboard.app import create_app
from spade_engine.dashboard.audit import build_audit, write_audit
from spade_engine.dashboard.curves import evaluation_curves
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import EvaluationCompleted
from spade_engine.events.store import open_event_log

#: (version, task, correct of 10 items, evaluated by); training_run() has versions v1..v4 at steps 1..4
POINTS = [
    ("v0", "gcd", 3, "trainer-eval"), ("v0", "maze", 1, "trainer-eval"),
    ("v2", "gcd", 5, "trainer-eval"), ("v2", "maze", 2, "trainer-eval"),
    ("v4", "gcd", 8, "trainer-eval"), ("v4", "maze", 2, "trainer-eval"),
    ("some-outside-model", "gcd", 9, "eval"),  # not a version of this run: cannot be placed
]


def _evaluation(version: str, task: str, correct: int, n: int = 10) -> EvaluationCompleted:
    from spade_engine.evaluation.scoring import wilson_interval

    lo, hi = wilson_interval(correct, n)
    return EvaluationCompleted(
        evaluation_id=f"eval-{version}", suite="reasoning-gym", task=task, items=n, seed=0, k=1, temperature=0.0,
        greedy=True, correct=correct, accuracy=correct / n, ci_low=lo, ci_high=hi, policy_version=version,
        checkpoint_sha256=None, model="tiny:0", item_seeds=[2**31 + i for i in range(n)],
        item_correct=[1] * correct + [0] * (n - correct), item_ids=[f"{task}/{2**31 + i}" for i in range(n)],
    )


def evaluation_run() -> list:
    events = training_run()
    stop = events.pop()  # RunStopped last
    for version, task, correct, producer in POINTS:
        events.append(make_envelope(_evaluation(version, task, correct), run_id=RUN_ID, producer=producer))
    return [*events, stop]


@pytest.fixture()
def data_dir(tmp_path):
    write_run(tmp_path / "data", evaluation_run())
    return tmp_path / "data"


def _wait_caught_up(c: httpx.Client, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not (c.get("api/summary").json()["caught_up"]) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_api_places_each_evaluation_at_its_versions_step(data_dir):
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        _wait_caught_up(c)
        e = c.get("api/evaluations").json()
        training = c.get("api/training").json()
    assert e["x_label"] == training["x_label"] == "policy version (step)"
    assert [t["label"] for t in e["tasks"]] == ["reasoning-gym/gcd", "reasoning-gym/maze"]
    gcd, maze = e["tasks"]
    assert gcd["x"] == [0, 2, 4] and gcd["versions"] == ["v0", "v2", "v4"]
    assert gcd["y"] == pytest.approx([0.3, 0.5, 0.8]) and maze["y"] == pytest.approx([0.1, 0.2, 0.2])
    assert all(lo <= y <= hi for lo, y, hi in zip(gcd["ci_low"], gcd["y"], gcd["ci_high"]))
    assert gcd["items"] == [10, 10, 10] and gcd["k"] == [1, 1, 1]
    assert e["points"] == 6 and e["unplaced"] == 1
    # the evaluated steps are steps of the training curves' own axis
    assert set(gcd["x"]) - {0} <= set(training["x"])


def test_evaluation_curves_rules():
    rows = [
        {"label": "rg/a", "suite": "rg", "task": "a", "policy_version": "v3", "accuracy": 0.5, "ci_low": 0.2, "ci_high": 0.8,
         "items": 4, "k": 1, "evaluation_id": "late", "offset": 9},
        {"label": "rg/a", "suite": "rg", "task": "a", "policy_version": "v0", "accuracy": 0.25, "ci_low": 0.05, "ci_high": 0.7,
         "items": 4, "k": 1, "evaluation_id": "base", "offset": 2},
        {"label": "rg/a", "suite": "rg", "task": "a", "policy_version": "v3", "accuracy": 0.75, "ci_low": 0.3, "ci_high": 0.95,
         "items": 4, "k": 2, "evaluation_id": "early", "offset": 5},
        {"label": "rg/a", "suite": "rg", "task": "a", "policy_version": "v9", "accuracy": 1.0, "ci_low": 0.5, "ci_high": 1.0,
         "items": 4, "k": 1, "evaluation_id": "unknown", "offset": 7},
    ]
    out = evaluation_curves(rows, [{"version": "v3", "step": 3}])
    (a,) = out["tasks"]
    # sorted by step, then log order; a version the run never published is left out
    assert a["x"] == [0, 3, 3] and a["ids"] == ["base", "early", "late"] and a["k"] == [1, 2, 1]
    assert out["unplaced"] == 1 and out["points"] == 3
    assert evaluation_curves([], []) == {"tasks": [], "points": 0, "unplaced": 0, "x_label": "policy version (step)"}


def test_audit_reports_held_out_accuracy(data_dir, tmp_path):
    log = open_event_log(RUN_ID, data_dir=data_dir)
    try:
        a = build_audit(log)
    finally:
        log.close()
    assert [(r["policy_version"], r["task"], r["step"]) for r in a.evaluations] == [
        (v, t, {"v0": 0, "v2": 2, "v4": 4}.get(v)) for v, t, _, _ in POINTS
    ]
    files = write_audit(a, tmp_path / "audit", generated_at="2026-01-01T00:00:00Z")
    assert sorted(f.name for f in files) == ["difficulty.csv", "environments.csv", "evaluations.csv", "report.html"]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "audit" / "evaluations.csv").read_text())))
    assert [(r["task"], r["policy_version"], r["step"], r["accuracy"]) for r in rows[:2]] == [
        ("gcd", "v0", "0", "0.3"), ("maze", "v0", "0", "0.1")]
    assert rows[-1]["step"] == "" and rows[-1]["producer"] == "eval"
    html = (tmp_path / "audit" / "report.html").read_text()
    assert 'id="fig-evaluations"' in html and "Held-out evaluation" in html
    # a run without evaluations: no figure, an empty CSV with its header
    plain = tmp_path / "plain"
    write_run(plain, training_run())
    log = open_event_log(RUN_ID, data_dir=plain)
    try:
        b = build_audit(log)
    finally:
        log.close()
    assert b.evaluations == []
    write_audit(b, tmp_path / "audit2", generated_at="x")
    assert "fig-evaluations" not in (tmp_path / "audit2" / "report.html").read_text()
    assert (tmp_path / "audit2" / "evaluations.csv").read_text().startswith("evaluation_id,suite,task,policy_version,step")


@pytest.mark.browser
def test_evaluation_chart_in_chromium(data_dir, browser):
    """The page draws one line per task of what /api/evaluations says, at the training charts'
    steps, with the 95% interval as error bars, and says how many points are not shown."""
    from conftest import ARTIFACTS
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with Served(create_app(data_dir, RUN_ID)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        wait = WebDriverWait(browser, 30, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])
        browser.get(srv.url)
        wait.until(lambda d: d.execute_script("return document.body.dataset.loaded") is not None
                   and "stopped" in d.find_element(By.ID, "status").text)
        wait.until(lambda d: len((_plotted(d, "chart-evaluations") or {}).get("traces") or []) == 2)
        api = c.get("api/evaluations").json()
        p = _plotted(browser, "chart-evaluations")
        assert p["shownLegend"] and p["legendItems"] == 2 and p["xTitle"] == "policy version (step)"
        assert p["yRange"] == pytest.approx([-0.04, 1.04])
        assert [t["name"] for t in p["traces"]] == [t["label"] for t in api["tasks"]]
        for drawn, want in zip(p["traces"], api["tasks"]):
            assert drawn["x"] == want["x"] and _nums(drawn["y"]) == pytest.approx(want["y"]), want["label"]
        bars = browser.execute_script("""
            const d = document.getElementById('chart-evaluations');
            return d.data.map(t => [Array.from(t.error_y.array), Array.from(t.error_y.arrayminus)]);""")
        for (up, down), want in zip(bars, api["tasks"]):
            assert _nums(up) == pytest.approx([h - y for h, y in zip(want["ci_high"], want["y"])])
            assert _nums(down) == pytest.approx([y - lo for y, lo in zip(want["y"], want["ci_low"])])
        # drawn as an svg with one marker per point, in the training panel
        assert len(browser.find_elements(By.CSS_SELECTOR, "#training #chart-evaluations .scatterlayer .point")) == 6
        note = browser.find_element(By.ID, "eval-note").text
        assert "6 evaluation points on 2 task(s)" in note and "1 result(s)" in note
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.find_element(By.ID, "training").screenshot(str(ARTIFACTS / "dashboard-evaluations.png"))
        logs = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, logs
