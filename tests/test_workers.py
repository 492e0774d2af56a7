"""Role workers on the embedded SQLite log: group membership, commit-after-output, idempotent
re-delivery, and a whole run done by designer -> validator -> rollout -> regret workers.

Runs in-process with the real sandbox pool and the procedural policy (no embedding model:
the validator runs without the novelty check here).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engine_support import check_chains
from spade_engine.config import load_config
from spade_engine.engine.corpus import Corpus
from spade_engine.engine.loop import Engine
from spade_engine.engine.regret_replay import verify_regrets
from spade_engine.policy.registry import make_policy
from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout
from spade_engine.engine.stages import StageContext
from spade_engine.engine.state import RunState
from spade_engine.sandbox.validator import Validator
from spade_engine.engine.worker import (
    DesignerWorker,
    Emitter,
    RegretWorker,
    RolloutWorker,
    ValidatorWorker,
    WorkerStats,
    group_for,
)
from spade_engine.engine.pipeline import output_event_id
from spade_engine.events.errors import EventLogError
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import new_run_id

pytestmark = [pytest.mark.sandbox]

K = 2


@pytest.fixture
def setup(tmp_path: Path):
    run_id = new_run_id()
    log = SqliteEventLog(tmp_path / "events.sqlite", run_id)
    cfg = load_config(overrides={"seed": 5, "loop.max_envs": 5, "loop.plays_per_env": K, "sandbox.workers": 1})
    pool = SandboxPool(cfg.sandbox)
    policy = make_policy(cfg.policy)
    ctx = StageContext(
        run_id=run_id, cfg=cfg, policy=policy, corpus=Corpus.from_paths([]), validator=Validator(pool, turn_limit=cfg.loop.turn_limit),
        pool=pool, sandbox_layers=dict(pool.layers), step_errors=((StepTimeout,), (SandboxCrash, SandboxError)),
    )
    try:
        yield log, cfg, ctx
    finally:
        pool.close()
        log.close()


def test_sqlite_group_has_one_member_and_resumes_from_its_commit(setup) -> None:
    log, cfg, ctx = setup
    engine = Engine(log=log, cfg=cfg, ctx=ctx)
    engine.start_record()
    for i in range(3):
        engine._new_env(i)
    member = log.group_consumer("g")
    with pytest.raises(EventLogError, match="already has a member"):
        log.group_consumer("g")
    first = member.poll(1.0)
    assert [r.envelope.type for r in first] == ["RunStarted"] + ["EnvironmentProposed"] * 3
    member.commit(first[:2])  # "processed" only the first two
    member.close()
    again = log.group_consumer("g")  # a restarted member resumes after the commit
    assert [r.offset for r in again.poll(1.0)] == [r.offset for r in first[2:]]
    assert again.poll(0.1) == []
    again.close()


def test_redelivered_input_records_nothing_twice(setup) -> None:
    log, cfg, ctx = setup
    engine = Engine(log=log, cfg=cfg, ctx=ctx)
    engine.start_record()
    engine._new_env(0)
    rec = [r for r in log.read() if r.envelope.type == "EnvironmentProposed"][0]
    v = ValidatorWorker(log=log, cfg=cfg, ctx=ctx)
    assert v.handle(rec) and v.handle(rec)  # the second delivery: a member died before committing
    assert log.count_by_type()["EnvironmentValidated"] == 1
    assert (v.stats.inputs, v.stats.skipped) == (1, 1)
    # an output appended again (killed after the append, before the commit) keeps its id
    state = RunState.from_log(log)
    st = state.envs[rec.envelope.payload["env_id"]]
    emit = Emitter(log, RunState(run_id=log.run_id), "test", WorkerStats())
    assert emit(st.validated) == output_event_id(log.run_id, st.validated)
    assert log.count_by_type()["EnvironmentValidated"] == 1


def test_a_run_done_by_role_workers_matches_the_single_process_regret(setup) -> None:
    log, cfg, ctx = setup
    engine = Engine(log=log, cfg=cfg, ctx=ctx)
    designer = DesignerWorker(engine, ahead=5)
    done = threading.Event()
    reason: list[str] = []

    def design() -> None:
        reason.append(designer.serve(poll_s=0.05))
        done.set()

    t = threading.Thread(target=design, daemon=True)
    t.start()
    workers = [
        ValidatorWorker(log=log, cfg=cfg, ctx=ctx),
        RolloutWorker(log=log, cfg=cfg, ctx=ctx),
        RegretWorker(log=log, cfg=cfg, ctx=ctx),
    ]
    deadline = time.monotonic() + 180  # generous: a loaded CI machine is slow, never wrong
    while time.monotonic() < deadline:  # each pass drains every group; the designer adds repairs meanwhile
        if done.wait(0.1):
            break
        for w in workers:
            w.serve(until_idle=0.3, poll_s=0.1)
    designer.stop_event.set()
    t.join(30)
    for w in workers:  # the last estimates are rollout inputs too (a next round, if any): drain them
        w.serve(until_idle=0.3, poll_s=0.1)
    assert reason == ["max_envs"]
    state = RunState.from_log(log)
    assert state.finished and len(state.roots()) == 5
    summary = check_chains(log, k=K, max_repairs=cfg.loop.max_repairs)
    assert summary["valid"] >= 1
    assert all(st.regret is not None for st in state.proposed() if st.accepted)
    assert verify_regrets(log) == []
    # every group committed past its inputs: a new member has nothing to redo
    for w in workers:
        member = log.group_consumer(group_for(log.run_id, w.role))
        left = [r for r in member.poll(0.2) if r.envelope.type in w.inputs]
        member.close()
        assert left == [], w.role


def test_role_workers_play_rounds_and_level_replays(setup) -> None:
    """Rounds and level replay in distributed mode: the designer records the replay choices, the
    rollout worker plays each later round from the previous round's estimate or the replay choice,
    the regret worker estimates each round; the log recomputes every estimate and every choice."""
    import dataclasses

    from engine_support import check_rounds
    from spade_engine.engine.level_replay import verify_replays

    log, cfg, ctx = setup
    cfg = cfg.with_overrides({"loop.rounds": 2, "loop.max_envs": 4, "replay.enabled": True, "replay.p": 0.7,
                              "replay.min_candidates": 2, "policy.procedural.defect_rate": 0.0})
    ctx = dataclasses.replace(ctx, cfg=cfg)
    engine = Engine(log=log, cfg=cfg, ctx=ctx)
    designer = DesignerWorker(engine, ahead=1)  # one environment at a time: every choice sees finished rounds
    done = threading.Event()
    t = threading.Thread(target=lambda: (designer.serve(poll_s=0.05), done.set()), daemon=True)
    t.start()
    workers = [ValidatorWorker(log=log, cfg=cfg, ctx=ctx), RolloutWorker(log=log, cfg=cfg, ctx=ctx),
               RegretWorker(log=log, cfg=cfg, ctx=ctx)]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not done.wait(0.1):
        for w in workers:
            w.serve(until_idle=0.3, poll_s=0.1)
    designer.stop_event.set()
    t.join(30)
    state = RunState.from_log(log)
    assert state.finished and len(state.roots()) == 4
    counts = check_rounds(log, plain=K, hinted=K, rounds=2)
    assert counts["replays"] >= 1 and counts["rounds"] == 2 * counts["accepted"] + counts["replays"], counts
    assert verify_regrets(log) == [] and verify_replays(log) == []
