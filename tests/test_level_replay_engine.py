"""Level replay and rounds in the single-process loop (`start`), in the real sandbox with the
procedural policy: every round and replay is in the log with its estimate, `replay --verify`
rebuilds equal projections, every estimate and every replay choice recomputes exactly, the
archive keeps each environment's win-rate series, and a run stopped and resumed makes the same
replay choices as one run straight through with the same seed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from engine_support import check_rounds
from spade_engine.archive.queries import estimates_of, list_environments
from spade_engine.archive.replay import open_projections
from spade_engine.cli import app
from spade_engine.engine.level_replay import verify_replays
from spade_engine.engine.regret_replay import verify_regrets
from spade_engine.events.store import DataDir, open_event_log

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

runner = CliRunner()

CONFIG = """
[policy.procedural]
defect_rate = 0.0
[loop]
plays_per_env = 2
rounds = 2
designer_batch = 1  # one new slot per design step, so replays interleave with the first six environments
[replay]
enabled = true
p = 0.6
min_candidates = 2
[sandbox]
workers = 2
"""


def _start(data, cfg, *extra):
    res = runner.invoke(app, ["start", "--data-dir", str(data), "--config", str(cfg), "--no-progress", "--seed", "11", *extra])
    assert res.exit_code == 0, res.output
    return res


def _choices(data, run_id):
    log = open_event_log(run_id, data_dir=data)
    try:
        return [(e.slot, e.env_id.split("-", 1)[1], e.round, e.score, e.rank, e.staleness, e.probability)
                for e in (r.envelope.event() for r in log.read() if r.envelope.type == "EnvironmentReplayed")]
    finally:
        log.close()


def test_level_replay_run_verifies_and_resumes_to_the_same_choices(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG)
    data = tmp_path / "data"
    _start(data, cfg, "--max-envs", "6", "--preset", "laptop")
    run_id = DataDir(data).latest_run()
    log = open_event_log(run_id, data_dir=data)
    try:
        started = next(r.envelope.event() for r in log.read() if r.envelope.type == "RunStarted")
        assert started.config["loop"]["rounds"] == 2 and started.config["replay"]["enabled"] is True
        counts = check_rounds(log, plain=2, hinted=2, rounds=2)
        assert counts["accepted"] == 6 and counts["replays"] >= 2, counts
        assert verify_regrets(log) == []
        assert verify_replays(log) == []
    finally:
        log.close()

    res = runner.invoke(app, ["replay", run_id, "--verify", "--data-dir", str(data)])
    assert res.exit_code == 0 and "equal" in res.output, res.output
    res = runner.invoke(app, ["replay", run_id, "--verify", "--json", "--data-dir", str(data)])
    assert res.exit_code == 0 and json.loads(res.output)["verify"] == "equal"
    res = runner.invoke(app, ["config", "show", "--run", run_id, "--data-dir", str(data), "--json"])
    shown = json.loads(res.output)
    assert shown["loop.rounds"] == {"value": 2, "source": "recorded"}

    # the archive keeps the series: one estimate per round, replays counted
    with open_projections(DataDir(data).run_dir(run_id)) as projs:
        rows = [r for r in list_environments(projs.archive.engine, limit=None) if r["verdict"] == "accepted"]
        replayed = [r for r in rows if r["replays"]]
        assert replayed and all(r["rounds"] == 2 + r["replays"] for r in rows)
        series = estimates_of(projs.archive.engine, replayed[0]["env_id"])
        assert [e["round"] for e in series] == list(range(2 + replayed[0]["replays"]))
        assert [e["replay"] for e in series][:2] == [False, False] and all(e["replay"] for e in series[2:])
        assert series[1]["designer_final"] and not series[0]["designer_final"]
        assert replayed[0]["win_rate_plain"] == series[-1]["win_rate_plain"]  # the latest round's
        assert replayed[0]["designer_reward"] == series[1]["designer_reward"]  # the designer-final one's
        assert replayed[0]["plays_plain"] == 2 * len(series)

    # stopped after 3 environments and resumed to 6: the same choices as straight through
    data2 = tmp_path / "data2"
    _start(data2, cfg, "--max-envs", "3")
    first = DataDir(data2).latest_run()
    _start(data2, cfg, "--max-envs", "6", "--run", first)
    assert _choices(data2, first) == _choices(data, run_id)
    log = open_event_log(first, data_dir=data2)
    try:
        assert verify_replays(log) == [] and verify_regrets(log) == []
    finally:
        log.close()


def test_level_replay_by_positive_value_loss_on_the_release_win_signal(tmp_path):
    """`replay.score = "pvl"` with the release's win signal (`mean_reward`) and step-timeout scope:
    every estimate records its signal, value and pvl and recomputes exactly, each replay's score is
    the pvl its environment's latest estimate recorded before the choice, and `replay --verify`
    rebuilds equal projections."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG.replace("min_candidates = 2\n", "min_candidates = 2\nscore = \"pvl\"\n")
                   + "[reward]\nwin_signal = \"mean_reward\"\nstep_timeout_scope = \"regret\"\n")
    data = tmp_path / "data"
    _start(data, cfg, "--max-envs", "5")
    run_id = DataDir(data).latest_run()
    log = open_event_log(run_id, data_dir=data)
    try:
        started = next(r.envelope.event() for r in log.read() if r.envelope.type == "RunStarted")
        assert started.config["reward"]["win_signal"] == "mean_reward" and started.config["replay"]["score"] == "pvl"
        assert verify_regrets(log) == [] and verify_replays(log) == []
        estimates: dict[str, list] = {}
        for rec in log.read():
            if rec.envelope.type == "RegretEstimated":
                est = rec.envelope.event()
                assert est.win_signal == "mean_reward" and est.pvl is not None and est.value is not None
                estimates.setdefault(est.env_id, []).append((rec.offset, est))
        choices = [r.envelope.event() for r in log.read() if r.envelope.type == "EnvironmentReplayed"]
        assert choices, "no replay in the run"
        for c in choices:
            before = [e for off, e in estimates[c.env_id] if off < c.basis["0"]]
            assert c.score_kind == "pvl" and c.score == before[-1].pvl
            if len(before) > 1:  # a later round is compared with the previous smoothed win signal
                assert before[-1].value == before[-2].win_rate_smoothed
    finally:
        log.close()
    res = runner.invoke(app, ["replay", run_id, "--verify", "--data-dir", str(data)])
    assert res.exit_code == 0 and "equal" in res.output, res.output


def test_a_design_batch_leaves_level_replay_its_slots(tmp_path):
    """With design batches of four, as with one, every slot gets its own chance to replay: once
    the pool of replayable environments is full, each slot whose seeded draw says replay
    (``u < replay.p``) is a replay and every other slot a new environment. (Before, a batch of
    four new slots took one draw between them: about a quarter of the replays ``replay.p`` asks
    for.)"""
    import random

    from spade_engine.engine.seeds import derive_seed

    def draw(t: int) -> float:
        return random.Random(derive_seed(11, "level-replay", t)).random()

    for batch in (1, 4):
        cfg = tmp_path / f"cfg{batch}.toml"
        cfg.write_text(CONFIG.replace("designer_batch = 1", f"designer_batch = {batch}"))
        data = tmp_path / f"data{batch}"
        _start(data, cfg, "--max-envs", "12")
        run_id = DataDir(data).latest_run()
        slots = [c[0] for c in _choices(data, run_id)]
        total = 12 + len(slots)
        assert len(slots) >= 8, (batch, slots)
        assert slots == [t for t in range(slots[0], total) if draw(t) < 0.6], (batch, slots)
        log = open_event_log(run_id, data_dir=data)
        try:
            assert verify_replays(log) == []
        finally:
            log.close()
