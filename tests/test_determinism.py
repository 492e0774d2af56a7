"""The same seed gives the same run, event for event, apart from ids and times (issue: two runs
with the same --seed used to differ because per-environment seeds came from ids that hold the
run's random suffix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.config import load_config
from spade_engine.engine.stages import env_key
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.runs.engine import open_engine

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

#: what differs between two runs of the same seed by design: identities and wall-clock times
VOLATILE = {"event_id", "causation_id", "occurred_at", "seconds", "step_seconds", "host", "producer", "rollout_ids", "sandbox_layers"}


def _normalise(value: Any, suffix: str) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v, suffix) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normalise(v, suffix) for v in value]
    if isinstance(value, str):
        return value.replace(suffix, "<run>")
    return value


def _run(data: Path, run_id: str, seed: int) -> list[tuple[str, Any]]:
    cfg = load_config(overrides={"seed": seed, "loop.max_envs": 6, "loop.plays_per_env": 2, "sandbox.workers": 1})
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True) as opened:
        assert opened.engine.run() == "max_envs"
        recs = list(opened.engine.log.read())
    return [(r.envelope.type, _normalise(r.envelope.payload, run_id[-6:])) for r in recs]


def test_env_key_drops_the_run_suffix():
    assert env_key("a1b2c3-e00004") == "e00004" and env_key("a1b2c3-e00004-r1") == "e00004-r1"
    assert env_key("env-0") == "env-0"  # ids of another shape are their own key


def test_same_seed_same_run_event_for_event(tmp_path: Path):
    a = _run(tmp_path / "a", "run-20260101-000000-aaaaaa", seed=5)
    b = _run(tmp_path / "b", "run-20260101-000000-bbbbbb", seed=5)
    c = _run(tmp_path / "c", "run-20260101-000000-cccccc", seed=6)
    types = [t for t, _ in a]
    assert types.count("EnvironmentProposed") >= 6 and "RegretEstimated" in types
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x == y, f"event {i} ({x[0]}) differs"
    assert [p for _, p in a] != [p for _, p in c]  # and the seed matters


def _started_and_validated(data: Path, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    log = open_event_log(run_id, data_dir=data)
    try:
        envs = [r.envelope for r in log.read()]
    finally:
        log.close()
    started = [e.payload for e in envs if e.type == "RunStarted"]
    first = next(e.payload for e in envs if e.type == "EnvironmentValidated")
    return started, first


def test_a_run_given_no_seed_draws_one_records_it_and_keeps_it(tmp_path: Path, monkeypatch):
    """No --seed, no seed in a file, no SPADE_SEED: each new run draws its seed (secrets), so the
    validator's seeds and probes for environment #0 differ from run to run and cannot be known in
    advance; the seed is recorded in RunStarted (and its config), shown by start and status, kept
    on resume, and `start --seed N` with the shown seed repeats the validation exactly."""
    monkeypatch.delenv("SPADE_SEED", raising=False)
    data = tmp_path / "d"
    args = ["start", "--new", "--max-envs", "1", "--plays", "1", "--data-dir", str(data), "--no-progress"]
    runs, seeds, validated = [], [], []
    for _ in range(2):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        run_id = DataDir(data).latest_run()
        assert f"starting new run {run_id} " in res.output  # the run just made, also within one second of the last
        started, first = _started_and_validated(data, run_id)
        (payload,) = started
        assert payload["seed"] == payload["config"]["seed"] and isinstance(payload["seed"], int)
        assert f"seed {payload['seed']} drawn for this run" in res.output and f"--seed {payload['seed']}" in res.output
        runs.append(run_id)
        seeds.append(payload["seed"])
        validated.append(first)
    assert seeds[0] != seeds[1]  # drawn afresh (a collision has probability 2**-31)
    assert validated[0]["validation_seeds"] != validated[1]["validation_seeds"]
    # resumed: the recorded seed, not a new one
    res = CliRunner().invoke(app, ["start", "--run", runs[0], "--max-envs", "2", "--plays", "1", "--data-dir", str(data), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "drawn for this run" not in res.output and f"seed {seeds[0]}" in res.output
    started, _ = _started_and_validated(data, runs[0])
    assert [p["seed"] for p in started] == [seeds[0], seeds[0]] and started[1]["resumed"]
    res = CliRunner().invoke(app, ["status", runs[0], "--data-dir", str(data)])
    assert res.exit_code == 0 and f"seed {seeds[0]}" in res.output, res.output
    # the shown seed repeats the run's validation inputs
    res = CliRunner().invoke(app, [*args, "--seed", str(seeds[1])])
    assert res.exit_code == 0 and "drawn for this run" not in res.output, res.output
    _, again = _started_and_validated(data, DataDir(data).latest_run())
    for key in ("validation_seeds", "probe_actions"):
        assert again[key] == validated[1][key], key
