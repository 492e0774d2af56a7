"""Periodic held-out evaluation by the trainer (`[eval]`, `--eval-every N`): after every N-th
PolicyUpdated the trainer scores its new weights and records EvaluationCompleted into the run,
in process (`start --train`) and on its own (`spade-engine train`), with the right policy
versions and checkpoints, the same items for every version, once per version."""

from __future__ import annotations

import json

import pytest
from test_trainer_retrain import _symbol_run
from typer.testing import CliRunner

from spade_engine.blobs import BlobStore
from spade_engine.cli import app
from spade_engine.config import EvalConfig
from spade_engine.events import PolicyUpdated, SqliteEventLog, make_envelope
from spade_engine.events.catalogue import EvaluationCompleted
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.evaluation.periodic import PeriodicEvaluator, periodic_evaluation_id
from spade_engine.evaluation.seeds import is_eval_seed
from spade_engine.policy.protocol import Sample

runner = CliRunner()

CONFIG = """# an agent reply cut by its token limit scores 0 (as in the release): the random tiny model needs
# room to end a reply itself now and then, so the symbol environments keep their reward variance
[policy.generation.agent]
max_new_tokens = 64
temperature = 1.0
[policy.generation.hinter]
max_new_tokens = 8
temperature = 1.0
[loop]
max_repairs = 0
[memory]
novelty_threshold = 0.0
[trainer]
batch_groups = 1
micro_batch_size = 32
device = "cpu"
learning_rate = 1e-3
max_lag = 8
[eval]
suites = ["reasoning-gym:gcd,leg_counting"]
size = 3
max_new_tokens = 6
[sandbox]
import_timeout_s = 30.0
step_timeout_s = 10.0
validate_timeout_s = 120.0
"""


def _events(data, run_id):
    log = open_event_log(run_id, data_dir=data)
    try:
        return [r.envelope for r in log.read()]
    finally:
        log.close()


def _check_evaluations(events, every):
    """EvaluationCompleted for v0 and every `every`-th version, right after the update it scores."""
    updates = [e.payload for e in events if e.type == "PolicyUpdated"]
    evals = [e for e in events if e.type == "EvaluationCompleted"]
    assert updates, "the symbol environments have reward variance: something must be trained"
    due = ["v0"] + [u["version"] for u in updates if u["step"] % every == 0]
    assert [e.payload["policy_version"] for e in evals] == [v for v in due for _ in range(2)]
    assert [e.payload["task"] for e in evals] == ["gcd", "leg_counting"] * len(due)
    sha = {u["version"]: u["checkpoint"]["sha256"] for u in updates}
    for e in evals:
        p = e.payload
        assert e.producer == "trainer-eval" and p["policy_run_id"] == e.run_id and p["suite"] == "reasoning-gym"
        assert p["checkpoint_sha256"] == sha.get(p["policy_version"])  # None for v0, the base weights
        assert p["items"] == 3 and p["greedy"] and p["max_new_tokens"] == 6
        assert all(is_eval_seed(s) for s in p["item_seeds"])
    # the same items for every version (paired), one evaluation id per version
    by_task = {}
    for e in evals:
        by_task.setdefault(e.payload["task"], set()).add(tuple(e.payload["item_ids"]))
    assert all(len(ids) == 1 for ids in by_task.values())
    assert len({e.payload["evaluation_id"] for e in evals}) == len(due)
    # each evaluation follows the update it scores, before the next update
    order = [(e.type, e.payload.get("version") or e.payload.get("policy_version")) for e in events
             if e.type in ("PolicyUpdated", "EvaluationCompleted")]
    for v in due[1:]:
        i = order.index(("PolicyUpdated", v))
        assert order[i + 1] == ("EvaluationCompleted", v), order
    return due, evals


@pytest.mark.slow
@pytest.mark.sandbox
def test_inprocess_and_standalone_trainers_evaluate_every_n_updates(tmp_path):
    data = tmp_path / "data"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG)
    src = "run-20260101-000000-5ymb01"
    _symbol_run(data, src).close()

    # in process: start --train --eval-every 2 (environments from the symbol run)
    res = runner.invoke(app, ["start", "--new", "--env-source", f"archive:{src}", "--model", "tiny:0", "--train", "--eval-every", "2",
                              "--max-envs", "4", "--plays", "6", "--data-dir", str(data), "--config", str(cfg), "--no-progress",
                              "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert "held-out evaluation every 2 update(s) on reasoning-gym:gcd,leg_counting" in res.output
    run = [r for r in DataDir(data).runs() if r != src][-1]
    events = _events(data, run)
    assert next(e for e in events if e.type == "RunStarted").payload["config"]["eval"]["every"] == 2
    due, _ = _check_evaluations(events, every=2)
    assert len(due) >= 2, due

    # on its own: a run played without training, then `spade-engine train --eval-every 1`
    res = runner.invoke(app, ["start", "--new", "--env-source", f"archive:{src}", "--model", "tiny:0", "--max-envs", "4",
                              "--plays", "6", "--data-dir", str(data), "--config", str(cfg), "--no-progress", "--seed", "0"])
    assert res.exit_code == 0, res.output
    played = DataDir(data).runs()[-1]
    assert not [e for e in _events(data, played) if e.type in ("PolicyUpdated", "EvaluationCompleted")]
    res = runner.invoke(app, ["train", played, "--eval-every", "1", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    assert "v0 held-out: gcd" in res.output and "v1 held-out: gcd" in res.output
    events = _events(data, played)
    due, evals = _check_evaluations(events, every=1)

    # the recorded result is that version's: `eval --run R --version v1` gives the same answers
    v1 = next(e.payload for e in evals if e.payload["policy_version"] == "v1" and e.payload["task"] == "gcd")
    res = runner.invoke(app, ["eval", "reasoning-gym:gcd", "--run", played, "--version", "v1", "--size", "3",
                              "--max-new-tokens", "6", "--no-record", "--json", "--no-progress", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    (again,) = json.loads(res.stdout)["results"]
    for key in ("item_ids", "item_correct", "mean_score", "completion_tokens", "checkpoint_sha256", "policy_version"):
        assert again[key] == v1[key], key

    # a second trainer run: nothing new to train, nothing evaluated twice
    res = runner.invoke(app, ["train", played, "--eval-every", "1", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    assert [e for e in _events(data, played) if e.type == "EvaluationCompleted"] == [
        e for e in events if e.type == "EvaluationCompleted"]


class Recording:
    """A policy double that records which weights it was asked to load."""

    kind = "recording"
    context_window: int | None = None  # the Policy protocol's declared members
    on_progress = None
    trainable = True

    def __init__(self):
        self._version = "v0"
        self.loaded: list[tuple[str, str | None]] = []

    @property
    def version(self):
        return self._version

    def load_version(self, version, checkpoint, *, adapter=None):
        self.loaded.append((version, checkpoint))
        self._version = version

    def generate(self, requests):
        return [Sample(text="\\boxed{" + str(r.context.eval.answer) + "}", completion_token_ids=[1, 2]) for r in requests]

    def describe(self):
        return {"kind": self.kind, "model": "rec"}

    def tokenize(self, text):
        return None

    def close(self):
        pass


def test_evaluator_loads_each_due_checkpoint_and_records_once(tmp_path):
    run = "run-20260101-000000-ev0001"
    log = SqliteEventLog(DataDir(tmp_path).log_path(run), run)
    blobs = BlobStore(tmp_path / "blobs")
    refs = [blobs.put_bytes(f"weights {i}".encode()) for i in range(4)]
    updates = [PolicyUpdated(version=f"v{i + 1}", parent_version=f"v{i}", checkpoint=refs[i], step=i + 1) for i in range(4)]
    policy = Recording()
    cfg = EvalConfig(every=2, suites=["reasoning-gym:gcd"], size=2)
    seen: list[tuple[str, int, int]] = []
    ev = PeriodicEvaluator(cfg, log=log, blobs=blobs, policy=policy, on_progress=lambda *a: seen.append(a))
    try:
        assert ev.catch_up(None)[0].policy_version == "v0" and policy.loaded == []  # base weights: nothing to load
        assert seen[0][1:] == (0, 2) and seen[-1][1:] == (2, 2) and "gcd" in seen[-1][0]  # told while it scores
        assert ev.catch_up(None) == []  # once per process
        for u in updates:
            log.append([make_envelope(u, run_id=run, producer="trainer")])
            ev.after_update(u)
        assert [v for v, _ in policy.loaded] == ["v2", "v4"]
        assert [p for _, p in policy.loaded] == [str(blobs.resolve(refs[1])), str(blobs.resolve(refs[3]))]
        evals = [r.envelope.event() for r in log.read() if r.envelope.type == EvaluationCompleted.TYPE]
        assert [(e.policy_version, e.checkpoint_sha256, e.accuracy) for e in evals] == [
            ("v0", None, 1.0), ("v2", refs[1].sha256, 1.0), ("v4", refs[3].sha256, 1.0)]
        assert evals[1].evaluation_id == periodic_evaluation_id(run, "v2", cfg)
        # a restarted trainer whose last evaluation was lost evaluates the latest version, once
        n = len(evals)
        fresh = PeriodicEvaluator(cfg, log=log, blobs=blobs, policy=Recording())
        assert fresh.catch_up(updates[-1]) == []  # v4 is recorded
        ev.evaluate_version("v4", refs[3])  # recorded again: same event ids, so the log keeps one copy
        assert sum(1 for r in log.read() if r.envelope.type == EvaluationCompleted.TYPE) == n
        cfg3 = EvalConfig(every=3, suites=["reasoning-gym:gcd"], size=2)
        assert PeriodicEvaluator(cfg3, log=log, blobs=blobs, policy=Recording()).catch_up(updates[2])[0].policy_version == "v3"
        # a corrupt checkpoint is refused, never evaluated
        blobs.resolve(refs[0]).write_bytes(b"tampered")
        with pytest.raises(Exception, match="corrupt"):
            PeriodicEvaluator(EvalConfig(every=1, suites=["reasoning-gym:gcd"], size=2), log=log, blobs=blobs,
                              policy=Recording()).after_update(updates[0])
    finally:
        log.close()


def test_eval_config_refuses_bad_values():
    from spade_engine.errors import ConfigError
    from spade_engine.config import load_config

    with pytest.raises(ConfigError, match="eval.every"):
        load_config(None, overrides={"eval.every": -1})
    with pytest.raises(ConfigError, match="eval.prompt"):
        load_config(None, overrides={"eval.prompt": "boxed-v9"})
    from typing import get_args

    from spade_engine.evaluation.periodic import eval_settings
    from spade_engine.evaluation.runner import EVAL_PROMPTS

    assert set(get_args(EvalConfig.model_fields["prompt"].annotation)) == set(EVAL_PROMPTS)  # every named prompt, no other
    assert eval_settings(load_config(None, overrides={"eval.prompt": "boxed-v2"}).eval).prompt == "boxed-v2"
    assert eval_settings(load_config(None).eval).prompt == "boxed-v1"
    with pytest.raises(ConfigError):
        PeriodicEvaluator(EvalConfig(every=0), log=None, blobs=None, policy=Recording())  # type: ignore[arg-type]
