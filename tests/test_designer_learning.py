"""The designer learns through the log: a tiny random model proposes environments, and the
designer reward it gets is learnable.

Each round the TransformersPolicy writes ``N_ENVS`` proposals in the designer role (three skills in
turn, so the per-skill running baseline is exercised); a proposal is rewarded 1 when it opens by
declaring its difficulty with a word (its first completion token is an ASCII letter; chance about
52/259 for the random byte-level model), else 0. The reward is recorded the way the engine records
it: the proposal's ``EnvironmentProposed`` (with the designer's tokens and behaviour log-probs), an
accepted ``EnvironmentValidated``, plays without tokens (so the agent role has nothing to learn)
and a designer-final ``RegretEstimated`` carrying the designer reward. A new Trainer is built from
the log every round (all its state from PolicyUpdated events, checkpoints and offsets), trained
with the default designer baseline (``window``), and the policy loads the new version from the log.
The mean designer reward must rise well above chance; with learning rate 0 it must not.
"""

from __future__ import annotations

import hashlib

import pytest

from spade_engine.blobs import BlobStore
from spade_engine.config import TrainerConfig
from spade_engine.events import (
    EnvironmentProposed,
    EnvironmentValidated,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
    SqliteEventLog,
    make_envelope,
)
from spade_engine.policy.protocol import PolicyRequest
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.trainer.checkpoints import sync_policy
from spade_engine.trainer.loop import Trainer
from trainer_driver import start_run

pytestmark = pytest.mark.slow

RUN = "run-designer"
DESIGN = [{"role": "user", "content": "Design an environment. Declare its difficulty first."}]
SKILLS = ("arithmetic", "sequence", "tool_use")
LETTERS = set(range(ord("a"), ord("z") + 1)) | set(range(ord("A"), ord("Z") + 1))
N_ENVS = 8
MAX_ROUNDS = 24
CODE = "class DeclaredEnv:\n    pass\n"


def designer_reward(token_ids: list[int]) -> float:
    return 1.0 if token_ids and token_ids[0] in LETTERS else 0.0


def design_round(policy: TransformersPolicy, log: SqliteEventLog, rnd: int) -> float:
    reqs = [PolicyRequest(role="designer", messages=DESIGN, seed=rnd * 1000 + i, max_new_tokens=3) for i in range(N_ENVS)]
    events, rewards = [], []
    for i, sample in enumerate(policy.generate(reqs)):
        env_id, skill = f"env-{rnd:03d}-{i}", SKILLS[(rnd * N_ENVS + i) % len(SKILLS)]
        r = designer_reward(sample.completion_token_ids)
        rewards.append(r)
        plays = [RolloutCompleted(env_id=env_id, play_id=f"{env_id}/p{k}", hinted=False, seed=k, policy_version=policy.version,
                                  episode_reward=float(k % 2), terminated=True, index=k) for k in range(2)]
        play_envs = [make_envelope(p, run_id=RUN, producer="test") for p in plays]
        events += [
            make_envelope(EnvironmentProposed(env_id=env_id, skill=skill, difficulty=0.5, code=CODE,
                                              code_sha256=hashlib.sha256(CODE.encode()).hexdigest(),
                                              policy_version=policy.version, completion=sample.text,
                                              generation=sample.generation()), run_id=RUN, producer="test"),
            make_envelope(EnvironmentValidated(env_id=env_id, valid=True, accepted=True), run_id=RUN, producer="test"),
            *play_envs,
            make_envelope(RegretEstimated(env_id=env_id, skill=skill, plain_rewards=[0.0, 1.0], hinted_rewards=[],
                                          win_rate_plain=0.5, win_rate_hinted=0.0, regret=0.0, designer_reward=r,
                                          policy_version=policy.version, rollout_ids=[e.event_id for e in play_envs]),
                          run_id=RUN, producer="test"),
        ]
    log.append(events)
    return sum(rewards) / len(rewards)


def evaluate(policy: TransformersPolicy, n: int = 64) -> float:
    reqs = [PolicyRequest(role="designer", messages=DESIGN, seed=20_000_000 + i, max_new_tokens=1) for i in range(n)]
    return sum(designer_reward(s.completion_token_ids) for s in policy.generate(reqs)) / n


def train_designer(tmp_path, lr: float, rounds: int, stop_at: float | None = None):
    log = SqliteEventLog(tmp_path / "events.sqlite", RUN)
    blobs = BlobStore(tmp_path / "blobs")
    start_run(log, RUN)
    policy = TransformersPolicy.from_tiny(seed=0)
    cfg = TrainerConfig(learning_rate=lr, batch_groups=N_ENVS, micro_batch_size=32, device="cpu", max_lag=1)
    assert cfg.designer_baseline == "window"  # the default
    curve = [evaluate(policy)]
    for rnd in range(rounds):
        design_round(policy, log, rnd)
        trainer = Trainer(log, blobs=blobs, config=cfg, base_model="tiny:0")  # state only from the log
        trainer.run()
        assert sync_policy(policy, log, blobs) or policy.version == trainer.state.version
        curve.append(evaluate(policy))
        if stop_at is not None and curve[-1] >= stop_at:
            break
    updates: list[PolicyUpdated] = [r.envelope.event() for r in log.read() if r.envelope.type == "PolicyUpdated"]
    log.close()
    return curve, updates


def test_designer_mean_reward_rises_through_the_log_only(tmp_path):
    curve, updates = train_designer(tmp_path, 3e-2, MAX_ROUNDS, stop_at=0.8)
    assert curve[0] < 0.35, f"initial designer reward should be near chance (~0.2): {curve}"
    assert curve[-1] >= 0.8, f"designer reward did not reach 0.8 within {MAX_ROUNDS} rounds: {curve}"
    assert all(u.roles == ["designer"] for u in updates)  # only the designer had a signal
    # every designer sample but the run's first had a baseline (the running per-skill window)
    assert sum(u.metrics.get("designer_no_baseline", 0) for u in updates) <= 1
    assert all(u.metrics["designer_candidates"] >= N_ENVS and 0 < u.metrics["designer_used_share"] <= 1 for u in updates)


def test_designer_control_with_learning_rate_zero_does_not_learn(tmp_path):
    curve, updates = train_designer(tmp_path, 0.0, 10)
    assert len(updates) >= 8
    assert max(curve) < 0.4, f"lr=0 must not learn: {curve}"
    assert len({u.checkpoint.sha256 for u in updates}) == 1
