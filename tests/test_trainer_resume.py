"""Resume after SIGKILL: a trainer process running ``spade-engine train`` is killed with a real
SIGKILL at each step of the update protocol (before training, after the checkpoint, after
PolicyUpdated, after the commit) and once at a random moment; started again each time, it must
finish with exactly the result of an uninterrupted trainer: the same chain of versions, every
group trained once, and bit-identical final weights.

The killed trainers are forked child processes that run the CLI app (forking saves re-importing
torch for each of them); the last one is a fresh ``python -m spade_engine.cli train``
subprocess. Nothing but the data directory survives a SIGKILL either way."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spade_engine.blobs import BlobStore
from spade_engine.config import load_config
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.events import DataDir, SqliteEventLog
from spade_engine.trainer.loop import FAULT_ENV, Trainer
from trainer_driver import play_round, start_run

REPO = Path(__file__).resolve().parent.parent
RUN = "run-20260101-000000-abcdef"
CONFIG = """
# the plays below are sampled at temperature 1.0 (TransformersPolicy.from_tiny): the trainer
# scores them at the agent's temperature of the config
[policy.generation.agent]
temperature = 1.0
[trainer]
batch_groups = 2
learning_rate = 0.01
max_lag = 100
micro_batch_size = 16
device = "cpu"
"""


def _make_run(root: Path) -> None:
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN)
    start_run(log, RUN)
    policy = TransformersPolicy.from_tiny(seed=0)
    for rnd in range(3):
        # reward 1 for an even first token (~1/2 of the time): few zero-variance groups
        play_round(policy, log, RUN, rnd, n_envs=4, k=6, reward=lambda ids: float(ids[0] % 2 == 0))
    log.close()


def _updates(root: Path):
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN, create=False)
    try:
        return [r.envelope.event() for r in log.read() if r.envelope.type == "PolicyUpdated"], log.committed("trainer")
    finally:
        log.close()


def _train_cmd(root: Path, cfg: Path) -> list[str]:
    return [sys.executable, "-m", "spade_engine.cli", "train", RUN, "--model", "tiny:0", "--config", str(cfg), "-d", str(root)]


def _child(argv: list[str], fault: str | None) -> None:
    os.environ.pop(FAULT_ENV, None)
    if fault:
        os.environ[FAULT_ENV] = fault
    import torch

    torch.set_num_threads(1)
    from spade_engine.cli import app

    try:
        app(argv, standalone_mode=False)
    except SystemExit as exc:  # pragma: no cover - typer exit codes
        os._exit(int(exc.code or 0))
    os._exit(0)


def _fork_train(root: Path, cfg: Path, fault: str | None = None):
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_child, args=(_train_cmd(root, cfg)[3:], fault))
    proc.start()
    return proc


def _env(fault: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return env


@pytest.mark.slow
def test_sigkill_anywhere_then_restart_trains_each_event_once(tmp_path):
    base = tmp_path / "base"
    _make_run(base)
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CONFIG)

    # reference: one uninterrupted trainer (in-process, same config, same single thread)
    ref_root = tmp_path / "ref"
    shutil.copytree(base, ref_root)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        log = SqliteEventLog(DataDir(ref_root).log_path(RUN), RUN, create=False)
        Trainer(log, blobs=BlobStore(ref_root / "blobs"), config=load_config(cfg).trainer, base_model="tiny:0").run()
        log.close()
    finally:
        torch.set_num_threads(threads)
    ref_updates, _ = _updates(ref_root)
    assert len(ref_updates) >= 4
    n = len(ref_updates)

    root = tmp_path / "killed"
    shutil.copytree(base, root)
    seen = 0
    for fault in ("before_update:2", "after_checkpoint:1", "after_event:1", "after_commit:1"):
        proc = _fork_train(root, cfg, fault)
        proc.join(timeout=300)
        assert proc.exitcode == -signal.SIGKILL, (fault, proc.exitcode)
        updates, committed = _updates(root)
        assert len(updates) >= seen
        seen = len(updates)
        if fault == "after_event:1":
            # the event is in, the commit is not: the restarted trainer must trust PolicyUpdated
            assert committed.get(0, 0) < int(updates[-1].consumed["0"])

    # a kill at an arbitrary moment: as soon as one more version shows up
    proc = _fork_train(root, cfg)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(_updates(root)[0]) <= seen and proc.is_alive():
        time.sleep(0.02)
    if proc.is_alive():
        os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=60)

    final = subprocess.run(_train_cmd(root, cfg), env=_env(), capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]
    assert "resuming" in final.stdout

    updates, committed = _updates(root)
    # the same linear chain as the uninterrupted trainer, each group consumed exactly once
    assert [u.version for u in updates] == [u.version for u in ref_updates]
    assert [u.parent_version for u in updates] == [f"v{i}" for i in range(n)]
    assert [u.env_ids for u in updates] == [u.env_ids for u in ref_updates]
    envs = [e for u in updates for e in u.env_ids]
    assert len(envs) == len(set(envs)) == 12  # every group once (zero-variance ones included)
    assert [u.consumed for u in updates] == [u.consumed for u in ref_updates]
    assert committed == {0: int(updates[-1].consumed["0"])}
    # exact resume (weights + AdamW state from the checkpoints): bit-identical final weights
    assert updates[-1].checkpoint.sha256 == ref_updates[-1].checkpoint.sha256

    # starting again finds nothing new to train on
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN, create=False)
    again = Trainer(log, blobs=BlobStore(root / "blobs"), config=load_config(cfg).trainer, base_model="tiny:0")
    assert again.run() == [] and again.state.version == f"v{n}"
    assert again.assembler.already_trained == 12
    log.close()
