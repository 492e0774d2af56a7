"""Scale options of the trainer on the tiny model: chunked scoring equals full scoring, LoRA
(peft) updates only adapters and checkpoints merged weights a plain policy loads, gradient
checkpointing gives the same gradients, DeepSpeed without the package is a clear error (the KL
term, PPO epochs and the release's optimizer settings are in ``tests/test_trainer_loss_options.py``)."""

from __future__ import annotations

import pytest
import torch

from spade_engine.blobs import BlobStore
from spade_engine.config import TrainerConfig
from spade_engine.policy.tiny import build_tiny_model
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.trainer.batches import TrainSample
from spade_engine.trainer.checkpoints import save_weights
from spade_engine.trainer.model import TrainerSetupError, TrainModel
from spade_engine.trainer.scoring import token_logprobs
from spade_engine.trainer.update import train_on_samples


def _samples(n=4):
    out = []
    for i in range(n):
        out.append(TrainSample(role="agent", env_id=f"e{i}", prompt_ids=[257, 72, 105 + i], completion_ids=[97 + i, 98, 258],
                               behaviour_logprobs=[-5.5, -5.6, -5.4], advantage=(0.5 if i % 2 else -0.5), reward=float(i % 2),
                               policy_version="v0", event_id=str(i)))
    return out


def test_chunked_scoring_matches_full_scoring_and_gradients():
    model, _ = build_tiny_model(seed=0)
    ids = torch.randint(0, 259, (2, 37), generator=torch.Generator().manual_seed(0))
    full = token_logprobs(model, ids, None, temperature=0.7)
    chunked = token_logprobs(model, ids, None, temperature=0.7, chunk=8)
    assert torch.allclose(full, chunked, atol=1e-5)
    ref = torch.log_softmax(model(ids).logits[:, :-1].float() / 0.7, -1).gather(-1, ids[:, 1:, None])[..., 0]
    assert torch.allclose(full, ref, atol=1e-5)
    g1 = torch.autograd.grad(full.sum(), model.model.embed_tokens.weight)[0]
    g2 = torch.autograd.grad(token_logprobs(model, ids, None, temperature=0.7, chunk=8).sum(), model.model.embed_tokens.weight)[0]
    assert torch.allclose(g1, g2, atol=1e-5)


def test_compiled_chunk_scoring_matches_eager_values_and_gradients():
    """The torch.compile'd chunk scorer (trainer.compile) computes the eager log-probs and their
    gradients, with a tail chunk of another length (a recompile with dynamic shapes)."""
    model, _ = build_tiny_model(seed=1)
    ids = torch.randint(0, 259, (2, 29), generator=torch.Generator().manual_seed(2))
    temps = torch.tensor([0.7, 1.2])
    eager = token_logprobs(model, ids, None, temperature=temps, chunk=8)
    compiled = token_logprobs(model, ids, None, temperature=temps, chunk=8, compiled=True)
    assert torch.allclose(eager, compiled, atol=1e-5)
    w = model.model.embed_tokens.weight
    g1 = torch.autograd.grad(eager.sum(), w)[0]
    g2 = torch.autograd.grad(token_logprobs(model, ids, None, temperature=temps, chunk=8, compiled=True).sum(), w)[0]
    assert g1.abs().sum() > 0
    assert torch.allclose(g1, g2, atol=1e-5)



def test_each_row_is_scored_at_its_roles_temperature():
    # designer and agent samples of one micro-batch, sampled at different temperatures
    from spade_engine.config import load_config
    from spade_engine.trainer.update import row_temperatures

    model, _ = build_tiny_model(seed=0)
    ids = torch.randint(0, 259, (2, 29), generator=torch.Generator().manual_seed(1))
    per_row = token_logprobs(model, ids, None, temperature=torch.tensor([0.6, 1.3]), chunk=8)
    assert torch.allclose(per_row[0], token_logprobs(model, ids[:1], None, temperature=0.6)[0], atol=1e-5)
    assert torch.allclose(per_row[1], token_logprobs(model, ids[1:], None, temperature=1.3)[0], atol=1e-5)
    assert not torch.allclose(per_row[1], token_logprobs(model, ids[1:], None, temperature=0.6)[0], atol=1e-3)
    greedy = token_logprobs(model, ids, None, temperature=torch.tensor([0.0, 1.0]))
    assert torch.allclose(greedy, token_logprobs(model, ids, None, temperature=1.0), atol=1e-5)

    agent, designer = _samples(1)[0], TrainSample(**{**_samples(1)[0].__dict__, "role": "designer"})
    temps = {"agent": 0.6, "designer": 1.3}
    assert row_temperatures([agent, agent], temps) == 0.6 and row_temperatures([agent], 0.9) == 0.9
    assert row_temperatures([agent, designer], temps).tolist() == pytest.approx([0.6, 1.3])
    cfg = load_config(overrides={"policy.generation.designer.temperature": 1.3})
    assert cfg.policy.generation.trained_temperatures() == {"agent": 0.6, "designer": 1.3}

def test_an_update_records_how_far_it_moved_the_policy_on_its_samples():
    """trainer.shift_metrics: the update rescores its samples after the step and records the k3
    KL and the mean log-prob change of positive- and negative-advantage tokens (checked against a
    rescoring done here). On the tiny model a moderate step raises the positive answers and lowers
    the negative ones; a step 50 times larger overshoots: the KL is far larger and the positive
    answers fall too (what the 0.5B's update at lr 2e-4 did, 2026-12-05). A zero learning rate
    moves nothing; with the option off the keys are absent."""
    samples = _samples()
    ids = torch.tensor([s.prompt_ids + s.completion_ids for s in samples])

    def completion_lp(m):
        with torch.no_grad():
            return token_logprobs(m, ids, None)[:, 2:]

    def update(lr, **kw):
        # fp32: "auto" scores under bf16 autocast on a CPU with AVX512-BF16, which the rescoring here does not
        tm = TrainModel(build_tiny_model(seed=0)[0], TrainerConfig(learning_rate=lr, device="cpu", precision="fp32", **kw),
                        device=torch.device("cpu"))
        before = completion_lp(tm.module)
        m = train_on_samples(tm, samples)
        return m, completion_lp(tm.module) - before

    m, d = update(1e-3)
    assert m["policy_shift_kl"] == pytest.approx(float((torch.exp(d) - 1 - d).mean()), rel=1e-3)
    assert m["logprob_shift_positive"] == pytest.approx(float(d[1::2].mean()), rel=1e-3)
    assert m["logprob_shift_negative"] == pytest.approx(float(d[0::2].mean()), rel=1e-3)
    assert m["logprob_shift_positive"] > 0 > m["logprob_shift_negative"]
    big, _ = update(5e-2)
    assert big["policy_shift_kl"] > 10 * m["policy_shift_kl"]
    assert big["logprob_shift_positive"] < 0 and big["logprob_shift_negative"] < 0
    still, _ = update(0.0)
    assert still["policy_shift_kl"] == pytest.approx(0.0, abs=1e-9) and still["logprob_shift_negative"] == pytest.approx(0.0, abs=1e-6)
    off, _ = update(5e-2, shift_metrics=False)
    assert "policy_shift_kl" not in off and "loss" in off


def test_lora_adapters_start_from_their_seed_and_leave_the_callers_random_state_alone():
    """trainer.lora_seed: two trainers built with the same seed start from the same lora_A (so a
    retrain from the log, or bench/step_size.py's replay, repeats the recorded update), another
    seed from another; building one does not advance the caller's torch random state."""
    def lora_a(seed):
        cfg = TrainerConfig(device="cpu", lora=True, lora_r=4, lora_alpha=8, lora_seed=seed)
        tm = TrainModel(build_tiny_model(seed=0)[0], cfg, device=torch.device("cpu"))
        return {n: p.detach().clone() for n, p in tm.model.named_parameters() if "lora_A" in n}

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    first = lora_a(0)
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(7)  # another caller state, the same adapters
    again = lora_a(0)
    assert first.keys() == again.keys() and all(torch.equal(first[k], again[k]) for k in first)
    other = lora_a(1)
    assert any(not torch.equal(first[k], other[k]) for k in first)


def test_gradient_checkpointing_gives_the_same_update():
    results = []
    for ckpt in (False, True):
        model, _ = build_tiny_model(seed=0)
        tm = TrainModel(model, TrainerConfig(learning_rate=1e-2, device="cpu", gradient_checkpointing=ckpt), device=torch.device("cpu"))
        m = train_on_samples(tm, _samples())
        results.append((m["grad_norm"], tm.model.model.layers[0].mlp.up_proj.weight.detach().clone()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-4)
    assert torch.allclose(results[0][1], results[1][1], atol=1e-6)


def test_lora_trains_adapters_and_checkpoints_merged_weights(tmp_path):
    model, _ = build_tiny_model(seed=0)
    base_before = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    cfg = TrainerConfig(learning_rate=5e-2, device="cpu", lora=True, lora_r=4, lora_alpha=8)
    tm = TrainModel(model, cfg, device=torch.device("cpu"))
    trainable = [n for n, p in tm.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    for _ in range(3):
        train_on_samples(tm, _samples())
    # base weights untouched, adapters moved
    inner = tm.model.get_base_model().model.layers[0].self_attn.q_proj
    assert torch.equal(inner.base_layer.weight, base_before)
    ref = save_weights(tm.model, BlobStore(tmp_path / "blobs"))
    policy = TransformersPolicy.from_tiny(seed=0)
    policy.load_version("v1", str(BlobStore(tmp_path / "blobs").resolve(ref)))
    merged = policy.model.model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(merged, base_before)
    ids = torch.tensor([[257, 72, 105, 97, 98]])
    with torch.no_grad():
        a = tm.model(input_ids=ids).logits
        b = policy.model(input_ids=ids).logits
    assert torch.allclose(a, b, atol=1e-4)  # the plain policy with merged weights = base + adapters


def test_deepspeed_without_package_is_a_clear_error(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "deepspeed", None)
    ds = tmp_path / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 2}}')
    model, _ = build_tiny_model(seed=0)
    with pytest.raises(TrainerSetupError, match="DeepSpeed"):
        TrainModel(model, TrainerConfig(device="cpu", deepspeed_config=str(ds)), device=torch.device("cpu"))
