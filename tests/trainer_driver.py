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


def play_curriculum_round(policy, log, run_id: str, cfg, *, n_slots: int = 4, k: int = 8, max_new_tokens: int = 3,
                          reward=None) -> list:
    """Like :func:`play_round`, but each slot is a curriculum decision from the log: with level
    replay on (``cfg.replay``), :func:`~spade_engine.engine.level_replay.choose_replay` may pick
    an archived environment (recorded as EnvironmentReplayed) whose next round is played instead
    of a new one. Env ids and estimates are the engine's (``env_id_for``, ``estimate_round``).
    Returns the replay choices of this round."""
    from spade_engine.engine.level_replay import choose_replay
    from spade_engine.engine.pipeline import env_id_for, output_event_id
    from spade_engine.engine.rounds import estimate_round, prior_of, round_play_specs
    from spade_engine.engine.state import RunState
    from spade_engine.events import EnvironmentValidated

    reward = reward or reward_of
    state = RunState.from_log(log)

    def append(payload):
        log.append([make_envelope(payload, run_id=run_id, producer="test", event_id=output_event_id(run_id, payload))])
        state.refresh(log)

    choices = []
    for _ in range(n_slots):
        choice = choose_replay(cfg.replay, cfg.loop, state, seed=cfg.seed, policy_version=policy.version)
        if choice is not None:
            append(choice)
            choices.append(choice)
            env_id, round_ = choice.env_id, choice.round
        else:
            env_id, round_ = env_id_for(run_id, len(state.roots())), 0
            append(EnvironmentProposed(env_id=env_id, skill="words", difficulty=0.5, code=CODE,
                                       code_sha256=hashlib.sha256(CODE.encode()).hexdigest(), policy_version=policy.version))
            append(EnvironmentValidated(env_id=env_id, valid=True, accepted=True))
        specs = round_play_specs(cfg.seed, env_id, round_, plain=k, hinted=0)
        samples = policy.generate([PolicyRequest(role="agent", messages=PROMPT, seed=s.seed, max_new_tokens=max_new_tokens)
                                   for s in specs])
        for s, sample in zip(specs, samples):
            r = reward(sample.completion_token_ids)
            append(RolloutCompleted(
                env_id=env_id, play_id=f"{env_id}/r{round_}/p{s.index}", hinted=False, seed=s.seed, policy_version=policy.version,
                episode_reward=r, terminated=True, index=s.index, round=round_,
                turns=[Turn(observation="Say a word.", action=sample.text, reward=r, terminated=True, generation=sample.generation())],
            ))
        st = state.env(env_id)
        append(estimate_round(st.proposed, st.all_plays(), cfg.reward, cfg.loop, round_=round_, replay=choice is not None,
                              prev=state.lp_heads.get("words"), prior=prior_of([e for _, e in st.estimates.values()], round_)))
    return choices
