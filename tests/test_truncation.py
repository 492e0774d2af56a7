"""Truncation (issue 17): a designer completion cut by its token limit is rejected as `truncated`
before any validation (and its repair says so); an agent reply cut by its token limit ends the
episode with reward 0 without reaching the environment; a conversation that outgrows the model's
context window ends cleanly. All with the tiny model and tiny token limits."""

from __future__ import annotations

import string

from spade_engine.config import load_config
from spade_engine.engine import stages
from spade_engine.engine.corpus import bundled_corpus
from spade_engine.engine.rollouts import AGENT_SYSTEM_PROMPT, PlaySpec, play_episodes
from spade_engine.policy.transformers_policy import TransformersPolicy


def _ctx(policy, **overrides) -> stages.StageContext:
    cfg = load_config(overrides={"policy.kind": "transformers", "policy.model": "tiny", **overrides})
    # no validator and no sandbox: a truncated completion must never reach them
    return stages.StageContext(run_id="run-x-abcdef", cfg=cfg, policy=policy, corpus=bundled_corpus(), tokenize=policy.tokenize)


def test_a_truncated_designer_completion_is_rejected_before_validation_and_repaired_as_such() -> None:
    policy = TransformersPolicy.from_tiny(seed=3)
    policy.sampler.eos_ids = []  # the random model could end a completion by chance: here it never does
    ctx = _ctx(policy, **{"policy.generation.designer.max_new_tokens": 8})
    job = stages.design_job(ctx, env_id="abcdef-e00000", index=0, skill_history=lambda s: [])
    (proposed,) = stages.propose_batch(ctx, [job])
    assert job.request.max_new_tokens == 8 and job.request.temperature == 0.6
    assert proposed.generation.finish_reason == "length" and len(proposed.generation.completion_token_ids) == 8
    (verdict,) = stages.validate_batch(ctx, [proposed])
    assert not verdict.valid and verdict.error_kind == "truncated" and verdict.failed_check == "generation"
    assert "token limit after 8 tokens" in verdict.checks[0].detail
    # token ids offloaded to a blob (as the engine stores long completions): no invented "0 tokens"
    import msgspec

    from spade_engine.events.catalogue import BlobRef

    gen = msgspec.structs.replace(proposed.generation, prompt_token_ids=[], completion_token_ids=[], logprobs=[],
                                  ref=BlobRef(uri="cas://sha256/" + "0" * 64, sha256="0" * 64, size=1))
    (offloaded,) = stages.validate_batch(ctx, [msgspec.structs.replace(proposed, generation=gen)])
    assert offloaded.error_kind == "truncated" and "0 tokens" not in offloaded.checks[0].detail
    assert offloaded.checks[0].detail.startswith("the completion reached its token limit (finish reason length)")
    # it goes back to the designer with its own message
    from spade_engine.engine.state import EnvState

    st = EnvState(env_id=proposed.env_id, proposed=proposed, validated=verdict)
    assert st.repairable
    repair = stages.repair_job(ctx, env_id="abcdef-e00000-r1", failed=proposed, verdict=verdict, skill_history=lambda s: [])
    last = repair.messages[-1]["content"]
    assert "cut off at 8 tokens" in last and "TURN BUDGET" in last and "REFERENCE DOCUMENT" in last
    assert "YOUR PREVIOUS ENVIRONMENT" not in last  # a cut completion is not shown back
    assert [m["role"] for m in repair.messages] == ["system", "user"]


class _CountingSession:
    """A stand-in session (no sandbox): counts steps; its observations are long."""

    def __init__(self, log: list[str], obs: str = "o" * 200):
        self.log, self.obs = log, obs

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def reset(self, seed=None):
        return "Reply with \\boxed{x}.", {}

    def step(self, action):
        self.log.append(action)
        return self.obs, 0.0, False, False, {}


def test_an_agent_reply_cut_by_its_token_limit_ends_the_episode_with_reward_zero() -> None:
    policy = TransformersPolicy.from_tiny(seed=3)
    policy.sampler.eos_ids = []  # never ends by chance
    ctx = _ctx(policy, **{"policy.generation.agent.max_new_tokens": 3})
    steps: list[str] = []
    (play,) = play_episodes(
        env_id="abcdef-e00000", specs=[PlaySpec(index=0, hinted=False, seed=5)], open_session=lambda: _CountingSession(steps),
        generate=ctx.generate, policy_version="v0", hint=None, turn_limit=6, settings=ctx.settings("agent"),
    )
    assert steps == []  # the cut reply never reached the environment
    assert play.end_reason == "agent_length" and play.truncated and not play.terminated and play.episode_reward == 0.0
    (turn,) = play.turns
    assert turn.generation.finish_reason == "length" and len(turn.generation.completion_token_ids) == 3
    assert len(turn.generation.logprobs) == 3 and turn.reward == 0.0


def test_a_conversation_that_outgrows_the_context_window_ends_cleanly() -> None:
    stops = tuple(string.ascii_letters + string.digits + string.punctuation)  # the tiny model's reply stops early
    probe = TransformersPolicy.from_tiny(seed=3)
    first_prompt = len(probe.render(_ctx(probe).request("agent", [
        {"role": "system", "content": AGENT_SYSTEM_PROMPT},
        {"role": "user", "content": "Reply with \\boxed{x}."},
    ])))
    policy = TransformersPolicy.from_tiny(seed=3, context_window=first_prompt + 60, min_new_tokens=8)
    ctx = _ctx(policy, **{"policy.generation.agent.max_new_tokens": 40, "policy.generation.agent.stop": list(stops)})
    steps: list[str] = []
    (play,) = play_episodes(
        env_id="abcdef-e00000", specs=[PlaySpec(index=0, hinted=False, seed=5)], open_session=lambda: _CountingSession(steps),
        generate=ctx.generate, policy_version="v0", hint=None, turn_limit=6, settings=ctx.settings("agent"),
    )
    # turn 1 fits and reaches the environment; its 200-character answer leaves no room for turn 2
    assert len(steps) == 1 and len(play.turns) == 1
    assert play.turns[0].generation.finish_reason == "stop_string"
    assert play.end_reason == "context" and play.truncated and play.episode_reward == 0.0 and play.error is None


def test_plays_recorded_before_end_reasons_read_with_one() -> None:
    """RolloutCompleted v1/v2 (no end_reason) are upcast to v3 on read; the projections' summary
    decoder reads every version."""
    import msgspec

    from spade_engine.archive.records import decode_record
    from spade_engine.events.catalogue import RolloutCompleted, decode_payload
    from spade_engine.events.codec import make_envelope
    from spade_engine.events.log import Record

    base = {"env_id": "e", "play_id": "e/p0", "hinted": False, "seed": 1, "policy_version": "v0", "episode_reward": 0.0}
    cases = [
        ({"terminated": True, "episode_reward": 1.0}, "terminated"),
        ({"step_timeout": True, "error": "step timeout: x"}, "step_timeout"),
        ({"error": "sandbox crash: y"}, "sandbox_crash"),
        ({"truncated": True}, "truncated"),
    ]
    for version in (1, 2):
        for extra, reason in cases:
            ev = decode_payload("RolloutCompleted", version, {**base, **extra})
            assert isinstance(ev, RolloutCompleted) and ev.end_reason == reason and ev.round == 0
    env = make_envelope(RolloutCompleted(**base, end_reason="agent_length"), run_id="r", producer="t")
    old = msgspec.structs.replace(env, schema_version=1, payload={**base, "turns": [{"observation": "o", "action": "a", "reward": 0.0}]})
    for e in (env, old):
        summary, why = decode_record(Record(0, 0, e, b""))
        assert why is None and summary.env_id == "e"
    assert RolloutCompleted.VERSION >= 3  # v4 (issue 31) added blob references to turns


def test_the_agent_is_asked_for_an_empty_box_and_a_run_can_give_its_own_system_prompt() -> None:
    """A placeholder inside the braces is copied by small models (``<action>`` tags, the word
    "answer"): neither the agent's system prompt nor TextGame's instruction lines hold one."""
    import re

    from spade_engine.policy.protocol import Sample
    from spade_engine.sandbox.scaffold import BASE_SOURCE

    placeholder = re.compile(r"\\boxed\{[^}]")
    assert "\\boxed{}" in AGENT_SYSTEM_PROMPT and not placeholder.search(AGENT_SYSTEM_PROMPT)
    lines = [ln for ln in BASE_SOURCE.splitlines() if "found:" in ln or "Please reason" in ln or "Each turn" in ln]
    assert len(lines) == 4 and not any(placeholder.search(ln.replace("\\\\", "\\")) for ln in lines)
    seen: list[list[dict]] = []

    def generate(requests):
        seen.extend(r.messages for r in requests)
        return [Sample(text="\\boxed{x}", finish_reason="stop") for _ in requests]

    steps: list[str] = []
    for prompt in (None, "Custom prompt."):
        play_episodes(env_id="abcdef-e00000", specs=[PlaySpec(index=0, hinted=False, seed=5)],
                      open_session=lambda: _CountingSession(steps), generate=generate, policy_version="v0", hint=None,
                      turn_limit=1, system_prompt=prompt)
    assert [m[0]["content"] for m in seen] == [AGENT_SYSTEM_PROMPT, "Custom prompt."]
    assert steps == ["\\boxed{x}", "\\boxed{x}"]
