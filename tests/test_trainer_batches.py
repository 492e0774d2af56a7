"""Events -> training samples: grouping by environment, completeness at RegretEstimated, stale
plays dropped and counted, zero-variance groups skipped and counted, designer rewards centred per
skill, resume cursor, and the trainer's staleness/skip counters in PolicyUpdated metrics."""

from __future__ import annotations

import pytest

from spade_engine.blobs import BlobStore
from spade_engine.config import TrainerConfig
from spade_engine.events import (
    EnvironmentProposed,
    EnvironmentValidated,
    Generation,
    RegretEstimated,
    RolloutCompleted,
    SqliteEventLog,
    Turn,
    make_envelope,
)
from spade_engine.events.log import Record
from spade_engine.trainer.batches import BatchAssembler, build_samples
from spade_engine.trainer.loop import Trainer

RUN = "run-b"


def _gen(n=2):
    return Generation(prompt_token_ids=[72, 105], completion_token_ids=list(range(97, 97 + n)), logprobs=[-1.0] * n)


def _events(env_id, rewards, *, version="v0", skill="math", designer_reward=0.5, hinted_extra=True):
    out = [
        make_envelope(
            EnvironmentProposed(env_id=env_id, skill=skill, difficulty=0.5, code="x", code_sha256="0" * 64,
                                policy_version=version, generation=_gen(3)),
            run_id=RUN, producer="t",
        )
    ]
    for i, r in enumerate(rewards):
        out.append(make_envelope(
            RolloutCompleted(env_id=env_id, play_id=f"{env_id}-{i}", hinted=False, seed=i, policy_version=version,
                             episode_reward=r, turns=[Turn(observation="o", action="a", reward=r, generation=_gen())]),
            run_id=RUN, producer="t"))
    if hinted_extra:
        out.append(make_envelope(
            RolloutCompleted(env_id=env_id, play_id=f"{env_id}-h", hinted=True, seed=0, policy_version=version,
                             episode_reward=1.0, turns=[Turn(observation="o", action="a", reward=1.0, generation=_gen())]),
            run_id=RUN, producer="t"))
    out.append(make_envelope(
        RegretEstimated(env_id=env_id, skill=skill, plain_rewards=list(rewards), hinted_rewards=[1.0],
                        win_rate_plain=0.0, win_rate_hinted=1.0, regret=0.0, designer_reward=designer_reward),
        run_id=RUN, producer="t"))
    return out


def _records(envs):
    return [Record(0, i, e, b"") for i, e in enumerate(envs)]


def test_groups_complete_at_regret_and_advantages():
    asm = BatchAssembler()
    recs = _records(_events("e1", [1.0, 0.0, 0.0, 0.0]))
    for r in recs[:-1]:
        asm.observe(r)
    assert not asm.ready and len(asm.pending[("e1", 0)]) == 4  # the hinted play is not in the group
    asm.observe(recs[-1])
    (group,) = asm.take(5)
    samples, stats = build_samples([group], current_step=0, max_lag=4, lag_of=asm.lag, designer=False)
    assert [s.advantage for s in samples] == [0.75, -0.25, -0.25, -0.25]
    assert all(s.role == "agent" and s.completion_ids == [97, 98] and s.behaviour_logprobs == [-1.0, -1.0] for s in samples)
    assert stats.groups_used == 1 and stats.agent_samples == 4 and stats.zero_variance_groups == 0


def test_zero_variance_and_stale_are_counted_and_designer_centred_per_skill():
    """designer_baseline="batch": the release's per-skill centring within the batch."""
    asm = BatchAssembler()
    evs = (
        _events("same", [1.0, 1.0], designer_reward=0.9)
        + _events("old", [1.0, 0.0], version="v1", designer_reward=0.1)
        + _events("new", [0.0, 1.0], version="v5", designer_reward=0.3)
        + _events("solo", [0.0, 1.0], version="v5", skill="code", designer_reward=0.8)
    )
    asm.version_steps.update({"v1": 1, "v5": 5})
    for r in _records(evs):
        asm.observe(r)
    groups = asm.take(10)
    assert [g.env_id for g in groups] == ["same", "old", "new", "solo"]
    samples, stats = build_samples(groups, current_step=6, max_lag=2, lag_of=asm.lag, designer_baseline="batch")
    # "same" (v0, lag 6) and "old" (v1, lag 5) are beyond max_lag 2: their 2 plays and their
    # proposal each are dropped and counted, before any variance check
    assert stats.stale_dropped == (2 + 1) + (2 + 1)
    assert stats.zero_variance_groups == 0
    agent = [s for s in samples if s.role == "agent"]
    assert {s.env_id for s in agent} == {"new", "solo"}
    designer = [s for s in samples if s.role == "designer"]
    # only "new" (math) and "solo" (code) proposals are fresh: one per skill -> no baseline
    assert designer == [] and stats.designer_singletons == 2

    stats2 = build_samples(groups, current_step=0, max_lag=100, lag_of=asm.lag, designer_baseline="batch")[1]
    assert stats2.zero_variance_groups == 1 and stats2.stale_dropped == 0
    designer = [s for s in build_samples(groups, current_step=0, max_lag=100, lag_of=asm.lag, designer_baseline="batch")[0]
                if s.role == "designer"]
    flat = build_samples(groups[1:3], current_step=0, max_lag=100, lag_of=lambda v, s: 0, designer_baseline="batch")[1]
    assert flat.designer_zero_variance == 0
    by_env = {s.env_id: s.advantage for s in designer}
    # math skill: 0.9, 0.1, 0.3 -> mean 0.4333; code alone -> singleton, dropped
    assert by_env == pytest.approx({"same": 0.9 - 1.3 / 3, "old": 0.1 - 1.3 / 3, "new": 0.3 - 1.3 / 3})


def test_resume_cursor_discards_trained_groups_and_rejected_proposals():
    evs = _events("a", [1.0, 0.0]) + _events("b", [1.0, 0.0])
    recs = _records(evs)
    cut = next(r.offset for r in recs if r.envelope.type == "RegretEstimated") + 1
    asm = BatchAssembler(trigger_from={0: cut})
    for r in recs:
        asm.observe(r)
    assert [g.env_id for g in asm.take(10)] == ["b"] and asm.already_trained == 1 and not asm.pending
    asm2 = BatchAssembler()
    asm2.observe(Record(0, 0, make_envelope(EnvironmentProposed(env_id="z", skill="s", difficulty=0.1, code="", code_sha256="", policy_version="v0"), run_id=RUN, producer="t"), b""))
    asm2.observe(Record(0, 1, make_envelope(EnvironmentValidated(env_id="z", valid=False, accepted=False), run_id=RUN, producer="t"), b""))
    assert "z" not in asm2.proposals


def test_trainer_reports_counters_and_consumed_in_policy_updated(tmp_path):
    log = SqliteEventLog(tmp_path / "events.sqlite", RUN)
    log.append(
        _events("e1", [1.0, 1.0, 1.0], designer_reward=0.2)
        + _events("e2", [1.0, 0.0, 0.0], designer_reward=0.5)
        + _events("e3", [0.0, 1.0], designer_reward=0.8)
    )
    cfg = TrainerConfig(batch_groups=2, learning_rate=1e-3, device="cpu", max_lag=4)
    tr = Trainer(log, blobs=BlobStore(tmp_path / "blobs"), config=cfg, base_model="tiny:0")
    (ev,) = tr.run()
    assert ev.version == "v1" and ev.parent_version == "v0" and ev.env_ids == ["e1", "e2", "e3"]
    assert ev.metrics["zero_variance_groups"] == 1 and ev.metrics["groups_used"] == 2
    # designer baseline "window": e1 is the run's first designer reward (no baseline), e2 is
    # compared with 0.2, e3 with mean(0.2, 0.5)
    assert ev.metrics["agent_samples"] == 5 and ev.metrics["designer_samples"] == 2
    assert ev.metrics["designer_no_baseline"] == 1 and ev.metrics["designer_used_share"] == pytest.approx(2 / 3)
    assert ev.consumed == {"0": len(log) - 1} and log.committed("trainer") == {0: len(log) - 1}
    assert ev.checkpoint.uri.startswith("cas://sha256/") and ev.optimizer is not None
    assert ev.roles == ["agent", "designer"]
    assert tr.run() == []  # nothing new
    log.close()


def test_follow_mode_trains_as_events_arrive(tmp_path):
    import threading
    import time

    log = SqliteEventLog(tmp_path / "events.sqlite", RUN)
    cfg = TrainerConfig(batch_groups=1, learning_rate=1e-3, device="cpu")
    tr = Trainer(log, blobs=BlobStore(tmp_path / "blobs"), config=cfg, base_model="tiny:0")
    stop = threading.Event()
    out: list = []
    th = threading.Thread(target=lambda: out.extend(tr.run(follow=True, stop=stop)))
    th.start()
    try:
        log.append(_events("f1", [1.0, 0.0]))
        deadline = time.monotonic() + 120
        while not any(r.envelope.type == "PolicyUpdated" for r in log.read()) and time.monotonic() < deadline:
            time.sleep(0.05)
        log.append(_events("f2", [0.0, 1.0]))
        while sum(r.envelope.type == "PolicyUpdated" for r in log.read()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        th.join(timeout=60)
    assert [u.version for u in out] == ["v1", "v2"] and [u.env_ids for u in out] == [["f1"], ["f2"]]
    log.close()


def test_train_cli_without_a_model_is_a_clear_error(tmp_path):
    from typer.testing import CliRunner

    from spade_engine.cli import app
    from spade_engine.events import DataDir, RunStarted

    run = "run-20260101-000000-cccccc"
    log = SqliteEventLog(DataDir(tmp_path).log_path(run), run)
    log.append([make_envelope(RunStarted(config={}, engine_version="t", seed=0), run_id=run, producer="t")])
    log.close()
    res = CliRunner().invoke(app, ["train", run, "--data-dir", str(tmp_path)])
    assert res.exit_code == 2 and "--model" in res.output
    res = CliRunner().invoke(app, ["train", run, "--model", "tiny:0", "--data-dir", str(tmp_path), "--device", "cpu"])
    assert res.exit_code == 0 and "0 update(s); policy v0" in res.output, res.output


def test_the_coin_reward_control_replaces_play_rewards_and_is_repeatable():
    """``trainer.reward_control = "coin"``: advantages come from a fair coin per play (decided by
    its event id alone, so a replay trains on the same flips), not from the reward; the recorded
    reward statistics stay the true rewards; a group whose true rewards are all equal still
    trains when its coins differ."""
    from spade_engine.trainer.batches import coin_reward

    asm = BatchAssembler()
    for rec in _records(_events("e-flat", [1.0] * 8) + _events("e-mixed", [1.0, 0.0] * 4)):
        asm.observe(rec)
    groups = asm.take(2)
    lag = lambda v, s: 0  # noqa: E731
    true_samples, true_stats = build_samples(groups, current_step=0, max_lag=4, lag_of=lag, designer=False)
    coin_samples, coin_stats = build_samples(groups, current_step=0, max_lag=4, lag_of=lag, designer=False,
                                             reward_control="coin")
    assert true_stats.zero_variance_groups == 1 and {s.env_id for s in true_samples} == {"e-mixed"}
    flips = {p.event_id: coin_reward(p.event_id) for g in groups for p in g.plays}
    assert set(flips.values()) == {0.0, 1.0} and coin_stats.zero_variance_groups == 0
    for s in coin_samples:
        group = [flips[p.event_id] for g in groups if g.env_id == s.env_id for p in g.plays]
        assert s.advantage == pytest.approx(flips[s.event_id] - sum(group) / len(group))
    assert sorted(coin_stats.agent_rewards) == sorted([1.0] * 8 + [1.0, 0.0] * 4)  # the true rewards
    again, _ = build_samples(groups, current_step=0, max_lag=4, lag_of=lag, designer=False, reward_control="coin")
    assert [s.advantage for s in again] == [s.advantage for s in coin_samples]


def test_the_assembler_reads_through_the_log_readers_rules(tmp_path, caplog):
    """BatchAssembler is a LogReader: it decodes plays whole (their turns' tokens), where a
    projection folding the same record first got its summary from the shared decode cache; an
    unreadable event (a malformed payload) and a play whose offloaded tokens are gone are counted
    in ``skipped`` and passed over, and the group forms from the rest."""
    import msgspec

    from spade_engine.archive.reader import LogReader
    from spade_engine.archive.records import RolloutSummary, decode_record
    from spade_engine.events.catalogue import BlobRef

    assert isinstance(BatchAssembler(), LogReader)
    recs = _records(_events("e1", [1.0, 0.0, 0.0], hinted_extra=False))
    summary, _ = decode_record(recs[1])
    assert isinstance(summary, RolloutSummary)
    whole, _ = decode_record(recs[1], summary_plays=False)  # the same record: not the cached summary
    assert isinstance(whole, RolloutCompleted) and whole.turns[0].generation.completion_token_ids == [97, 98]

    missing = BlobRef(uri="cas://sha256/" + "0" * 64, sha256="0" * 64, size=10, media_type="application/json")
    gone = Generation(prompt_token_ids=[], completion_token_ids=[], logprobs=[], ref=missing)
    lost = make_envelope(RolloutCompleted(env_id="e1", play_id="e1-lost", hinted=False, seed=9, policy_version="v0",
                                          episode_reward=1.0, turns=[Turn(observation="o", action="a", reward=1.0, generation=gone)]),
                         run_id=RUN, producer="t")
    malformed = msgspec.structs.replace(recs[2].envelope, event_id="bad-1", payload={"env_id": 3})
    asm = BatchAssembler(blobs=BlobStore(tmp_path / "blobs"))
    for r in recs[:-1] + [Record(0, 100, lost, b""), Record(0, 101, malformed, b"")] + recs[-1:]:
        asm.observe(r)
    (group,) = asm.take(5)
    assert [p.reward for p in group.plays] == [1.0, 0.0, 0.0]
    reasons = asm.skipped
    assert reasons.get("malformed RolloutCompleted") == 1, reasons
    assert sum(v for k, v in reasons.items() if k.startswith("error RolloutCompleted")) == 1, reasons
    warned = [r.getMessage() for r in caplog.records if "not trained on" in r.getMessage()]
    assert len(warned) == 2 and any("bad-1" in m and "malformed" in m for m in warned), warned
    asm.observe(Record(0, 101, malformed, b""))  # delivered again: counted and said once
    assert asm.skipped.get("malformed RolloutCompleted") == 1
    assert len([r for r in caplog.records if "not trained on" in r.getMessage()]) == 2
