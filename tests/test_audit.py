"""`spade-engine audit` on a small hand-checked log (see dashboard_support.audit_run)."""

from __future__ import annotations

import csv
import re

import pytest
from dashboard_support import RUN_ID, audit_run, write_run
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.dashboard.audit import build_audit
from spade_engine.events.store import open_event_log

runner = CliRunner()


@pytest.fixture()
def data_dir(tmp_path):
    write_run(tmp_path / "data", audit_run())
    return tmp_path / "data"


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _f(text):
    return None if text == "" else float(text)


def test_audit_numbers_match_the_hand_checked_log(data_dir, tmp_path):
    out = tmp_path / "report"
    res = runner.invoke(app, ["audit", "--data-dir", str(data_dir), "--out", str(out), "--window", "2"])
    assert res.exit_code == 0, res.output
    series = {(r["window"], r["skill"]): r for r in _rows(out / "difficulty.csv")}
    assert sorted(series) == [("0", "*"), ("0", "math"), ("1", "*"), ("1", "math"), ("2", "*"), ("2", "logic"), ("2", "math")]
    w0 = series[("0", "*")]  # env-a, env-b
    assert (w0["first_env"], w0["last_env"], w0["environments"], w0["validated"], w0["valid"]) == ("env-a", "env-b", "2", "2", "2")
    assert _f(w0["win_rate_plain"]) == pytest.approx(0.375)
    assert _f(w0["win_rate_hinted"]) == pytest.approx(1.0)
    assert _f(w0["regret"]) == pytest.approx(0.625)
    assert _f(w0["designer_reward"]) == pytest.approx(0.6)
    assert _f(w0["validation_pass_rate"]) == pytest.approx(1.0)
    assert _f(w0["novelty"]) == pytest.approx(0.42)
    w1 = series[("1", "*")]  # env-c (syntax error), env-d (too easy)
    assert _f(w1["validation_pass_rate"]) == pytest.approx(0.5)
    assert _f(w1["win_rate_plain"]) == pytest.approx(1.0)
    assert _f(w1["regret"]) == pytest.approx(0.0)
    assert _f(w1["designer_reward"]) == pytest.approx(0.1)
    assert _f(w1["novelty"]) == pytest.approx(0.42)  # env-c has no novelty
    w2 = series[("2", "*")]  # env-e (duplicate), env-f (logic)
    assert (w2["validated"], w2["valid"], w2["accepted"]) == ("2", "2", "1")
    assert _f(w2["novelty"]) == pytest.approx((0.01 + 0.42) / 2)
    assert _f(series[("2", "logic")]["regret"]) == pytest.approx(0.5)
    assert series[("2", "math")]["win_rate_plain"] == ""  # env-e was never played

    envs = {r["env_id"]: r for r in _rows(out / "environments.csv")}
    assert list(envs) == ["env-a", "env-b", "env-c", "env-d", "env-e", "env-f"]
    assert {e: r["verdict"] for e, r in envs.items()} == {
        "env-a": "accepted", "env-b": "accepted", "env-c": "rejected", "env-d": "accepted", "env-e": "rejected", "env-f": "accepted"}
    assert {e: r["frontier"] for e, r in envs.items()} == {
        "env-a": "in band", "env-b": "below band", "env-c": "", "env-d": "too easy", "env-e": "", "env-f": "in band"}
    assert (envs["env-c"]["error_kind"], envs["env-c"]["failed_check"]) == ("syntax", "parse")
    assert (envs["env-e"]["error_kind"], envs["env-e"]["nearest_env_id"]) == ("duplicate", "env-a")
    assert (envs["env-f"]["repair_of"], envs["env-f"]["parents"], envs["env-f"]["plays_plain"]) == ("env-c", '["env-a"]', "2")
    assert envs["env-b"]["plays_plain"] == "4" and _f(envs["env-b"]["regret"]) == pytest.approx(0.75)

    # the terminal summary names the same findings
    assert "syntax" in res.output and "duplicate" in res.output and "v1" in res.output
    page = (out / "report.html").read_text()
    assert "<script>" in page and not re.search(r"<script[^>]*\bsrc=", page)  # plotly.js inlined: opens offline
    assert "Plotly.newPlot" in page
    for div in ("fig-difficulty", "fig-frontier", "fig-rejections", "fig-regret"):
        assert f'id="{div}"' in page


def test_audit_model_rejections_frontier_top_regret_policies(data_dir):
    log = open_event_log(RUN_ID, data_dir=data_dir)
    try:
        a = build_audit(log, window=2)
    finally:
        log.close()
    assert a.verdicts == {"accepted": 4, "rejected": 2}
    assert a.rejections == [
        {"error_kind": "duplicate", "failed_check": "novelty", "count": 1},
        {"error_kind": "syntax", "failed_check": "parse", "count": 1},
    ]
    occ = {r["window"]: r for r in a.frontier if r["skill"] == "*"}
    assert (occ[0]["in band"], occ[0]["below band"], occ[0]["estimated"]) == (1, 1, 2)
    assert (occ[1]["too easy"], occ[1]["estimated"], occ[1]["in_band_share"]) == (1, 1, 0.0)
    assert (occ[2]["in band"], occ[2]["in_band_share"]) == (1, 1.0)
    # regret 0.75, then the 0.5 tie broken by designer reward (0.9 before 0.8), then 0.0
    assert [t["env_id"] for t in a.top_regret] == ["env-b", "env-a", "env-f", "env-d"]
    f = a.top_regret[2]
    assert (f["parents"], f["repair_chain"]) == (["env-a"], ["env-c"])
    assert a.top_regret[1]["used_by"] == ["env-f"]
    assert [(p["version"], p["parent_version"], p["metrics"]) for p in a.policies] == [("v1", "v0", {"loss": 0.25})]
    assert a.counts["RolloutCompleted"] == 4 + 8 + 4 + 4 and a.events == sum(a.counts.values())


def test_audit_until_offset_and_time(data_dir):
    log = open_event_log(RUN_ID, data_dir=data_dir)
    try:
        records = list(log.read({}))
        # stop just after env-b's RegretEstimated
        cut = next(r.offset for r in records if r.envelope.type == "RegretEstimated" and r.envelope.key == "env-b") + 1
        a = build_audit(log, until=cut, window=2)
        assert a.events == cut
        assert [e["env_id"] for e in a.envs] == ["env-a", "env-b"]
        assert a.policies == [] and a.rejections == []
        t = records[cut - 1].envelope.occurred_at
        b = build_audit(log, until=t, window=2)
        assert [e["env_id"] for e in b.envs] == ["env-a", "env-b"] and b.series == a.series
    finally:
        log.close()


def test_audit_is_byte_identical_apart_from_the_timestamp(data_dir, tmp_path):
    outs = []
    for name in ("one", "two"):
        res = runner.invoke(app, ["audit", "--data-dir", str(data_dir), "--out", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        outs.append(tmp_path / name)
    for f in ("difficulty.csv", "environments.csv"):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes()
    pages = [re.sub(rb'<p class="muted" id="generated">[^<]*</p>', b"", (o / "report.html").read_bytes()) for o in outs]
    assert pages[0] == pages[1]
    stamps = [re.findall(rb'id="generated">Generated ([^<]*)<', (o / "report.html").read_bytes()) for o in outs]
    assert all(len(s) == 1 for s in stamps)


def test_audit_bad_until_is_one_line_error(data_dir):
    res = runner.invoke(app, ["audit", "--data-dir", str(data_dir), "--until", "yesterday-ish"])
    assert res.exit_code == 2
    assert "--until" in res.output and "Traceback" not in res.output


def test_csv_text_cells_cannot_start_a_formula(tmp_path):
    """environments.csv and difficulty.csv: a text cell a spreadsheet would run as a formula
    (leading = + - @, tab, carriage return) gets a leading quote; numbers (negative ones too)
    are written as numbers."""
    from dashboard_support import proposed, scored, started, validated

    hostile = {
        "=HYPERLINK(\"http://evil.example\",\"click\")": "=",
        "+1+cmd|' /C calc'!A0": "+",
        "-2+3": "-",
        "@SUM(A1:A9)": "@",
        "\tTAB": "\t",
        "\rCR": "\r",
    }
    ev = [started()]
    for i, skill in enumerate(hostile):
        env_id = f"env-{i}"
        ev += [proposed(env_id, skill=skill), validated(env_id, nearest="=cmd()" if i == 0 else None),
               *scored(env_id, [1, 0], [1, 1], -0.5, skill=skill)]
    ev += [proposed("@env-odd", skill="plain"), validated("@env-odd", valid=False, accepted=False, error_kind="syntax",
                                                          failed_check="parse", novelty=None, novel=None)]
    write_run(tmp_path / "data", ev)
    out = tmp_path / "report"
    res = runner.invoke(app, ["audit", "--data-dir", str(tmp_path / "data"), "--out", str(out), "--window", "2"])
    assert res.exit_code == 0, res.output
    envs = {r["env_id"]: r for r in _rows(out / "environments.csv")}
    assert set(envs) == {f"env-{i}" for i in range(len(hostile))} | {"'@env-odd"}
    for i, skill in enumerate(hostile):
        row = envs[f"env-{i}"]
        assert row["skill"] == "'" + skill, row["skill"]
        assert row["designer_reward"] == "-0.5" and _f(row["designer_reward"]) == -0.5  # a number, untouched
        assert row["regret"] == "0.5" and row["plays_plain"] == "2"
    assert envs["env-0"]["nearest_env_id"] == "'=cmd()" and envs["'@env-odd"]["verdict"] == "rejected"
    series = _rows(out / "difficulty.csv")
    assert {r["skill"] for r in series} == {"*", "plain", *("'" + s for s in hostile)}
    assert any(r["last_env"] == "'@env-odd" for r in series)
    assert all(_f(r["designer_reward"]) == -0.5 for r in series if r["designer_reward"])
    # no cell of either file starts a formula
    for name in ("environments.csv", "difficulty.csv"):
        with open(out / name, newline="") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    assert not cell.startswith(("=", "+", "@", "\t", "\r")), (name, cell)
                    assert not cell.startswith("-") or _f(cell) is not None, (name, cell)
