"""`spade-engine compare RUN_A RUN_B` against a hand-built pair of logs: every number below is
worked out by hand from the events written here (held-out accuracy paired on item ids, the
paired difference and McNemar's test, frontier occupancy, compute)."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.compare.summary import CompareError, compare_runs, mcnemar_p
from spade_engine.events import (
    EnvironmentProposed,
    EnvironmentValidated,
    Generation,
    HintWritten,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    SqliteEventLog,
    Turn,
    make_envelope,
)
from spade_engine.events.catalogue import EvaluationCompleted
from spade_engine.events.store import DataDir

runner = CliRunner()
A, B = "run-20260101-000000-aaaaaa", "run-20260102-000000-bbbbbb"


def _gen(n: int) -> Generation:
    return Generation(prompt_token_ids=[1, 2], completion_token_ids=list(range(n)), logprobs=[-0.5] * n)


def _eval(run, version, task, ids, correct, k=1):
    n = len(ids)
    return make_envelope(EvaluationCompleted(
        evaluation_id=f"{run}-{version}", suite="reasoning-gym", task=task, items=n, seed=0, k=k, temperature=0.0 if k == 1 else 0.6,
        greedy=k == 1, correct=sum(correct), accuracy=sum(correct) / (n * k), ci_low=0.0, ci_high=1.0, policy_version=version,
        checkpoint_sha256=None, model="m", item_seeds=list(range(n)), item_correct=correct, item_ids=ids, completion_tokens=7,
    ), run_id=run, producer="trainer-eval")


def _env(run, env_id, *, win, designer_tokens, hint_tokens, play_tokens, accepted=True):
    """One environment: its proposal, verdict, hint, 2 plain plays (one turn each) and regret."""
    out = [
        make_envelope(EnvironmentProposed(env_id=env_id, skill="s", difficulty=0.5, code="c", code_sha256="x", policy_version="v0",
                                          generation=_gen(designer_tokens) if designer_tokens else None), run_id=run, producer="t"),
        make_envelope(EnvironmentValidated(env_id=env_id, valid=True, accepted=accepted), run_id=run, producer="t"),
    ]
    if not accepted:
        return out
    out.append(make_envelope(HintWritten(env_id=env_id, hint="h", policy_version="v0", generation=_gen(hint_tokens)),
                             run_id=run, producer="t"))
    for i in range(2):
        out.append(make_envelope(RolloutCompleted(
            env_id=env_id, play_id=f"{env_id}-{i}", hinted=False, seed=i, policy_version="v0", episode_reward=0.0,
            turns=[Turn(observation="o", action="a", reward=0.0, generation=_gen(play_tokens))]), run_id=run, producer="t"))
    out.append(make_envelope(RegretEstimated(env_id=env_id, skill="s", plain_rewards=[0.0], hinted_rewards=[0.0],
                                             win_rate_plain=win, win_rate_hinted=win, regret=0.0, designer_reward=0.0),
                             run_id=run, producer="t"))
    return out


def _update(run, step, tokens):
    return make_envelope(PolicyUpdated(version=f"v{step}", parent_version=f"v{step - 1}", checkpoint=None, step=step,
                                       metrics={"tokens": float(tokens)}), run_id=run, producer="trainer")


GCD_IDS = [f"gcd/{2**31 + i}" for i in range(6)]


def write_pair(data):
    """Run A (designer, band [0.4, 0.6]) and run B (a fixed pool, band [0.3, 0.7])."""
    a = [make_envelope(RunStarted(config={"reward": {"band_low": 0.4, "band_high": 0.6}}, engine_version="t", seed=0),
                       run_id=A, producer="t")]
    a += _env(A, "a-e0", win=0.5, designer_tokens=10, hint_tokens=3, play_tokens=4)     # in band
    a += _env(A, "a-e1", win=0.1, designer_tokens=20, hint_tokens=3, play_tokens=5)     # too hard
    a += _env(A, "a-e2", win=0.9, designer_tokens=30, hint_tokens=3, play_tokens=6)     # too easy
    a += _env(A, "a-e3", win=0.0, designer_tokens=40, hint_tokens=0, play_tokens=0, accepted=False)
    a += [_update(A, 1, 100), _update(A, 2, 150)]
    # A evaluated v0 and v2; the latest (v2) is compared: gcd on 6 items, maze on 2 (k = 2), a task B lacks
    a += [_eval(A, "v0", "gcd", GCD_IDS, [0, 0, 0, 0, 0, 0])]
    a += [_eval(A, "v2", "gcd", GCD_IDS, [1, 1, 0, 0, 1, 0]),
          _eval(A, "v2", "maze", ["maze/1", "maze/2"], [2, 0], k=2),
          _eval(A, "v2", "lcm", ["lcm/1"], [1])]
    b = [make_envelope(RunStarted(config={"reward": {"band_low": 0.3, "band_high": 0.7},
                                          "loop": {"env_source": "reasoning-gym:gcd?size=4"}}, engine_version="t", seed=0),
                       run_id=B, producer="t")]
    b += _env(B, "b-e0", win=0.35, designer_tokens=0, hint_tokens=2, play_tokens=8)     # in band (0.3-0.7)
    b += _env(B, "b-e1", win=0.65, designer_tokens=0, hint_tokens=2, play_tokens=8)     # in band
    b += [_update(B, 1, 90), _update(B, 2, 95), _update(B, 3, 120)]
    # B evaluated gcd on 5 of A's 6 items plus one A never saw, and maze with k = 2
    b += [_eval(B, "v3", "gcd", GCD_IDS[1:] + ["gcd/9"], [0, 1, 1, 1, 1, 1]),
          _eval(B, "v3", "maze", ["maze/2", "maze/1"], [1, 2], k=2),
          _eval(B, "v3", "knights_knaves", ["kk/1"], [0])]
    for run, events in ((A, a), (B, b)):
        log = SqliteEventLog(DataDir(data).log_path(run), run)
        log.append(events)
        log.close()


@pytest.fixture()
def pair(tmp_path):
    data = tmp_path / "data"
    write_pair(data)
    return data


def _logs(data):
    return SqliteEventLog(DataDir(data).log_path(A), A), SqliteEventLog(DataDir(data).log_path(B), B)


def test_numbers_match_the_hand_built_logs(pair):
    la, lb = _logs(pair)
    try:
        c = compare_runs(la, lb)
    finally:
        la.close()
        lb.close()
    acc = c.accuracy
    assert (acc.version_a, acc.version_b) == ("v2", "v3")
    assert [t.label for t in acc.tasks] == ["reasoning-gym/gcd", "reasoning-gym/maze"]
    assert acc.only_a == ["reasoning-gym/lcm"] and acc.only_b == ["reasoning-gym/knights_knaves"]
    gcd, maze = acc.tasks
    # common gcd items: ids 1..5. A: [1, 0, 0, 1, 0] -> 2/5; B: [0, 1, 1, 1, 1] -> 4/5
    assert (gcd.items, gcd.items_a, gcd.items_b) == (5, 6, 6)
    assert gcd.accuracy_a == pytest.approx(0.4) and gcd.accuracy_b == pytest.approx(0.8)
    assert (gcd.a_only, gcd.b_only, gcd.both, gcd.neither) == (1, 3, 1, 0)
    # differences B - A per item: -1, 1, 1, 0, 1 -> mean 0.4, sample sd sqrt(0.8)
    half = 1.959963984540054 * math.sqrt(0.8 / 5)
    assert gcd.delta == pytest.approx(0.4)
    assert (gcd.delta_low, gcd.delta_high) == (pytest.approx(0.4 - half), pytest.approx(0.4 + half))
    # McNemar exact: 1 vs 3 discordant -> 2 * P(X <= 1 | n=4) = 2 * 5/16
    assert gcd.mcnemar_p == pytest.approx(10 / 16)
    # maze, k = 2, paired by id whatever the order: A maze/1 2/2, maze/2 0/2; B maze/1 2/2, maze/2 1/2
    assert maze.accuracy_a == pytest.approx(0.5) and maze.accuracy_b == pytest.approx(0.75)
    assert maze.delta == pytest.approx(0.25) and maze.mcnemar_p is None and (maze.k_a, maze.k_b) == (2, 2)
    assert acc.macro_a == pytest.approx(0.45) and acc.macro_b == pytest.approx(0.775)
    assert acc.micro_a == pytest.approx((0.4 * 5 + 0.5 * 2) / 7)
    # frontier: A band [0.4, 0.6]: 0.5 in band, 0.1 too hard, 0.9 too easy; B band [0.3, 0.7]: both in band
    assert c.a.frontier.estimated == 3 and c.a.frontier.buckets == {
        "too hard": 1, "below band": 0, "in band": 1, "above band": 0, "too easy": 1}
    assert c.a.frontier.in_band_share == pytest.approx(1 / 3)
    assert c.b.frontier.band == (0.3, 0.7) and c.b.frontier.in_band_share == 1.0
    # compute: A agent 2*(4+5+6) = 30, hints 9, designer 10+20+30+40 = 100; B agent 32, hints 4, designer 0
    ca, cb = c.a.compute, c.b.compute
    assert (ca.environments, ca.accepted, ca.plays, ca.updates) == (4, 3, 6, 2)
    assert (ca.agent_tokens, ca.hint_tokens, ca.designer_tokens, ca.completion_tokens) == (30, 9, 100, 139)
    assert (ca.trained_tokens, ca.eval_tokens) == (250, 28)
    assert (cb.environments, cb.plays, cb.updates, cb.completion_tokens, cb.trained_tokens) == (2, 4, 3, 36, 305)
    assert c.b.env_source == "reasoning-gym:gcd?size=4" and c.a.env_source == "designer"


def test_chosen_versions_and_errors(pair):
    la, lb = _logs(pair)
    try:
        c = compare_runs(la, lb, version_a="v0")
        (gcd,) = c.accuracy.tasks  # v0 evaluated gcd only
        assert gcd.accuracy_a == 0.0 and gcd.accuracy_b == pytest.approx(0.8) and gcd.a_only == 0 and gcd.b_only == 4
        with pytest.raises(CompareError, match="no evaluation of policy version 'v7'.*evaluated: v0, v2"):
            compare_runs(la, lb, version_a="v7")
    finally:
        la.close()
        lb.close()
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(0, 5) == pytest.approx(2 / 32) and mcnemar_p(3, 3) == 1.0


def test_cli_table_json_and_offline_html(pair, tmp_path):
    page = tmp_path / "cmp" / "compare.html"
    res = runner.invoke(app, ["compare", A, B[:14], "--data-dir", str(pair), "--html", str(page)])
    assert res.exit_code == 0, res.output
    # not a terminal: one '# title' + TSV block per table on stdout, remarks on stderr
    blocks = {b.splitlines()[0]: [line.split("\t") for line in b.splitlines()[1:]] for b in res.stdout.strip().split("\n\n")}
    acc = blocks["# held-out accuracy (reasoning-gym, paired on items): A v2 vs B v3"]
    assert acc[0] == ["task", "items", "A", "B", "B-A", "95% CI", "A/B only", "p"]
    gcd = next(row for row in acc if row[0] == "gcd")
    assert gcd[4] == "+0.400" and "0.625" in gcd and "1/3" in gcd
    assert any("139" in row for row in blocks["# runs"])
    assert f"wrote {page}" in res.stderr and "wrote" not in res.stdout
    html = page.read_text()
    assert 'id="fig-accuracy"' in html and 'id="fig-delta"' in html and 'id="fig-frontier-compute"' in html
    assert "<script src=" not in html and "Plotly" in html  # plotly.js is inlined: opens offline
    res = runner.invoke(app, ["compare", A, B, "--data-dir", str(pair), "--json"])
    doc = json.loads(res.output)
    assert doc["accuracy"]["tasks"][0]["delta"] == pytest.approx(0.4) and doc["b"]["compute"]["updates"] == 3
    assert doc["a"]["frontier"]["in_band_share"] == pytest.approx(1 / 3)


def test_runs_without_evaluations_are_compared_on_frontier_and_compute(pair, tmp_path):
    """Frontier and compute need no evaluation: a run without one is compared on them, and a note
    says why accuracy is not, with advice that works for that run (the simulation policy has no
    model to evaluate; a model run gets the eval command)."""
    empty = "run-20260103-000000-cccccc"
    log = SqliteEventLog(DataDir(pair).log_path(empty), empty)
    log.append([make_envelope(RunStarted(config={}, engine_version="t", seed=0), run_id=empty, producer="t")])
    log.close()
    res = runner.invoke(app, ["compare", A, empty, "--data-dir", str(pair), "--html", str(tmp_path / "c.html")])
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    blocks = {b.splitlines()[0]: b.splitlines()[1:] for b in res.stdout.strip().split("\n\n")}
    assert list(blocks) == ["# runs"], "no accuracy table without evaluations"
    assert any(row.startswith("in frontier band\t") for row in blocks["# runs"])
    assert f"held-out accuracy not compared: run {empty} has no held-out evaluation, and its policy (procedural" in res.stderr
    assert "spade-engine eval" not in res.stderr, "no eval advice for the simulation (it would fail)"
    html = (tmp_path / "c.html").read_text()
    assert 'id="fig-frontier-compute"' in html and 'id="fig-accuracy"' not in html and "Not compared: run" in html
    doc = json.loads(runner.invoke(app, ["compare", A, empty, "--data-dir", str(pair), "--json"]).output)
    assert doc["accuracy"] is None and empty in doc["accuracy_note"] and doc["b"]["frontier"]["estimated"] == 0
    # a model run without evaluations is told the command that evaluates it
    model_run = "run-20260104-000000-dddddd"
    log = SqliteEventLog(DataDir(pair).log_path(model_run), model_run)
    log.append([make_envelope(RunStarted(config={"policy": {"kind": "transformers", "model": "tiny:0"}}, engine_version="t",
                                         seed=0), run_id=model_run, producer="t")])
    log.close()
    res = runner.invoke(app, ["compare", model_run, empty, "--data-dir", str(pair)])
    assert res.exit_code == 0 and f"`spade-engine eval reasoning-gym --run {model_run}`" in res.stderr
    # the simulation run itself cannot be evaluated: said at once, before any suite is generated
    res = runner.invoke(app, ["eval", "reasoning-gym:gcd", "--run", empty, "--data-dir", str(pair)])
    assert res.exit_code == 2 and "its policy is procedural (the offline simulation)" in res.output
    # a version asked for that the run did not evaluate is still an error; so is a missing run
    res = runner.invoke(app, ["compare", A, B, "--version-a", "v9", "--data-dir", str(pair)])
    assert res.exit_code == 2 and "no evaluation of policy version 'v9'" in res.output
    res = runner.invoke(app, ["compare", A, "run-nope", "--data-dir", str(pair)])
    assert res.exit_code == 2
