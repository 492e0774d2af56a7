"""A LoRA trainer writes each version's adapter (PolicyUpdated v2), relative to the base weights,
and a restarted trainer continues that adapter (with its optimizer state) instead of training a
new one on merged weights; the mismatch between the recorded and the trainer's log-probs is
measured on every update. An inference engine holding only the base model (llama.cpp) can
therefore serve any version from its adapter."""

from __future__ import annotations

import math

import torch

from spade_engine.blobs import BlobStore
from spade_engine.config import TrainerConfig
from spade_engine.events import PolicyUpdated, SqliteEventLog
from spade_engine.events.catalogue import decode_payload
from spade_engine.policy.hf import load_safetensors
from spade_engine.policy.lora_adapter import ADAPTER_MEDIA_TYPE, read_adapter
from spade_engine.policy.tiny import build_tiny_model
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.trainer.loop import Trainer
from trainer_driver import play_round, start_run


def _merged(adapter_path, seed: int = 0) -> dict[str, torch.Tensor]:
    """The base tiny model with the adapter file applied and merged: what the adapter serves."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict

    tensors, meta = read_adapter(adapter_path)
    model, _ = build_tiny_model(seed=seed)
    peft_model = get_peft_model(model, LoraConfig(r=meta["r"], lora_alpha=meta["alpha"], target_modules="all-linear"))
    set_peft_model_state_dict(peft_model, tensors)
    merged = peft_model.merge_and_unload()
    return {k: v.detach() for k, v in merged.state_dict().items()}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.allclose(a[k], b[k], atol=1e-5) for k in b if k in a)


def _lora_run(tmp_path, run_id: str):
    """A run with one round of tiny-model plays, its blob store, the policy and a LoRA trainer config."""
    log = SqliteEventLog(tmp_path / "events.sqlite", run_id)
    blobs = BlobStore(tmp_path / "blobs")
    start_run(log, run_id)
    policy = TransformersPolicy.from_tiny(seed=0)
    cfg = TrainerConfig(learning_rate=5e-2, batch_groups=4, device="cpu", lora=True, lora_r=4, lora_alpha=8, max_lag=2)
    play_round(policy, log, run_id, 0)
    return log, blobs, policy, cfg


def test_lora_versions_carry_their_adapter_and_a_restarted_trainer_continues_it(tmp_path):
    log, blobs, policy, cfg = _lora_run(tmp_path, "run-lora")
    (v1,) = Trainer(log, blobs=blobs, config=cfg, base_model="tiny:0").run()
    assert v1.adapter is not None and v1.adapter.media_type == ADAPTER_MEDIA_TYPE
    assert v1.optimizer is not None  # a LoRA trainer's Adam moments are kept too now
    _, meta = read_adapter(blobs.verified(v1.adapter))
    assert meta["r"] == 4 and meta["alpha"] == 8.0 and meta["base_model"] == "tiny:0"
    # the adapter on the base weights is exactly the merged checkpoint of the version
    assert _close(_merged(blobs.verified(v1.adapter)), load_safetensors(blobs.verified(v1.checkpoint)))
    for key in ("logprob_mismatch", "logprob_mismatch_max", "tis_capped_share"):
        assert key in v1.metrics and math.isfinite(v1.metrics[key])
    assert v1.metrics["logprob_mismatch_max"] >= v1.metrics["logprob_mismatch"] >= 0
    assert 0.0 <= v1.metrics["tis_capped_share"] <= 1.0

    # a new trainer process: it resumes from v1's adapter, so v2's adapter still applies to the base
    resumed = Trainer(log, blobs=blobs, config=cfg, base_model="tiny:0")
    start_lora = {k: v.detach().clone() for k, v in resumed.tm.model.named_parameters() if "lora_B" in k}
    saved, _ = read_adapter(blobs.verified(v1.adapter))
    assert any(float(v.abs().sum()) > 0 for v in start_lora.values())  # not a fresh (zero) lora_B
    assert all(torch.equal(start_lora[k], saved[k.replace(".default", "")]) for k in start_lora)
    play_round(policy, log, "run-lora", 1)
    (v2,) = resumed.run()
    assert v2.version == "v2" and v2.adapter is not None and v2.adapter.sha256 != v1.adapter.sha256
    assert _close(_merged(blobs.verified(v2.adapter)), load_safetensors(blobs.verified(v2.checkpoint)))


def test_policy_updated_v1_events_are_upcast_without_an_adapter():
    payload = {"version": "v1", "parent_version": "v0", "checkpoint": None, "step": 1}
    ev = decode_payload("PolicyUpdated", 1, payload)
    assert isinstance(ev, PolicyUpdated) and ev.adapter is None and PolicyUpdated.VERSION == 2


def test_adapter_only_versions_record_no_merged_weights_and_still_resume_and_evaluate(tmp_path):
    """``trainer.merged_weights = false`` (the default under a llama.cpp policy): a LoRA version is
    its adapter alone (no multi-GB merged checkpoint in the blob store); a restarted trainer
    continues it, ``eval --run --version`` finds it, and a policy that needs merged weights says so."""
    import pytest

    from spade_engine.evaluation.checkpoint import find_checkpoint
    from spade_engine.policy.hf import PolicyLoadError
    from spade_engine.trainer.model import TrainerSetupError

    log, blobs, policy, cfg = _lora_run(tmp_path, "run-adapter")
    (v1,) = Trainer(log, blobs=blobs, config=cfg, base_model="tiny:0", merged_weights=False).run()
    assert v1.checkpoint is None and v1.adapter is not None and v1.optimizer is not None
    stored = {p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()}
    assert len(stored) == 2  # the adapter and the optimizer state, no merged weights

    found = find_checkpoint(log, "v1", blobs)
    assert found.path is None and found.adapter is not None and found.sha256 == v1.adapter.sha256
    with pytest.raises(PolicyLoadError, match="adapter alone"):
        policy.load_version("v1", None, adapter=str(found.adapter))

    resumed = Trainer(log, blobs=blobs, config=cfg, base_model="tiny:0", merged_weights=False)
    saved, _ = read_adapter(blobs.verified(v1.adapter))
    start_lora = {k: v.detach().clone() for k, v in resumed.tm.model.named_parameters() if "lora_B" in k}
    assert all(torch.equal(start_lora[k], saved[k.replace(".default", "")]) for k in start_lora)
    play_round(policy, log, "run-adapter", 1)
    (v2,) = resumed.run()
    assert v2.version == "v2" and v2.checkpoint is None and v2.adapter.sha256 != v1.adapter.sha256

    # a full fine-tune cannot continue from an adapter alone: said, not silently restarted from v0
    with pytest.raises(TrainerSetupError, match="adapter alone"):
        Trainer(log, blobs=blobs, config=cfg.model_copy(update={"lora": False}), base_model="tiny:0")


def test_merged_weights_default_follows_the_policy_and_a_merged_weights_policy_refuses_none():
    import pytest

    from spade_engine.config import load_config

    def cfg(**over):
        return load_config(overrides={"trainer.enabled": True, "trainer.lora": True, **over}, environ={})

    assert cfg(**{"policy.kind": "llamacpp", "policy.model": "x.gguf"}).records_merged_weights() is False
    assert cfg(**{"policy.kind": "transformers", "policy.model": "tiny"}).records_merged_weights() is True
    assert cfg(**{"policy.kind": "llamacpp", "policy.model": "x.gguf", "trainer.merged_weights": True}).records_merged_weights() is True
    with pytest.raises(Exception, match="merged_weights"):
        cfg(**{"policy.kind": "transformers", "policy.model": "tiny", "trainer.merged_weights": False})


def test_bfloat16_merged_weights_are_half_the_size_and_load_into_the_policy(tmp_path):
    """``trainer.merged_weights_dtype = "bfloat16"`` (a long GPU run's disk): a LoRA version's
    merged weights are recorded in bf16 (the adapter stays float32), a policy loads them and
    serves what the float32 merge rounds to; a full fine-tune (which resumes from its merged
    weights) is refused the option at config time."""
    import pytest

    from spade_engine.config import load_config

    log, blobs, policy, cfg = _lora_run(tmp_path, "run-bf16")
    (v1,) = Trainer(log, blobs=blobs, config=cfg.model_copy(update={"merged_weights_dtype": "bfloat16"}), base_model="tiny:0").run()
    merged = load_safetensors(blobs.verified(v1.checkpoint))
    assert {t.dtype for t in merged.values() if t.is_floating_point()} == {torch.bfloat16}
    adapter, _ = read_adapter(blobs.verified(v1.adapter))
    assert {t.dtype for t in adapter.values()} == {torch.float32}
    exact = _merged(blobs.verified(v1.adapter))  # the float32 merge of the same adapter
    assert all(torch.equal(merged[k], exact[k].to(torch.bfloat16)) for k in exact)
    assert v1.checkpoint.size < 0.6 * sum(t.numel() * 4 for t in exact.values())
    policy.load_version("v1", str(blobs.verified(v1.checkpoint)))
    assert policy.version == "v1"

    with pytest.raises(Exception, match="LoRA runs only"):
        load_config(overrides={"trainer.merged_weights_dtype": "bfloat16"}, environ={})
