"""Curriculum replay with retraining: `spade-engine retrain OLD --model M` and
`spade-engine replay OLD --retrain --model M` drive the recorded environments, in recorded order,
through the real engine stages (sandboxed validation, hints, plays) with a fresh tiny model, into
a new run linked to the old one, with the trainer consuming the new run's plays."""

from __future__ import annotations

import string

import pytest
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.runs.retrain import RetrainError, recorded_curriculum, retrain_run

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
    res = runner.invoke(app, ["start", "--max-envs", "4", "--plays", "2", "--data-dir", str(data), "--config", str(cfg), "--no-progress",
                              "--seed", "0"])
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
    # (the tiny random model never solves these procedural environments, so its plain groups have
    # no reward variance and nothing is trained here: see the next test for training in between)
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


# One-turn environments a random byte-level model wins now and then (a reply with one of 15
# symbols), so its groups of plays have reward variance to learn from; no probe or garbage action
# of the validator (letters, digits, braces, unicode: sandbox/probes.py) contains such a
# character, and a digit other than the environment's own loses. A reply cut by the token limit never reaches the environment (agent_length, reward
# 0), and the random model seldom ends one by itself: the test stops each reply at its first
# letter or digit, so most replies are sent (with the symbols written before it); about 1 in 12
# wins, enough for groups with variance, whatever the prompt's exact tokens.
SYMBOL_ENV = """
class Symbol{i}Env:
    SYMBOLS = set("#$%&*+;<=>?@^|~")

    def reset(self, seed=None):
        return "{theme}: reply with text containing one of # $ % & * + ; < = > ? @ ^ | ~", {{}}

    def step(self, action):
        text = str(action)  # a symbol, and no digit but the environment's own (so a wrong answer of
        # the same shape, "#" and another digit, loses: the validator's replay check)
        ok = any(c in self.SYMBOLS for c in text) and all(d == "{i}" for d in text if d.isdigit())
        return ("Correct." if ok else "Wrong."), (1.0 if ok else 0.0), True, False, {{}}

    def solution(self):
        return ["#{i}"]
"""
THEMES = ["Harbour tides", "Violin strings", "Glacier maps", "Bakery orders"]


def _symbol_run(data, run):
    import hashlib

    from spade_engine.events import EnvironmentProposed, EnvironmentValidated, RunStarted, SqliteEventLog, make_envelope

    log = SqliteEventLog(DataDir(data).log_path(run), run)
    events = [make_envelope(RunStarted(config={}, engine_version="t", seed=0), run_id=run, producer="t")]
    for i, theme in enumerate(THEMES):
        code = SYMBOL_ENV.format(i=i, theme=theme)
        p = make_envelope(
            EnvironmentProposed(env_id=f"old-{i}", skill="symbols", difficulty=0.5, code=code,
                                code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version="v0"),
            run_id=run, producer="t",
        )
        v = make_envelope(EnvironmentValidated(env_id=f"old-{i}", valid=True, accepted=True, checks=[]),
                          run_id=run, producer="t", causation_id=p.event_id)
        events += [p, v]
    log.append(events)
    return log


def test_retrain_trains_between_environments(tmp_path):
    """The engine trains between environments (trainer.enabled): the groups of the first
    environments produce PolicyUpdated events, and later environments are proposed and played by
    the newer versions, a linear chain on the base model."""
    data = tmp_path / "data"
    old_log = _symbol_run(data, "run-20260101-000000-5ymb01")
    try:
        result = retrain_run(
            old_log, model="tiny:0", data_dir=data,
            overrides={
                "loop.plays_per_env": 6, "memory.novelty_threshold": 0.0,
                "policy.generation.agent.max_new_tokens": 8, "policy.generation.hinter.max_new_tokens": 8,
                "policy.generation.agent.stop": list(string.ascii_letters + string.digits),
                "trainer.batch_groups": 1, "trainer.micro_batch_size": 32, "trainer.device": "cpu",
                "trainer.learning_rate": 1e-3, "trainer.max_lag": 8,
                "sandbox.import_timeout_s": 30.0, "sandbox.step_timeout_s": 10.0, "sandbox.validate_timeout_s": 120.0,
            },
        )
    finally:
        old_log.close()
    assert result.reason == "max_envs" and result.environments == 4
    events = _events(data, result.run_id)
    accepted = [e.payload["env_id"] for e in events if e.type == "EnvironmentValidated" and e.payload["accepted"]]
    assert len(accepted) == 4, [e.payload for e in events if e.type == "EnvironmentValidated"]
    updates = [e.payload for e in events if e.type == "PolicyUpdated"]
    assert updates, "no group had reward variance: nothing was trained"
    assert [u["step"] for u in updates] == list(range(1, len(updates) + 1))
    assert all(u["base_model"] == "tiny:0" for u in updates)
    assert [u["parent_version"] for u in updates[1:]] == [u["version"] for u in updates[:-1]]
    assert len(result.updates) == len(updates)
    # every environment was trained at most once, and only after its plays were recorded
    trained = [env for u in updates for env in u["env_ids"]]
    assert len(trained) == len(set(trained)) and set(trained) <= set(accepted)
    # training happened *between* environments: a later environment was played by a new version
    order = [e for e in events if e.type in ("PolicyUpdated", "RolloutCompleted")]
    first_update = next(i for i, e in enumerate(order) if e.type == "PolicyUpdated")
    later_versions = {e.payload["policy_version"] for e in order[first_update:] if e.type == "RolloutCompleted"}
    assert later_versions & {u["version"] for u in updates}, later_versions
    assert [e for e in events if e.type == "RunStopped"][-1].payload["reason"] == "max_envs"


def test_start_train_needs_a_model(tmp_path):
    res = runner.invoke(app, ["start", "--train", "--max-envs", "1", "--data-dir", str(tmp_path / "d"), "--no-progress"])
    assert res.exit_code == 2 and "trainer.enabled needs a model to train" in res.output, res.output
    # nothing was recorded for a refused configuration
    assert DataDir(tmp_path / "d").runs() == []


def test_start_train_runs_the_inprocess_trainer(tmp_path):
    """`start --model M --train` records trainer.enabled and trains in the engine's process (the
    tiny model's random proposals are all invalid here, so there is nothing to train on yet)."""
    data = tmp_path / "d"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[policy]\nmax_new_tokens = 8\n[loop]\nmax_repairs = 0\n")
    res = runner.invoke(app, ["start", "--model", "tiny:0", "--train", "--max-envs", "1", "--data-dir", str(data),
                              "--config", str(cfg), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "training tiny:0 between environments" in res.output
    assert "0 policy updates (now v0)" in res.output
    (run,) = DataDir(data).runs()
    started = [e for e in _events(data, run) if e.type == "RunStarted"][0].payload
    assert started["config"]["trainer"]["enabled"] is True
