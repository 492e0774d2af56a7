"""DeepSpeed ZeRO through ``trainer.deepspeed_config``, run for real on DeepSpeed's CPU accelerator
(gloo, one process, no launcher): stages 2 and 3 train on the same recorded plays as the plain
AdamW trainer and publish the same weights (full tensors, gathered under ZeRO-3); a new trainer
resumes from the last checkpoint and trains only on what is new."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from spade_engine.blobs import BlobStore
from spade_engine.config import TrainerConfig
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.events import SqliteEventLog
from spade_engine.trainer.checkpoints import DEEPSPEED_STATE, verified_path
from spade_engine.trainer.loop import Trainer
from trainer_driver import play_round, start_run

RUN = "run-ds"


@pytest.fixture(scope="module", autouse=True)
def _restore_linear():
    """ZeRO-3 replaces ``torch.nn.functional.linear`` process-wide (``zero3_linear_wrap``) and
    never puts it back; under bf16 autocast the wrapped linear rounds differently, so later tests
    in this process (the bit-exact resume of test_trainer_resume) would see other numbers."""
    linear = torch.nn.functional.linear
    yield
    torch.nn.functional.linear = linear


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two rounds of plays by the tiny policy, as raw events (copied into each test's own log)."""
    log = SqliteEventLog(tmp_path_factory.mktemp("plays") / "events.sqlite", RUN)
    start_run(log, RUN)
    policy = TransformersPolicy.from_tiny(seed=0)
    for rnd in range(2):
        play_round(policy, log, RUN, rnd)
    raw = [(r.envelope, r.raw) for r in log.read()]
    log.close()
    return raw


@pytest.fixture(scope="module")
def plain(tmp_path_factory, recorded):
    """The plain AdamW trainer on the recorded plays: what ZeRO must reproduce."""
    _, blobs, updates = _train(tmp_path_factory.mktemp("plain"), recorded, "plain")
    assert updates, "the recorded plays gave the trainer nothing to train on"
    return blobs, updates


def _config(**cfg) -> TrainerConfig:
    return TrainerConfig(**{"learning_rate": 3e-2, "batch_groups": 4, "micro_batch_size": 32, "device": "cpu", **cfg})


def _train(tmp_path, raw, name: str, max_updates: int | None = None, **cfg) -> tuple[SqliteEventLog, BlobStore, list]:
    log = SqliteEventLog(tmp_path / name / "events.sqlite", RUN)
    if raw:
        log.append_raw(raw)
    blobs = BlobStore(tmp_path / name / "blobs")
    updates = Trainer(log, blobs=blobs, config=_config(**cfg), base_model="tiny:0").run(max_updates=max_updates)
    return log, blobs, updates


def _weights(blobs: BlobStore, update) -> dict[str, torch.Tensor]:
    return load_file(str(verified_path(blobs, update.checkpoint)))


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_trains_like_plain_adamw_and_resumes(tmp_path, recorded, plain, stage):
    plain_blobs, plain = plain
    ds_file = tmp_path / "ds.json"
    ds_file.write_text(json.dumps({"zero_optimization": {"stage": stage}}))
    log, blobs, updates = _train(tmp_path, recorded, "zero", deepspeed_config=str(ds_file))

    assert [u.version for u in updates] == [u.version for u in plain]
    assert [u.env_ids for u in updates] == [u.env_ids for u in plain]
    base = TransformersPolicy.from_tiny(seed=0).model.state_dict()
    for mine, theirs in zip(updates, plain):
        got, want = _weights(blobs, mine), _weights(plain_blobs, theirs)
        assert got.keys() == want.keys()
        for k, w in want.items():
            assert got[k].shape == w.shape  # full tensors, not ZeRO-3's empty partitions
            torch.testing.assert_close(got[k], w, rtol=1e-4, atol=1e-5)
        assert any(not torch.equal(got[k], base[k]) for k in got)  # it did train
        assert mine.metrics["loss"] == pytest.approx(theirs.metrics["loss"], rel=1e-4, abs=1e-6)

    # resume: a new trainer starts from the last weights and trains only on a new round
    policy = TransformersPolicy.from_tiny(seed=0)
    play_round(policy, log, RUN, 2)
    resumed = Trainer(log, blobs=blobs, config=_config(deepspeed_config=str(ds_file)), base_model="tiny:0")
    last = updates[-1].version
    assert resumed.state.version == last
    more = resumed.run()
    assert more and more[0].parent_version == last and more[0].step == updates[-1].step + 1
    assert not set(more[0].env_ids) & {e for u in updates for e in u.env_ids}
    assert _weights(blobs, more[0]).keys() == _weights(blobs, updates[-1]).keys()


@pytest.mark.slow
def test_a_resumed_zero_trainer_continues_adam_exactly(tmp_path, recorded, caplog):
    """Kill-and-restart between updates changes nothing: the second trainer restores DeepSpeed's
    partitioned optimizer state, so its weights equal an uninterrupted trainer's."""
    ds_file = tmp_path / "ds.json"
    ds_file.write_text(json.dumps({"zero_optimization": {"stage": 2}}))
    cfg = {"batch_groups": 2, "deepspeed_config": str(ds_file)}
    _, cont_blobs, cont = _train(tmp_path, recorded, "continuous", **cfg)
    assert len(cont) >= 2
    assert all(u.optimizer is not None and u.optimizer.media_type == DEEPSPEED_STATE for u in cont)

    log, blobs, first = _train(tmp_path, recorded, "resumed", max_updates=1, **cfg)
    assert [u.version for u in first] == ["v1"]
    rest = Trainer(log, blobs=blobs, config=_config(**cfg), base_model="tiny:0").run()
    assert [u.version for u in first + rest] == [u.version for u in cont]
    for k, w in _weights(cont_blobs, cont[-1]).items():
        torch.testing.assert_close(_weights(blobs, rest[-1])[k], w, rtol=1e-4, atol=1e-5)

    # a plain trainer cannot use DeepSpeed's optimizer state: it says so and goes on
    with caplog.at_level("WARNING", logger="spade_engine.trainer.loop"):
        plain = Trainer(log, blobs=blobs, config=_config(batch_groups=2), base_model="tiny:0")
    assert plain.state.version == cont[-1].version
    assert "not restored" in caplog.text
