"""A real model in the loop (issue 17): Qwen2.5-Coder-0.5B-Instruct, greedy, short token limits,
writes a hint and plays one episode through the sandbox; token ids, behaviour log-probs and the
finish reason of every completion are recorded.

The model is the catalogue's ``qwen2.5-coder-0.5b-instruct``, looked up where ``spade-engine
models fetch`` puts it: ``$SPADE_MODEL_CACHE/<name>/hf``, else the user-wide
``$XDG_CACHE_HOME/spade-engine/models/<name>/hf`` (or an older ``<data dir>/models``). CI fetches it once into a cache directory
outside the clone and points ``SPADE_MODEL_CACHE`` there, so later runs reuse it. Without the
model the test is skipped with that instruction (it is the only reason to skip), except in CI
(``CI`` set), where a missing model fails it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_support import fast_config
from spade_engine.config import load_config
from spade_engine.engine import stages
from spade_engine.engine.corpus import bundled_corpus
from spade_engine.engine.seed_archive import load_seed_envs
from spade_engine.events.catalogue import END_REASONS
from spade_engine.policy.protocol import FINISH_REASONS

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

MODEL = "qwen2.5-coder-0.5b-instruct"


def model_dir() -> Path | None:
    """The model where the engine finds it (``--model qwen2.5-coder-0.5b-instruct``)."""
    from spade_engine.models import ModelCache

    entry = ModelCache.resolve().find_entry(MODEL)
    return ModelCache.model_dir(entry) if ModelCache.is_complete(entry) else None


@pytest.fixture(scope="module")
def policy():
    d = model_dir()
    if d is None:
        if os.environ.get("CI"):  # CI fetches it in .ci/run: missing there is a failure, not a skip
            pytest.fail(f"{MODEL} is not in SPADE_MODEL_CACHE={os.environ.get('SPADE_MODEL_CACHE')!r}: .ci/run fetches it")
        pytest.skip(
            f"{MODEL} is not fetched: run `spade-engine models fetch {MODEL}` (CI: fetch it once into a cache "
            "outside the clone and set SPADE_MODEL_CACHE to it)"
        )
    from spade_engine.policy.transformers_policy import TransformersPolicy

    p = TransformersPolicy.from_pretrained(str(d), device="cpu")
    yield p
    p.close()


def _check_generation(g) -> None:
    assert g is not None and g.prompt_token_ids and g.completion_token_ids
    assert len(g.logprobs) == len(g.completion_token_ids) and all(lp <= 1e-6 for lp in g.logprobs)
    assert g.finish_reason in FINISH_REASONS


def test_the_real_model_writes_a_hint_and_plays_an_episode_in_the_sandbox(policy) -> None:
    assert policy.tokenizer.chat_template and policy.context_window == 32_768
    cfg = load_config(overrides={
        "policy.kind": "transformers", "policy.model": MODEL, "policy.generation.temperature": 0.0,
        "policy.generation.hinter.max_new_tokens": 24, "policy.generation.agent.max_new_tokens": 24,
        "loop.turn_limit": 2, "loop.plays_per_env": 1,
    })
    seed = next(s for s in load_seed_envs("bundled") if s.name == "shift_cipher")
    from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout

    with SandboxPool(fast_config(step_timeout_s=5.0)) as pool:
        ctx = stages.StageContext(
            run_id="run-real-abcdef", cfg=cfg, policy=policy, corpus=bundled_corpus(), pool=pool, tokenize=policy.tokenize,
            step_errors=((StepTimeout,), (SandboxCrash, SandboxError)),
        )
        proposed = stages.seed_proposal(ctx, seed, "abcdef-s00000")
        hint = stages.write_hint(ctx, proposed)
        assert hint.hint.strip()
        _check_generation(hint.generation)
        assert len(hint.generation.completion_token_ids) <= 24
        played = []
        spec = stages.play_specs(cfg.seed, proposed.env_id, 1)[0]
        stages.play(ctx, proposed, hint, [spec], on_done=played.append)
    (play,) = played
    assert play.end_reason in END_REASONS and play.turns and len(play.turns) <= 2
    for turn in play.turns:
        _check_generation(turn.generation)
        assert len(turn.generation.completion_token_ids) <= 24
    if play.end_reason == "agent_length":  # a reply cut at 24 tokens ends the episode at reward 0
        assert play.turns[-1].generation.finish_reason == "length" and play.episode_reward == 0.0
    # greedy: the same prompt gives the same tokens
    again = stages.write_hint(ctx, proposed)
    assert again.generation.completion_token_ids == hint.generation.completion_token_ids
