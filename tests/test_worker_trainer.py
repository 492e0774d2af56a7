"""`spade-engine worker trainer` on the real Kafka broker: a separate process that trains from
the log only, publishes PolicyUpdated with a checkpoint in the blob store, and, restarted as a new
process, resumes from the recorded version and offsets (no group trained twice).

The rollouts are played by a real tiny TransformersPolicy (random weights built from a config,
no download) through :mod:`trainer_driver`, so they carry real token ids and log-probs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spade_engine.blobs import BlobStore
from spade_engine.config import load_config
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.events import PolicyUpdated, RunStarted, make_envelope
from spade_engine.events.kafka.log import KafkaEventLog
from spade_engine.events.store import DataDir, new_run_id
from trainer_driver import play_round

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


def _trainer(bootstrap: str, run_id: str, data: Path) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "spade_engine.cli", "worker", "trainer", "--backend", "kafka", "--bootstrap", bootstrap,
           "-d", str(data), "--run", run_id, "--until-idle", "6", "--wait", "60"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=300)
    return p.returncode, p.stdout + p.stderr  # the worker reports on the console (stderr)


def _updates(log: KafkaEventLog) -> list[PolicyUpdated]:
    return sorted((r.envelope.event() for r in log.read() if r.envelope.type == "PolicyUpdated"), key=lambda u: u.step)


def test_trainer_worker_trains_from_kafka_and_a_new_process_resumes(kafka_bootstrap: str, tmp_path: Path) -> None:
    run_id = new_run_id()
    data = tmp_path / "data"
    cfg = load_config(overrides={
        "policy.kind": "transformers", "policy.model": "tiny:0", "log.backend": "kafka",
        "trainer.device": "cpu", "trainer.batch_groups": 4, "trainer.micro_batch_size": 32,
        "trainer.learning_rate": 1e-2, "trainer.max_lag": 8,
    })
    log = KafkaEventLog(kafka_bootstrap, run_id, create=True, partitions=2)
    try:
        log.append([make_envelope(RunStarted(config=cfg.model_dump(mode="json"), engine_version="test", seed=0),
                                  run_id=run_id, producer="test")])
        policy = TransformersPolicy.from_tiny(seed=0)
        play_round(policy, log, run_id, 0)  # 4 environments x 8 plays: one batch

        rc, out = _trainer(kafka_bootstrap, run_id, data)
        assert rc == 0, out[-3000:]
        assert "published v1 (4 environments)" in out and "stopped after 1 updates" in out, out
        (u1,) = _updates(log)
        assert u1.step == 1 and sorted(u1.env_ids) == [f"env-000-{e}" for e in range(4)]
        assert u1.checkpoint is not None
        blobs = BlobStore(DataDir(data).blobs_dir)
        assert blobs.resolve(u1.checkpoint).stat().st_size > 0  # the checkpoint is in the shared blob store

        play_round(policy, log, run_id, 1)
        rc, out = _trainer(kafka_bootstrap, run_id, data)  # a new process: state only from the log
        assert rc == 0, out[-3000:]
        assert "stopped after 1 updates" in out, out
        u1_again, u2 = _updates(log)
        assert u1_again.version == u1.version
        assert (u2.parent_version, u2.step) == (u1.version, 2)
        assert sorted(u2.env_ids) == [f"env-001-{e}" for e in range(4)]  # round 0 was not trained twice
        assert u2.checkpoint is not None and u2.checkpoint.sha256 != u1.checkpoint.sha256

        rc, out = _trainer(kafka_bootstrap, run_id, data)  # nothing new: nothing published
        assert rc == 0 and "stopped after 0 updates" in out, out
        assert len(_updates(log)) == 2
    finally:
        log.close()
