"""The same seed gives the same run, event for event, apart from ids and times (issue: two runs
with the same --seed used to differ because per-environment seeds came from ids that hold the
run's random suffix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spade_engine.config import load_config
from spade_engine.engine.stages import env_key
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
