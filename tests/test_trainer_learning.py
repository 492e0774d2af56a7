"""The learning test: a tiny random model learns a reward only through events in the log.

Each round, a TransformersPolicy plays new environments (reward 1 when the first completion token
is a lowercase letter; chance is ~0.10 for the random byte-level model) and the plays are
recorded as RolloutCompleted/RegretEstimated events; a *new* Trainer object is built from the log
(so all of its state comes from PolicyUpdated events, checkpoints and offsets), trains on what it
has not consumed yet and publishes PolicyUpdated; the policy loads the new version from the log.
Mean reward must rise from chance to >= 0.8 within a bounded number of updates, and the same
procedure with learning rate 0 must not. The learning test runs twice: with level replay off
(every slot a new environment) and on (``replay.p`` 0.5, scored by positive value loss: replayed
environments' rounds are played and trained on too), and the replay choices recorded in the log
must recompute exactly from the scores and staleness of what the log held before them.
"""

from __future__ import annotations

import pytest

from spade_engine.blobs import BlobStore
from spade_engine.config import TrainerConfig
from spade_engine.policy.protocol import PolicyRequest
from spade_engine.policy.transformers_policy import TransformersPolicy
from spade_engine.events import PolicyUpdated, SqliteEventLog
from spade_engine.trainer.checkpoints import sync_policy
from spade_engine.trainer.loop import Trainer
from spade_engine.config import load_config
from spade_engine.engine.level_replay import pvl, verify_replays
from trainer_driver import PROMPT, play_curriculum_round, play_round, reward_of, start_run

MAX_UPDATES = 24


def evaluate(policy: TransformersPolicy, n: int = 64) -> float:
    reqs = [PolicyRequest(role="agent", messages=PROMPT, seed=10_000_000 + i, max_new_tokens=1) for i in range(n)]
    return sum(reward_of(s.completion_token_ids) for s in policy.generate(reqs)) / n


REPLAY = load_config(overrides={"replay.enabled": True, "replay.p": 0.5, "replay.score": "pvl", "replay.min_candidates": 4,
                                 "replay.hinted": False, "seed": 1}, environ={})


def train_from_log(tmp_path, lr: float, rounds: int, stop_at: float | None = None, *, replay: bool = False) -> tuple[list[float], SqliteEventLog, BlobStore, TransformersPolicy]:
    log = SqliteEventLog(tmp_path / "events.sqlite", "run-learn")
    blobs = BlobStore(tmp_path / "blobs")
    start_run(log, "run-learn")
    policy = TransformersPolicy.from_tiny(seed=0)
    cfg = TrainerConfig(learning_rate=lr, batch_groups=4, micro_batch_size=32, device="cpu", max_lag=1)
    curve = [evaluate(policy)]
    for rnd in range(rounds):
        if replay:
            play_curriculum_round(policy, log, "run-learn", REPLAY)
        else:
            play_round(policy, log, "run-learn", rnd)
        trainer = Trainer(log, blobs=blobs, config=cfg, base_model="tiny:0")  # state only from the log
        trainer.run()
        assert sync_policy(policy, log, blobs) or policy.version == trainer.state.version
        curve.append(evaluate(policy))
        if stop_at is not None and curve[-1] >= stop_at:
            break
    return curve, log, blobs, policy


@pytest.mark.slow
@pytest.mark.parametrize("replay", [False, True], ids=["replay-off", "replay-on"])
def test_mean_reward_rises_from_chance_through_the_log_only(tmp_path, replay):
    curve, log, blobs, policy = train_from_log(tmp_path, 3e-2, MAX_UPDATES, stop_at=0.8, replay=replay)
    assert curve[0] < 0.3, f"initial reward should be near chance (~0.1): {curve}"
    assert curve[-1] >= 0.8, f"mean reward did not reach 0.8 within {MAX_UPDATES} updates: {curve}"
    updates = [r.envelope.event() for r in log.read() if r.envelope.type == "PolicyUpdated"]
    assert 1 <= len(updates) <= MAX_UPDATES
    # a linear version chain, each update consuming a later part of the log than its parent
    for prev, cur in zip(updates, updates[1:]):
        assert cur.parent_version == prev.version and cur.step == prev.step + 1
        assert cur.consumed["0"] > prev.consumed["0"]
    # every group trained exactly once
    envs = [e for u in updates for e in u.env_ids]
    assert len(envs) == len(set(envs))
    assert policy.version == updates[-1].version
    assert log.committed("trainer") == {0: updates[-1].consumed["0"]}
    choices = [r.envelope.event() for r in log.read() if r.envelope.type == "EnvironmentReplayed"]
    if not replay:
        assert choices == []
        return
    # level replay happened, its rounds were trained on, and every choice is the one its scores give
    assert len(choices) >= 2, f"{len(choices)} replays in {len(curve) - 1} rounds"
    assert any("@r" in e for e in envs)
    assert verify_replays(log, REPLAY) == []
    estimates = {}
    for rec in log.read():
        if rec.envelope.type == "RegretEstimated":
            est = rec.envelope.event()
            estimates.setdefault(est.env_id, []).append((rec.offset, est))
    for c in choices:
        before = [e for off, e in estimates[c.env_id] if off < c.basis["0"]]
        latest = before[-1]
        # pvl of the latest round's plays (0/1: solved share) against the value it had before them:
        # the previous round's smoothed win rate, for a first round the skill's slow EMA
        assert latest.value is not None
        if len(before) > 1:
            assert latest.value == before[-2].win_rate_smoothed
        assert c.score == latest.pvl == pvl(latest.plain_rewards, latest.value) and c.round == latest.round + 1
        assert 0 < c.probability <= 1 and 1 <= c.rank <= c.candidates


@pytest.mark.slow
def test_control_with_learning_rate_zero_does_not_learn(tmp_path):
    curve, log, blobs, _ = train_from_log(tmp_path, 0.0, 10)
    updates: list[PolicyUpdated] = [r.envelope.event() for r in log.read() if r.envelope.type == "PolicyUpdated"]
    assert len(updates) >= 8  # the trainer did run and publish versions...
    assert max(curve) < 0.4, f"lr=0 must not learn: {curve}"
    # ...but with lr 0 the weights never change: every checkpoint is the same blob
    assert len({u.checkpoint.sha256 for u in updates}) == 1
