"""``loop.concurrent_envs``: the hints and plays of several environments run at once, their model
calls merged into single calls (the batching broker), with the same recorded outcome as one
environment at a time."""

from __future__ import annotations

import threading
import time

import pytest

from spade_engine.config import load_config
from spade_engine.events.store import new_run_id, open_event_log
from spade_engine.policy.batching import BatchingPolicy
from spade_engine.policy.protocol import PolicyRequest, Sample
from spade_engine.runs.engine import open_engine


class Echo:
    """Answers each request with its own message (a stand-in model: the test is about routing)."""

    kind = "echo"
    context_window: int | None = None  # the Policy protocol's declared members
    on_progress = None
    trainable = False
    version = "v0"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def generate(self, requests):
        self.calls.append(len(requests))
        time.sleep(0.01)
        return [Sample(text=r.messages[-1]["content"]) for r in requests]


def test_the_broker_merges_concurrent_calls_and_returns_each_threads_own_samples():
    inner = Echo()
    broker = BatchingPolicy(inner, parties=3)
    got: dict[int, list[list[str]]] = {}

    def party(i: int) -> None:
        try:
            out = []
            for call in range(2 + i):  # party 2 makes more calls than the others: they leave earlier
                reqs = [PolicyRequest(role="agent", messages=[{"role": "user", "content": f"{i}-{call}-{j}"}])
                        for j in range(i + 1)]
                out.append([s.text for s in broker.generate(reqs)])
                time.sleep(0.005 * i)  # sandbox work between calls, different per party
            got[i] = out
        finally:
            broker.leave()

    threads = [threading.Thread(target=party, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(not t.is_alive() for t in threads)
    for i in range(3):
        assert got[i] == [[f"{i}-{c}-{j}" for j in range(i + 1)] for c in range(2 + i)]
    assert inner.calls[0] == 1 + 2 + 3  # the first calls of all three went out together
    assert sum(inner.calls) == sum((i + 1) * (2 + i) for i in range(3)) and len(inner.calls) < 9


def test_an_error_reaches_every_waiting_thread():
    class Broken(Echo):
        def generate(self, requests):
            raise RuntimeError("model failed")

    broker = BatchingPolicy(Broken(), parties=2)
    errors = []

    def party() -> None:
        try:
            broker.generate([PolicyRequest(role="agent", messages=[{"role": "user", "content": "x"}])])
        except RuntimeError as exc:
            errors.append(str(exc))
        finally:
            broker.leave()

    threads = [threading.Thread(target=party) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == ["model failed", "model failed"]


def _outcomes(tmp_path, name: str, concurrent: int) -> dict[str, tuple]:
    cfg = load_config(overrides={"seed": 3, "loop.max_envs": 10, "loop.plays_per_env": 3, "loop.concurrent_envs": concurrent,
                                 "sandbox.workers": 6}, environ={})
    data = tmp_path / name
    run_id = new_run_id()
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True, projections=False) as opened:
        assert opened.engine.run() == "max_envs"
    log = open_event_log(run_id, data_dir=data)
    try:
        out = {}
        for rec in log.read():
            if rec.envelope.type == "RegretEstimated":
                p = rec.envelope.payload
                out[p["env_id"].split("-", 1)[1] + f"@{p.get('round', 0)}"] = (
                    tuple(p["plain_rewards"]), tuple(p["hinted_rewards"]), p["regret"])
        return out
    finally:
        log.close()


@pytest.mark.sandbox
def test_concurrent_environments_record_what_one_at_a_time_records(tmp_path):
    one = _outcomes(tmp_path, "one", 1)
    three = _outcomes(tmp_path, "three", 3)
    assert len(one) >= 8 and one == three


def test_the_broker_is_a_policy_and_passes_the_declared_members_through() -> None:
    """The broker declares the Policy protocol's members and forwards them to the policy it wraps
    (a progress sink set on it reaches the real backend, which is the one that reports)."""
    from spade_engine.policy.batching import BatchingPolicy
    from spade_engine.policy.procedural import ProceduralPolicy
    from spade_engine.policy.protocol import Policy

    inner = ProceduralPolicy()
    broker = BatchingPolicy(inner, 1)
    assert isinstance(broker, Policy) and isinstance(inner, Policy)
    assert broker.context_window is None and broker.kind == inner.kind and broker.version == "v0"

    def sink(progress: object) -> None:
        pass

    broker.on_progress = sink
    assert inner.on_progress is sink


@pytest.mark.sandbox
def test_an_interrupt_during_concurrent_stages_records_nothing_after_run_stopped(tmp_path):
    """Ctrl-C while several environments' stages run in their threads: the run records its
    RunStopped (interrupted) and a stage that finishes its model call afterwards records nothing
    (it used to append its hint or plays after the RunStopped, into a stopped run)."""
    import dataclasses
    import os
    import signal

    cfg = load_config(overrides={"seed": 3, "loop.max_envs": 6, "loop.plays_per_env": 2, "loop.concurrent_envs": 3,
                                 "sandbox.workers": 6}, environ={})
    run_id = new_run_id()
    blocked, release = threading.Event(), threading.Event()

    class Slow:
        """The run's policy, except that a call from an environment's thread waits for ``release``."""

        def __init__(self, inner):
            self.inner = inner

        def generate(self, requests):
            out = self.inner.generate(requests)
            if threading.current_thread().name.startswith("env-"):
                blocked.set()
                release.wait(30)
            return out

        def __getattr__(self, name):
            return getattr(self.inner, name)

    def interrupt() -> None:
        if blocked.wait(60):
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open_engine(cfg, run_id=run_id, data_dir=tmp_path, create=True, projections=False) as opened:
            engine = opened.engine
            engine.ctx = dataclasses.replace(engine.ctx, policy=Slow(engine.ctx.policy))
            threading.Thread(target=interrupt, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                engine.run()
            release.set()  # the blocked stages now return from their model call and try to record
            time.sleep(1.0)
    finally:
        signal.signal(signal.SIGINT, previous)
    log = open_event_log(run_id, data_dir=tmp_path)
    try:
        types = [rec.envelope.type for rec in log.read()]
    finally:
        log.close()
    assert blocked.is_set() and "RunStopped" in types
    assert types[-1] == "RunStopped", types[types.index("RunStopped"):]
    assert log_stop_reason(tmp_path, run_id) == "interrupted"


def log_stop_reason(data, run_id: str) -> str:
    log = open_event_log(run_id, data_dir=data)
    try:
        return [rec.envelope.payload["reason"] for rec in log.read() if rec.envelope.type == "RunStopped"][-1]
    finally:
        log.close()
