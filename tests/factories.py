"""Builders of realistic events for tests (one environment's full event chain, or many)."""

from __future__ import annotations

import hashlib

from spade_engine.events import (
    EnvironmentProposed,
    EnvironmentValidated,
    Generation,
    HintWritten,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    RunStopped,
    Turn,
    ValidationCheck,
    make_envelope,
)
from spade_engine.events.envelope import Envelope

CODE = '''class CountEnv:
    def reset(self, seed=None):
        return "count to 3", {}
    def step(self, action):
        ok = action.strip() == "\\\\boxed{3}"
        return "done", 1.0 if ok else 0.0, True, False, {}
'''


def env_chain(run_id: str, env_id: str, *, k: int = 2, win_plain: float = 0.5, producer: str = "test") -> list[Envelope]:
    """The complete event chain of one valid environment with k plain and k hinted plays."""
    proposed = make_envelope(
        EnvironmentProposed(
            env_id=env_id,
            skill="math",
            difficulty=0.5,
            code=CODE,
            code_sha256=hashlib.sha256(CODE.encode()).hexdigest(),
            policy_version="v0",
        ),
        run_id=run_id,
        producer=producer,
    )
    validated = make_envelope(
        EnvironmentValidated(
            env_id=env_id,
            valid=True,
            checks=[ValidationCheck(name="parse", passed=True, detail="ok", seconds=0.001)],
            class_name="CountEnv",
            contract="spade",
            novel=True,
            novelty=0.42,
            accepted=True,
        ),
        run_id=run_id,
        producer=producer,
        causation_id=proposed.event_id,
    )
    hint = make_envelope(
        HintWritten(env_id=env_id, hint="answer in \\boxed{}", policy_version="v0"),
        run_id=run_id,
        producer=producer,
        causation_id=validated.event_id,
    )
    plays = []
    plain, hinted = [], []
    for hinted_flag in (False, True):
        for i in range(k):
            won = (i / k) < (win_plain if not hinted_flag else 1.0)
            r = 1.0 if won else 0.0
            (hinted if hinted_flag else plain).append(r)
            plays.append(
                make_envelope(
                    RolloutCompleted(
                        env_id=env_id,
                        play_id=f"{env_id}-{int(hinted_flag)}-{i}",
                        hinted=hinted_flag,
                        seed=i,
                        policy_version="v0",
                        episode_reward=r,
                        turns=[
                            Turn(
                                observation="count to 3",
                                action="\\boxed{3}" if won else "\\boxed{2}",
                                reward=r,
                                terminated=True,
                                generation=Generation(
                                    prompt_token_ids=[1, 2, 3], completion_token_ids=[4, 5], logprobs=[-0.5, -1.25]
                                ),
                            )
                        ],
                        terminated=True,
                        end_reason="terminated",
                        index=i,
                    ),
                    run_id=run_id,
                    producer=producer,
                    causation_id=hint.event_id,
                )
            )
    wp, wh = sum(plain) / k, sum(hinted) / k
    regret = make_envelope(
        RegretEstimated(
            env_id=env_id,
            skill="math",
            plain_rewards=plain,
            hinted_rewards=hinted,
            win_rate_plain=wp,
            win_rate_hinted=wh,
            regret=max(0.0, wh - wp),
            designer_reward=0.7,
            rollout_ids=[p.event_id for p in plays],
        ),
        run_id=run_id,
        producer=producer,
        causation_id=hint.event_id,
    )
    return [proposed, validated, hint, *plays, regret]


def run_events(run_id: str, n_envs: int = 3, *, k: int = 2) -> list[Envelope]:
    """RunStarted, n_envs complete environment chains, RunStopped."""
    out = [
        make_envelope(
            RunStarted(config={"seed": 0}, engine_version="test", seed=0), run_id=run_id, producer="test"
        )
    ]
    for i in range(n_envs):
        out.extend(env_chain(run_id, f"env-{i:04d}", k=k))
    out.append(make_envelope(RunStopped(reason="completed"), run_id=run_id, producer="test"))
    return out
