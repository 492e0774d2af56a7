"""TransformersPolicy over the tiny random model: tokenizer, batched generation, behaviour
log-probs (checked against a teacher-forced forward pass), checkpoints, the vLLM import guard."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from spade_engine.blobs import BlobStore
from spade_engine.policy import protocol as base
from spade_engine.policy.decoding import BatchSampler, sample_tokens
from spade_engine.policy.tiny import build_tiny_model, build_tiny_tokenizer, parse_tiny_spec
from spade_engine.policy.transformers_policy import PolicyLoadError, TransformersPolicy, render_messages
from spade_engine.trainer.checkpoints import load_weights_into, save_weights


def test_tiny_tokenizer_round_trips_arbitrary_text():
    tok = build_tiny_tokenizer()
    for text in ["def f(x):\n\treturn x ** 2  # ok", "naïve — 日本語 🙂", "\\boxed{42}", "  spaces  "]:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == list(text.encode("utf-8"))
        assert tok.decode(ids) == text
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (256, 257, 258)
    assert len(tok) == 259


def test_tiny_model_is_seeded_and_sized():
    m1, _ = build_tiny_model(seed=1)
    m2, _ = build_tiny_model(seed=1)
    m3, _ = build_tiny_model(seed=2, hidden=16, layers=1, vocab=300)
    for (k, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert torch.equal(a, b), k
    assert m3.config.hidden_size == 16 and m3.config.num_hidden_layers == 1 and m3.config.vocab_size == 300
    assert not torch.equal(m1.model.embed_tokens.weight[:, :16][:259], m3.model.embed_tokens.weight[:259])
    assert parse_tiny_spec("tiny") == {"seed": 0}
    assert parse_tiny_spec("tiny:3:16:1") == {"seed": 3, "hidden": 16, "layers": 1}
    assert parse_tiny_spec("Qwen/Qwen2-0.5B") is None


def _teacher_forced_logprobs(model, prompt, completion, temperature=1.0):
    ids = torch.tensor([list(prompt) + list(completion)])
    with torch.no_grad():
        logits = model(ids).logits[0].float() / temperature
    lp = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1]
    return lp.gather(-1, torch.tensor(completion)[:, None])[:, 0]


@pytest.mark.parametrize("static", [True, False])
def test_batched_left_padded_generation_logprobs_match_teacher_forcing(static):
    policy = TransformersPolicy.from_tiny(seed=0, max_new_tokens=12, temperature=0.7, static_cache=static)
    reqs = [
        base.PolicyRequest(role="agent", messages=[{"role": "user", "content": c}], seed=i)
        for i, c in enumerate(["short", "a much longer prompt than the others", "x = 1\nprint(x)"])
    ]
    samples = policy.generate(reqs)
    assert len(samples) == 3
    for req, s in zip(reqs, samples):
        assert s.prompt_token_ids == render_messages(policy.tokenizer, req.messages)
        assert 1 <= len(s.completion_token_ids) <= 12
        assert len(s.logprobs) == len(s.completion_token_ids)
        assert all(lp <= 0 for lp in s.logprobs)
        # behaviour log-probs = the sampling distribution (temperature 0.7) of each sampled token,
        # whatever the padding of the batch it was generated in
        ref = _teacher_forced_logprobs(policy.model, s.prompt_token_ids, s.completion_token_ids, 0.7)
        assert torch.allclose(ref, torch.tensor(s.logprobs), atol=1e-4)
        if s.finish_reason == "stop":
            assert s.completion_token_ids[-1] == policy.tokenizer.eos_token_id
        else:
            assert len(s.completion_token_ids) == 12
        assert s.generation().completion_token_ids == s.completion_token_ids


def test_generation_is_reproducible_from_seeds_and_differs_across_seeds():
    policy = TransformersPolicy.from_tiny(seed=0, max_new_tokens=16)
    reqs = [base.PolicyRequest(role="agent", messages=[{"role": "user", "content": "go"}], seed=s) for s in (1, 2)]
    a = policy.generate(reqs)
    b = policy.generate(reqs)
    assert [x.completion_token_ids for x in a] == [x.completion_token_ids for x in b]
    c = policy.generate([base.PolicyRequest(role="agent", messages=reqs[0].messages, seed=99)])
    assert c[0].completion_token_ids != a[0].completion_token_ids


def test_static_and_dynamic_cache_agree_greedy():
    model, tok = build_tiny_model(seed=3)
    prompts = [tok.encode("abc", add_special_tokens=False), tok.encode("hello there, world", add_special_tokens=False)]
    outs = []
    for static in (True, False):
        s = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], static_cache=static)
        outs.append(s.sample(prompts, max_new_tokens=10, temperature=0.0))
    assert [o.token_ids for o in outs[0]] == [o.token_ids for o in outs[1]]
    # unbatched greedy gives the same tokens as batched (padding does not leak)
    single = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id]).sample(prompts[:1], max_new_tokens=10, temperature=0)
    assert single[0].token_ids == outs[0][0].token_ids


def test_sample_tokens_top_p_and_greedy():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    tok, lp = sample_tokens(logits, 0.0)
    assert tok.item() == 0 and math.isclose(lp.item(), torch.log_softmax(logits, -1)[0, 0].item(), rel_tol=1e-6)
    g = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(200):
        tok, lp = sample_tokens(logits, 1.0, top_p=0.8, generator=g)
        seen.add(tok.item())
        p = torch.softmax(logits[0, :2], -1)  # nucleus {0, 1}: mass 0.665 + 0.245 >= 0.8
        assert math.isclose(lp.item(), math.log(p[tok.item()].item()), rel_tol=1e-5)
    assert seen == {0, 1}


def test_checkpoint_round_trip_and_load_version(tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    trained, _ = build_tiny_model(seed=5)
    ref = save_weights(trained, blobs)
    assert ref.uri == f"cas://sha256/{ref.sha256}" and ref.size > 0
    assert save_weights(trained, blobs).sha256 == ref.sha256  # content-addressed: same weights, same blob
    policy = TransformersPolicy.from_tiny(seed=0)
    assert policy.version == "v0"
    policy.load_version("v1", str(blobs.resolve(ref)))
    assert policy.version == "v1"
    for (k, a), b in zip(policy.model.state_dict().items(), trained.state_dict().values()):
        assert torch.equal(a, b), k
    desc = policy.describe()
    assert desc["kind"] == "transformers" and desc["version"] == "v1" and desc["model"] == "tiny:0"
    other, _ = build_tiny_model(seed=0, hidden=16)
    with pytest.raises(ValueError):
        load_weights_into(other, blobs.resolve(ref))
    with pytest.raises(PolicyLoadError):
        policy.load_version("v2", str(tmp_path / "missing.safetensors"))


# A hub id that exists nowhere: with HF_HUB_OFFLINE=1 nothing is downloaded, and the policy must
# say it is offline instead of raising a hub error.
MISSING_HUB_ID = "/".join(("no-such-org", "no-such-model-xyz"))


def test_from_pretrained_offline_missing_model_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PolicyLoadError, match="offline"):
        TransformersPolicy.from_pretrained(MISSING_HUB_ID)


def test_from_pretrained_local_directory_with_chat_template(tmp_path):
    model, tok = build_tiny_model(seed=0)
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}[assistant]"
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    policy = TransformersPolicy.from_pretrained(str(tmp_path / "m"), device="cpu", max_new_tokens=4)
    msgs = [{"role": "user", "content": "hi"}]
    ids = render_messages(policy.tokenizer, msgs)
    assert policy.tokenizer.decode(ids) == "[user]hi[assistant]"
    (s,) = policy.generate([base.PolicyRequest(role="agent", messages=msgs, seed=0)])
    assert s.prompt_token_ids == ids and len(s.completion_token_ids) >= 1
    assert isinstance(policy, base.Policy)


def test_vllm_backend_without_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # vllm is not installable here; make sure of it
    from spade_engine.policy import vllm_policy

    with pytest.raises(vllm_policy.VllmUnavailable, match="pip install"):
        vllm_policy.VllmPolicy("some/model")


def test_batched_prefill_matches_prefilling_each_row_alone():
    """Prompts prefilled together (left-padded, one forward per group) give the tokens and
    log-probs of prompts prefilled one by one, also when the groups are split by the budget."""
    model, tok = build_tiny_model(seed=5)
    texts = ["a", "hello there, world", "x = 1\nprint(x)", "the quick brown fox jumps over the lazy dog", "zz"]
    prompts = [tok.encode(t, add_special_tokens=False) for t in texts]
    runs = {}
    for budget in (0, 16, None):  # 0: every row alone; 16: groups split by the budget; None: the default
        s = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], prefill_batch_tokens=budget)
        if budget == 16:
            groups, alone = s._plan_prefill(prompts)
            assert alone == [] and len(groups) > 1
            assert sorted(i for g in groups for i in g) == list(range(len(prompts)))
            assert all(len(g) * max(len(prompts[i]) for i in g) <= 16 or len(g) == 1 for g in groups)
        runs[budget] = s.sample(prompts, max_new_tokens=8, temperature=0.0)
    for budget in (16, None):
        assert [c.token_ids for c in runs[budget]] == [c.token_ids for c in runs[0]]
        for a, b in zip(runs[budget], runs[0]):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_rows_with_a_cached_prefix_are_prefilled_alone_and_agree():
    """The second call's prompts extend the first call's: they reuse the cached prefix (prefilled
    on their own), a new prompt is batched, and the tokens match a sampler with no cache."""
    from spade_engine.policy.prefix_cache import PrefixCache

    model, tok = build_tiny_model(seed=6)
    first = [tok.encode("shared prompt number one, long enough to cache", add_special_tokens=False)]
    cached = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id], prefix_cache=PrefixCache(4096, min_tokens=4))
    cached.sample(first, max_new_tokens=4, temperature=0.0)
    second = [first[0] + tok.encode(" and more", add_special_tokens=False), tok.encode("fresh words", add_special_tokens=False)]
    groups, alone = cached._plan_prefill(second)
    assert alone == [0] and groups == [[1]]
    plain = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[tok.eos_token_id])
    a = cached.sample(second, max_new_tokens=8, temperature=0.0)
    b = plain.sample(second, max_new_tokens=8, temperature=0.0)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
