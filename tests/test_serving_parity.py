"""bench/serving_parity.py, the check that a served version is the trained one, on a tiny model's
run: the transformers policy serves v1's merged weights, and the script's scoring of v1's plays
with the base weights plus v1's LoRA adapter must give back the log-probs the policy recorded
(float32 on both sides: equal to rounding), while the scoring with v0 must not (the update moved
them). A broken adapter path (wrong scale, wrong tensors, a version's adapter mixed up with
another's) shows up as a served gap the size of the update's shift."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


def test_the_served_version_scores_as_the_trained_adapter(tmp_path: Path) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "serving_parity.py"), "--smoke", "--data-dir", str(tmp_path)],
                         capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    result = json.loads(res.stdout.strip().splitlines()[-1])
    rows = {r["version"]: r for r in result["versions"]}
    assert set(rows) == {"v0", "v1"} and rows["v1"]["prev"] == "v0"
    assert rows["v0"]["served_gap"] < 1e-4 and rows["v1"]["served_gap"] < 1e-4, rows
    assert rows["v1"]["update_shift"] > 0.01 and rows["v1"]["prev_gap"] > 100 * max(rows["v1"]["served_gap"], 1e-5), rows
    assert result["worst_served_gap"] == rows["v1"]["served_gap"]


def test_a_run_without_adapters_is_one_clear_error(tmp_path: Path) -> None:
    from spade_engine.events import RunStarted, make_envelope
    from spade_engine.events.store import open_event_log

    log = open_event_log("run-plain", data_dir=tmp_path, create=True)
    log.append([make_envelope(RunStarted(config={"policy": {"model": "tiny:0"}}, engine_version="test", seed=0),
                              run_id="run-plain", producer="test")])
    log.close()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "serving_parity.py"), "--data-dir", str(tmp_path), "--run", "run-plain"],
                         capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
    assert res.returncode != 0 and "has no LoRA adapters" in res.stderr, res.stderr[-2000:]
