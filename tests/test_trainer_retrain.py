"""Curriculum replay with retraining: `spade-engine retrain OLD --model M` and
`spade-engine replay OLD --retrain --model M` drive the recorded environments, in recorded order,
through the real engine stages (sandboxed validation, hints, plays) with a fresh tiny model, into
a new run linked to the old one, with the trainer consuming the new run's plays."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.trainer.retrain import RetrainError, recorded_curriculum, retrain_run

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

runner = CliRunner()


def _events(data, run_id):
    log = open_event_log(run_id, data_dir=data)
    try:
        return [r.envelope for r in log.read()]
    finally:
        log.close()


def test_retrain_replays_recorded_curriculum_into_a_linked_run(tmp_path):
    data = tmp_path / "data"
    cfg = tmp_path / "cfg.toml"
    # generous sandbox limits: a loaded CI machine must not turn valid environments into timeouts
    cfg.write_text(
        "[policy]\nmax_new_tokens = 8\n[loop]\nmax_repairs = 0\n[trainer]\nbatch_groups = 1\n"
        "[sandbox]\nimport_timeout_s = 30.0\nstep_timeout_s = 10.0\nvalidate_timeout_s = 120.0\n"
    )
    res = runner.invoke(app, ["start", "--max-envs", "4", "--plays", "2", "--data-dir", str(data), "--config", str(cfg), "--no-progress"])
    assert res.exit_code == 0, res.output
    old = DataDir(data).latest_run()
    log = open_event_log(old, data_dir=data)
    try:
        curriculum = recorded_curriculum(log)
    finally:
        log.close()
    assert curriculum, "the procedural run should accept at least one environment"

    res = runner.invoke(app, ["retrain", old, "--model", "tiny:0", "--max-envs", "2", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    runs = DataDir(data).runs()
    new = [r for r in runs if r != old][-1]
    assert f"new run {new} (parent {old})" in res.output
    events = _events(data, new)
    started = [e for e in events if e.type == "RunStarted"][0].payload
    assert started["parent_run_id"] == old
    assert started["policy"]["kind"] == "transformers" and started["policy"]["model"] == "tiny:0"
    # the recorded environments, in recorded order, with their code
    proposed = [e.payload for e in events if e.type == "EnvironmentProposed"]
    want = curriculum[:2]
    assert [p["code_sha256"] for p in proposed] == [c.code_sha256 for c in want]
    assert [p["skill"] for p in proposed] == [c.skill for c in want]
    assert all(p["designer"].startswith(f"replay:{old}/") for p in proposed)
    # new plays by the new model, with tokens and behaviour log-probs for the trainer
    plays = [e.payload for e in events if e.type == "RolloutCompleted"]
    accepted = [e.payload for e in events if e.type == "EnvironmentValidated" and e.payload["accepted"]]
    assert len(plays) == 4 * len(accepted)
    gens = [t["generation"] for p in plays for t in p["turns"] if t.get("generation")]
    assert gens and all(len(g["completion_token_ids"]) == len(g["logprobs"]) > 0 for g in gens)
    assert len([e for e in events if e.type == "RegretEstimated"]) == len(accepted)
    # the trainer consumed the new run: every PolicyUpdated is a linear chain on tiny:0
    updates = [e.payload for e in events if e.type == "PolicyUpdated"]
    for i, u in enumerate(updates):
        assert u["base_model"] == "tiny:0" and u["step"] == i + 1
    # the old run is untouched
    assert len(_events(data, old)) == len(_events(data, old))

    # the same through `replay --retrain`
    res = runner.invoke(app, ["replay", old, "--retrain", "--model", "tiny:1", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    newest = DataDir(data).runs()[-1]
    assert newest not in (old, new)
    ev2 = _events(data, newest)
    assert [e.payload["code_sha256"] for e in ev2 if e.type == "EnvironmentProposed"] == [c.code_sha256 for c in curriculum]
    assert [e for e in ev2 if e.type == "RunStarted"][0].payload["parent_run_id"] == old

    res = runner.invoke(app, ["replay", old, "--retrain", "--data-dir", str(data)])
    assert res.exit_code == 2 and "--model" in res.output


def test_retrain_of_a_run_without_accepted_environments_is_a_clear_error(tmp_path):
    from spade_engine.events import RunStarted, SqliteEventLog, make_envelope

    data = tmp_path / "data"
    run = "run-20260101-000000-aaaaaa"
    log = SqliteEventLog(DataDir(data).log_path(run), run)
    log.append([make_envelope(RunStarted(config={}, engine_version="t", seed=0), run_id=run, producer="t")])
    with pytest.raises(RetrainError, match="no accepted environments"):
        retrain_run(log, model="tiny:0", data_dir=data)
    log.close()
    res = runner.invoke(app, ["retrain", run, "--model", "tiny:0", "--data-dir", str(data)])
    assert res.exit_code == 2 and "no accepted environments" in res.output
