"""When the loop trains: before each environment's plays start, so environments that queue up
without a design step between them (seeds played with ``loop.seed_plays``) are trained on one
after another, not only once the queue is empty."""

from __future__ import annotations

import shutil

import pytest

from engine_support import ScriptedDesigner
from spade_engine.config import load_config
from spade_engine.engine.seed_archive import BUNDLED_DIR
from spade_engine.runs.engine import open_engine

SEEDS = ("receipt_total", "next_term", "bus_cycles")
DESIGNED = """import random


class ShelfEnv(TextGame):
    def setup(self, rng):
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        self.answer = a * b + 1
        return f"{a} shelves of {b} books and one more book: how many books?"
"""


class CallLog:
    """Stands in for the in-process trainer (a fake: training a model is not what is tested here):
    records, at each ``run()``, how many environments had been hinted."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def run(self, *, flush: bool = False) -> bool:
        self.calls.append((flush, sum(1 for st in self.engine.state.proposed() if st.hint is not None)))
        return False


@pytest.mark.sandbox
def test_the_loop_trains_between_seed_environments_it_plays(tmp_path) -> None:
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for name in SEEDS:
        shutil.copyfile(BUNDLED_DIR / f"{name}.py", seeds / f"{name}.py")
    cfg = load_config(overrides={
        "loop.seed_envs": str(seeds), "loop.seed_plays": True, "loop.designer_format": "puzzle", "loop.max_envs": 1,
        "loop.max_repairs": 0, "loop.plays_per_env": 1, "sandbox.workers": 2,
    }, environ={})
    policy = ScriptedDesigner(DESIGNED, DESIGNED, action="\\boxed{1}")
    with open_engine(cfg, run_id="run-train-order-abcdef", data_dir=tmp_path / "data", create=True, policy=policy) as opened:
        engine = opened.engine
        engine.trainer = trainer = CallLog(engine)
        assert engine.run() == "max_envs"
    hinted_at = [n for flush, n in trainer.calls if not flush]
    assert hinted_at[:3] == [0, 1, 2], trainer.calls  # before the first seed's plays, and after each one played
    assert trainer.calls[-1] == (True, 4)  # the last partial batch once the designed one is played too
