"""A minimal rollout driver for trainer tests: a single-turn environment whose reward a tiny model
can learn (reward 1 when the completion's first token is a lowercase ASCII letter: chance ~26/259
for a random byte-level model), played by a real TransformersPolicy, recorded as events."""

from __future__ import annotations

import hashlib

from spade_engine.policy.protocol import PolicyRequest
from spade_engine.events import (
    EnvironmentProposed,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    Turn,
    make_envelope,
)

TARGET = set(range(ord("a"), ord("z") + 1))
PROMPT = [{"role": "user", "content": "Say a word."}]
CODE = "class WordEnv:\n    pass\n"


def reward_of(token_ids: list[int]) -> float:
    return 1.0 if token_ids and token_ids[0] in TARGET else 0.0


def start_run(log, run_id: str) -> None:
    log.append([make_envelope(RunStarted(config={}, engine_version="test", seed=0), run_id=run_id, producer="test")])


def play_round(policy, log, run_id: str, round_no: int, *, n_envs: int = 4, k: int = 8, max_new_tokens: int = 3, reward=None) -> float:
    """Play ``n_envs`` new environments ``k`` times each with ``policy``; record the events;
    return the mean reward of the plays. ``reward`` maps completion token ids to a reward
    (default :func:`reward_of`)."""
    reward = reward or reward_of
    reqs, keys = [], []
    for e in range(n_envs):
        for i in range(k):
            reqs.append(PolicyRequest(role="agent", messages=PROMPT, seed=round_no * 100_000 + e * 1000 + i, max_new_tokens=max_new_tokens))
            keys.append((f"env-{round_no:03d}-{e}", i))
    samples = policy.generate(reqs)
    events = []
    rewards_by_env: dict[str, list[float]] = {}
    ids_by_env: dict[str, list[str]] = {}
    for e in range(n_envs):
        env_id = f"env-{round_no:03d}-{e}"
        events.append(
            make_envelope(
                EnvironmentProposed(env_id=env_id, skill="words", difficulty=0.5, code=CODE,
                                    code_sha256=hashlib.sha256(CODE.encode()).hexdigest(), policy_version=policy.version),
                run_id=run_id, producer="test",
            )
        )
    for (env_id, i), s in zip(keys, samples):
        r = reward(s.completion_token_ids)
        env = make_envelope(
            RolloutCompleted(
                env_id=env_id, play_id=f"{env_id}-{i}", hinted=False, seed=i, policy_version=policy.version,
                episode_reward=r, terminated=True,
                turns=[Turn(observation="Say a word.", action=s.text, reward=r, terminated=True, generation=s.generation())],
            ),
            run_id=run_id, producer="test",
        )
        events.append(env)
        rewards_by_env.setdefault(env_id, []).append(r)
        ids_by_env.setdefault(env_id, []).append(env.event_id)
    for env_id, rs in rewards_by_env.items():
        wr = sum(rs) / len(rs)
        events.append(
            make_envelope(
                RegretEstimated(env_id=env_id, skill="words", plain_rewards=rs, hinted_rewards=[], win_rate_plain=wr,
                                win_rate_hinted=0.0, regret=0.0, designer_reward=0.0, policy_version=policy.version,
                                rollout_ids=ids_by_env[env_id]),
                run_id=run_id, producer="test",
            )
        )
    log.append(events)
    all_r = [r for rs in rewards_by_env.values() for r in rs]
    return sum(all_r) / len(all_r)
