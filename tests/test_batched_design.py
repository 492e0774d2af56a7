"""Batched design (issue 17): the loop proposes up to `loop.designer_batch` environments in one
generate call (repairs join the next batch), validates them together with one embedding call,
and every slot keeps its own id and sampling seed, so the batch size changes no proposal."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spade_engine.config import load_config
from spade_engine.engine.stages import env_key
from spade_engine.events.store import open_event_log
from spade_engine.policy.procedural.policy import ProceduralPolicy
from spade_engine.runs.engine import open_engine
from spade_engine.policy.request_context import DesignContext

from engine_support import check_chains, records_by_type

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


class CountingProcedural(ProceduralPolicy):
    """The procedural simulation, recording which requests came in which generate call."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.calls: list[list[Any]] = []

    def generate(self, requests):
        self.calls.append(list(requests))
        return super().generate(requests)


class CountingEmbedder:
    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def embed(self, texts):
        self.calls.append(len(texts))
        return self.inner.embed(texts)


def _run(tmp_path, name: str, batch: int) -> tuple[CountingProcedural, CountingEmbedder, dict[str, Any], Any]:
    cfg = load_config(overrides={
        "loop.designer_batch": batch, "loop.max_envs": 5, "loop.plays_per_env": 1, "loop.max_repairs": 1,
        "policy.procedural.adaptive": False, "policy.procedural.defect_rate": 0.5, "seed": 3,
    })
    policy = CountingProcedural(adaptive=False, defect_rate=0.5)
    run_id = f"run-batch-{name}zzzz"  # an alphanumeric 6-character suffix, as new_run_id gives
    with open_engine(cfg, run_id=run_id, data_dir=tmp_path / name, create=True, policy=policy) as opened:
        embedder = CountingEmbedder(opened.engine.ctx.embedder)
        opened.engine.ctx = dataclasses.replace(opened.engine.ctx, embedder=embedder)
        assert opened.engine.run() == "max_envs"
    log = open_event_log(run_id, data_dir=tmp_path / name)
    try:
        summary = check_chains(log, k=1, max_repairs=1)
        by_type = records_by_type(log)
    finally:
        log.close()
    return policy, embedder, summary, by_type


def test_proposals_come_in_batches_and_repairs_join_the_next_one(tmp_path) -> None:
    policy, embedder, summary, by_type = _run(tmp_path, "b3", 3)
    design_calls = [[r for r in call if r.role == "designer"] for call in policy.calls]
    design_calls = [c for c in design_calls if c]
    assert all(len(c) <= 3 for c in design_calls) and len(design_calls[0]) == 3
    assert all(all(r.role == "designer" for r in call) for call in policy.calls if any(r.role == "designer" for r in call))
    assert summary["roots"] == 5 and summary["repairs"] >= 1, summary
    # a repair shares a batch with new slots (or other repairs): it waited for the next batch
    mixed = [c for c in design_calls if any((isinstance(r.context, DesignContext) and r.context.repair is not None) for r in c)]
    assert mixed and any(len(c) > 1 for c in mixed)
    assert max(embedder.calls) >= 2  # the valid proposals of a batch are embedded in one call
    # designer settings travel on every designer request
    assert {r.max_new_tokens for c in design_calls for r in c} == {16_384}


def test_the_batch_size_changes_no_proposal(tmp_path) -> None:
    _, _, _, one = _run(tmp_path, "b1", 1)
    _, _, _, three = _run(tmp_path, "b3", 3)

    def roots(by_type):
        return {env_key(e.payload["env_id"]): e.payload["code"] for e in by_type["EnvironmentProposed"] if e.payload["attempt"] == 0}

    a, b = roots(one), roots(three)
    assert set(a) == {f"e{i:05d}" for i in range(5)} and a == b


def test_the_default_simulation_run_embeds_in_batches(tmp_path) -> None:
    """The default config (no loop.designer_batch) batches the simulation's design too, so its
    valid proposals are embedded together (a default run once embedded one text per call)."""
    cfg = load_config(overrides={"loop.max_envs": 8, "loop.plays_per_env": 1, "seed": 5})
    assert cfg.loop.designer_batch is None
    run_id = "run-batch-defaultzz"
    with open_engine(cfg, run_id=run_id, data_dir=tmp_path, create=True) as opened:
        embedder = CountingEmbedder(opened.engine.ctx.embedder)
        opened.engine.ctx = dataclasses.replace(opened.engine.ctx, embedder=embedder)
        assert opened.engine.run() == "max_envs"
    assert embedder.calls and max(embedder.calls) >= 3, embedder.calls
    assert len(embedder.calls) <= 4, embedder.calls  # 8 new slots (and their repairs) in batches of 4
