"""Per-role generation (issue 17): the config's role sections and their upcast, requests carrying
each role's settings, finish reasons (stop, length, stop_string, context), the context budget,
the thinking switch of chat templates, per-row noise, the prefix cache, sliced attention."""

from __future__ import annotations

import pytest
import torch

from spade_engine.config import EngineConfig, load_config
from spade_engine.engine.corpus import bundled_corpus
from spade_engine.engine.stages import StageContext
from spade_engine.policy.decoding import BatchSampler, trim_at_stop
from spade_engine.policy.prefix_cache import PrefixCache
from spade_engine.policy.protocol import GenerationProgress, PolicyRequest
from spade_engine.policy.tiny import build_tiny_model
from spade_engine.policy.transformers_policy import TransformersPolicy, render_messages


def _req(text: str, **kw) -> PolicyRequest:
    return PolicyRequest(role="agent", messages=[{"role": "user", "content": text}], **kw)


# -- config --------------------------------------------------------------------------------------


def test_role_defaults_follow_the_release_recipe() -> None:
    g = EngineConfig().policy.generation
    assert (g.designer.max_new_tokens, g.agent.max_new_tokens, g.hinter.max_new_tokens) == (16_384, 8_192, 512)
    assert (g.designer.temperature, g.agent.temperature, g.hinter.temperature) == (0.6, 0.6, 0.3)
    assert g.temperature == g.agent.temperature  # what the trainer scores with by default
    assert EngineConfig().loop.turn_limit == 25


def test_a_partial_role_section_keeps_that_roles_defaults(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[policy.generation.hinter]\nmax_new_tokens = 64\n[policy.generation.designer]\nstop = ["\\nEND"]\n')
    g = load_config(f).policy.generation
    assert g.hinter.max_new_tokens == 64 and g.hinter.temperature == 0.3
    assert g.designer.stop == ["\nEND"] and g.designer.max_new_tokens == 16_384
    # a dotted flag of the earlier shape sets every role; dumping and reading back is lossless
    cfg = load_config(f).with_overrides({"policy.temperature": 0.0})
    assert {cfg.policy.generation.for_role(r).temperature for r in ("designer", "hinter", "agent")} == {0.0}
    assert EngineConfig.model_validate(cfg.model_dump(mode="json")) == cfg
    with pytest.raises(Exception, match="stop strings must not be empty"):
        load_config(overrides={"policy.generation.agent.stop": [""]})


def test_a_recorded_config_of_the_first_generation_shape_resumes_with_its_settings() -> None:
    old = {"policy": {"kind": "transformers", "model": "m", "generation": {"max_new_tokens": 512, "temperature": 1.0, "top_p": 1.0}}}
    g = EngineConfig.model_validate(old).policy.generation
    for role in ("designer", "hinter", "agent"):
        r = g.for_role(role)
        assert (r.max_new_tokens, r.temperature, r.top_p) == (512, 1.0, 1.0)


def test_stages_put_each_roles_settings_on_its_requests() -> None:
    cfg = load_config(overrides={"policy.generation.agent.max_new_tokens": 7, "policy.generation.agent.stop": ["\n\n"],
                                 "policy.generation.hinter.enable_thinking": False})
    ctx = StageContext(run_id="r", cfg=cfg, policy=None, corpus=bundled_corpus())  # type: ignore[arg-type]
    agent = ctx.request("agent", [{"role": "user", "content": "x"}], seed=3)
    assert (agent.max_new_tokens, agent.temperature, agent.stop, agent.seed) == (7, 0.6, ("\n\n",), 3)
    hint = ctx.request("hinter", [])
    assert (hint.max_new_tokens, hint.temperature, hint.enable_thinking) == (512, 0.3, False)
    assert ctx.request("designer", []).max_new_tokens == 16_384


# -- the policy ----------------------------------------------------------------------------------


def test_finish_reasons_length_and_stop_string() -> None:
    policy = TransformersPolicy.from_tiny(seed=4)
    kw = dict(max_new_tokens=24, temperature=1.0, seed=7)
    (free,) = policy.generate([_req("count", **kw)])
    assert free.finish_reason == "length" and len(free.completion_token_ids) == 24
    # a stop string from the middle of the text (its first occurrence): the same tokens up to it, then cut
    cut_at = next(k for k in range(6, len(free.text) - 2) if free.text[k : k + 2] not in free.text[: k + 1])
    stop = free.text[cut_at : cut_at + 2]
    (stopped,) = policy.generate([_req("count", stop=(stop,), **kw)])
    assert stopped.finish_reason == "stop_string"
    assert stopped.text == free.text[: free.text.index(stop)]
    n = len(stopped.completion_token_ids)
    assert stopped.completion_token_ids == free.completion_token_ids[:n] and len(stopped.logprobs) == n
    assert stop in policy._decode(stopped.completion_token_ids) and stop not in policy._decode(stopped.completion_token_ids[:-1])
    assert stopped.generation().finish_reason == "stop_string"


def test_trim_at_stop_finds_the_first_stop_string() -> None:
    words = ["ab", "c", "DO", "NE", "x", "DONE"]
    decode = lambda ids: "".join(words[i] for i in ids)  # noqa: E731
    assert trim_at_stop(range(6), decode, ["DONE"]) == (4, "abc")
    assert trim_at_stop(range(6), decode, ["zz"]) is None


def test_the_context_window_caps_completions_and_refuses_prompts_that_do_not_fit() -> None:
    policy = TransformersPolicy.from_tiny(seed=4, temperature=0.0, context_window=80, min_new_tokens=8)
    short, long_, huge = _req("hi", max_new_tokens=500), _req("x" * 45, max_new_tokens=500), _req("y" * 200, max_new_tokens=5)
    assert 80 - 8 > len(policy.render(long_)) > 80 - 30
    a, b, c = policy.generate([short, long_, huge])
    for s in (a, b):  # cut by the window, not by max_new_tokens
        assert s.finish_reason in ("context", "stop")
        assert len(s.prompt_token_ids) + len(s.completion_token_ids) <= 80
    assert b.finish_reason == "context"
    assert c.finish_reason == "context" and c.completion_token_ids == [] and c.text == ""
    assert policy.describe()["context_window"] == 80


def test_enable_thinking_reaches_templates_that_have_the_switch() -> None:
    _, tok = build_tiny_model(seed=0)
    tok.chat_template = (
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        "{% if enable_thinking is defined and not enable_thinking %}<no-think>{% endif %}"
    )
    msgs = [{"role": "user", "content": "hello"}]
    plain = tok.decode(render_messages(tok, msgs))
    assert tok.decode(render_messages(tok, msgs, enable_thinking=False)) == plain + "<no-think>"
    assert tok.decode(render_messages(tok, msgs, enable_thinking=True)) == plain
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"  # no switch: ignored
    assert render_messages(tok, msgs, enable_thinking=False) == render_messages(tok, msgs)


def test_a_last_assistant_message_is_a_reply_prefix_the_model_continues() -> None:
    _, tok = build_tiny_model(seed=0)
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    prefix = {"role": "assistant", "content": "```python\nclass A:\n"}
    tok.chat_template = (  # ChatML, as the catalogue's Qwen models have it
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    for template in (tok.chat_template, None):  # the template, then the fallback format
        tok.chat_template = template
        turn = tok.decode(render_messages(tok, msgs))
        continued = tok.decode(render_messages(tok, [*msgs, prefix]))
        assert continued == turn + prefix["content"], (template, continued)  # inside the model's turn, not closed
    policy = TransformersPolicy.from_tiny(seed=1)
    req = PolicyRequest(role="designer", messages=[*msgs, prefix], max_new_tokens=4, temperature=0.0)
    (sample,) = policy.generate([req])
    assert sample.prompt_token_ids == policy.render(req) and len(sample.completion_token_ids) <= 4
    assert policy.tokenizer.decode(sample.prompt_token_ids).endswith(prefix["content"])


def test_a_rows_completion_depends_on_its_own_seed_not_on_its_batch() -> None:
    policy = TransformersPolicy.from_tiny(seed=2)
    target = _req("the same prompt", seed=11, max_new_tokens=20, temperature=1.0)
    alone = policy.generate([target])[0]
    crowd = policy.generate([_req("other " * 9, seed=5, max_new_tokens=33, temperature=1.0), target,
                             _req("z", seed=6, max_new_tokens=20, temperature=1.0)])
    assert crowd[1].completion_token_ids == alone.completion_token_ids
    other = policy.generate([_req("the same prompt", seed=12, max_new_tokens=20, temperature=1.0)])[0]
    assert other.completion_token_ids != alone.completion_token_ids


def test_prefix_cache_reuse_gives_the_same_greedy_completions() -> None:
    model, tok = build_tiny_model(seed=1, hidden=64, layers=2)
    prompts = [tok.encode("shared system prompt and rules " * 4 + tail) for tail in ("one", "second row", "3")]

    def greedy(sampler, ps, n=16):
        return [c.token_ids for c in sampler.sample(ps, max_new_tokens=n, temperature=0.0)]

    cold = greedy(BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[], prefix_cache=None), prompts)
    cache = PrefixCache(100_000, min_tokens=4)
    warm_sampler = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[], prefix_cache=cache, prefill_chunk=16)
    assert greedy(warm_sampler, prompts) == cold
    assert cache.hits >= 2  # rows 2 and 3 reused row 1's shared prefix
    # a follow-up prompt = prompt + completion + more text reuses the whole earlier sequence
    follow = prompts[0] + cold[0] + tok.encode(" and then")
    before = cache.reused_tokens
    again = greedy(warm_sampler, [follow], n=8)
    assert cache.reused_tokens - before >= len(prompts[0]) + len(cold[0]) - 1
    assert again == greedy(BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[]), [follow], n=8)
    warm_sampler.invalidate()
    assert len(cache) == 0


def test_progress_reports_tokens_and_an_eta() -> None:
    policy = TransformersPolicy.from_tiny(seed=3)
    seen: list[GenerationProgress] = []
    policy.on_progress = seen.append
    policy.generate([_req("a", max_new_tokens=40, seed=1, temperature=1.0), _req("b", max_new_tokens=40, seed=2, temperature=1.0)])
    assert seen and seen[-1].rows == 2 and seen[-1].roles == ("agent", "agent")
    assert 0 < seen[-1].tokens <= 80
    assert all(p.step <= p.max_steps == 40 for p in seen)
    assert seen[0].eta_s is not None and seen[0].tokens_per_s > 0


def test_sliced_attention_matches_full_attention() -> None:
    model, tok = build_tiny_model(seed=5, hidden=64, layers=2)
    prompts = [tok.encode("left padded " * 3), tok.encode("x")]
    sliced = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[], bucket=16)
    full = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[], bucket=16, gqa_decode=False)
    a = sliced.sample(prompts, max_new_tokens=40, temperature=0.0)
    b = full.sample(prompts, max_new_tokens=40, temperature=0.0)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    for x, y in zip(a, b):
        assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)


def test_finished_rows_leave_the_batch_without_changing_the_others() -> None:
    model, tok = build_tiny_model(seed=6, hidden=64, layers=2)
    prompts = [tok.encode("first prompt"), tok.encode("second, a longer prompt here"), tok.encode("3")]
    limits = [3, 30, 11]
    cache = PrefixCache(100_000, min_tokens=4)
    batched = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[], check_every=2, prefix_cache=cache)
    together = batched.sample(prompts, max_new_tokens=limits, temperature=1.0, row_seeds=[1, 2, 3])
    for p, n, seed, got in zip(prompts, limits, [1, 2, 3], together):
        alone = BatchSampler(model, pad_id=tok.pad_token_id, eos_ids=[]).sample([p], max_new_tokens=n, temperature=1.0, row_seeds=[seed])[0]
        assert got.token_ids == alone.token_ids and len(got.token_ids) == n
        assert torch.allclose(torch.tensor(got.logprobs), torch.tensor(alone.logprobs), atol=1e-4)
    # every row, including the ones dropped early, was cached with its completion
    for p, got in zip(prompts, together):
        entry, n = cache.lookup(list(p) + got.token_ids + [5])
        assert n == len(p) + len(got.token_ids) - 1
