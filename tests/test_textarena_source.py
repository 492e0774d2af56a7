"""`--env-source textarena:GAME,...`: textarena's single-player games (GuessTheNumber,
TowerOfHanoi, Mastermind) wrapped as multi-turn SPADE environments, played in the real sandbox
(textarena imported by the workers before isolation), validated by the real validator (the
reference solution read from the game's hidden state wins), and run through the whole engine
path like any other fixed pool. textarena 0.7.4 is a dev dependency; these tests use it for real.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from engine_support import check_chains
from spade_engine.cli import app
from spade_engine.config import LoopConfig, SandboxConfig
from spade_engine.envsources import parse_env_source, source_preload
from spade_engine.envsources.textarena_pool import build_pool
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.evaluation.seeds import TRAINING_RANGE

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

runner = CliRunner()
GAMES = ["GuessTheNumber-v0", "TowerOfHanoi-v0", "Mastermind-v0"]


def test_parsing_and_what_the_workers_preload():
    spec = parse_env_source("textarena:GuessTheNumber-v0,TowerOfHanoi-v0-hard?size=3")
    assert (spec.kind, spec.tasks, spec.size, spec.fixed) == ("textarena", ("GuessTheNumber-v0", "TowerOfHanoi-v0-hard"), 3, True)
    def loop(source: str) -> LoopConfig:
        return LoopConfig(env_source=source)

    assert source_preload(loop("textarena:Mastermind-v0")) == ["textarena"]
    assert source_preload(loop("rg:gcd")) == source_preload(loop("")) == source_preload(loop("textarena:Wordle-v0")) == []


def test_the_pool_is_deterministic_and_uses_training_seeds():
    a = build_pool(GAMES, size=2, seed=3)
    b = build_pool(GAMES, size=2, seed=3)
    assert [i.code for i in a.items] == [i.code for i in b.items]
    assert [i.game for i in a.items] == GAMES * 2  # interleaved across games
    assert all(i.seed in TRAINING_RANGE for i in a.items)
    assert [i.code for i in build_pool(GAMES, size=2, seed=4).items] != [i.code for i in a.items]
    compile(a.items[0].code, "<env>", "exec")


@pytest.fixture(scope="module")
def pool():
    from spade_engine.sandbox import SandboxPool

    p = SandboxPool(SandboxConfig(workers=1, import_timeout_s=60.0, step_timeout_s=10.0, validate_timeout_s=180.0,
                                  preload_modules=["textarena"]))
    yield p
    p.close()


def test_each_game_validates_and_plays_in_the_sandbox(pool):
    from spade_engine.sandbox.validator import Validator

    v = Validator(pool, turn_limit=25)
    for item in build_pool(GAMES, size=1, seed=0).items:
        report = v.validate(item.code)
        assert report.valid, (item.item_id, report.error_kind, report.detail)
        assert report.solution_actions and all(a.startswith("\\boxed{") for a in report.solution_actions)
    guess = build_pool(["GuessTheNumber-v0"], size=1, seed=0).items[0]
    with pool.open_session(guess.code) as s:
        obs, info = s.reset(seed=123)
        assert "Guess The Number" in obs and "\\boxed{7}" in obs and info["game"] == "GuessTheNumber-v0"
        no_move = s.step("I think it is seven")
        assert no_move[1] == 0.0 and not no_move[2] and "No move found" in no_move[0]
        first = s.step("\\boxed{10}")
        assert not first[2] and ("higher" in first[0] or "lower" in first[0] or "Congratulations" in first[0])
        assert "Guess The Number" not in first[0]  # only what the game added since the last step
    hanoi = build_pool(["TowerOfHanoi-v0"], size=1, seed=0).items[0]
    with pool.open_session(hanoi.code) as s:
        s.reset(seed=0)
        warned = s.step("\\boxed{C A}")  # an invalid move: textarena warns once...
        assert not warned[2] and "invalid move" in warned[0]
        wrong = s.step("\\boxed{C A}")  # ...then ends the game, reward 0
        assert wrong[2] and wrong[1] == 0.0
    with pool.open_session(hanoi.code) as s:
        s.reset(seed=0)
        moves = ["A C", "A B", "C B", "A C", "B A", "B C", "A C"]
        results = [s.step(f"move: \\boxed{{{m}}}") for m in moves]
        assert [r[2] for r in results] == [False] * 6 + [True] and results[-1][1] == 1.0


def test_a_textarena_run_through_the_engine(tmp_path):
    data = tmp_path / "data"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[sandbox]\nimport_timeout_s = 60.0\nstep_timeout_s = 10.0\nvalidate_timeout_s = 180.0\nworkers = 2\n")
    source = "textarena:GuessTheNumber-v0,TowerOfHanoi-v0?size=2"
    res = runner.invoke(app, ["start", "--env-source", source, "--max-envs", "3", "--plays", "1", "--data-dir", str(data),
                              "--config", str(cfg), "--no-progress", "--seed", "5"])
    assert res.exit_code == 0, res.output
    (run,) = DataDir(data).runs()
    log = open_event_log(run, data_dir=data)
    try:
        summary = check_chains(log, k=1, max_repairs=0)
        events = [r.envelope for r in log.read()]
    finally:
        log.close()
    assert summary["roots"] == 3 and summary["accepted"] == 3, summary
    proposed = [e.payload for e in events if e.type == "EnvironmentProposed"]
    assert [p["skill"] for p in proposed] == ["GuessTheNumber-v0", "TowerOfHanoi-v0", "GuessTheNumber-v0"]
    assert all(p["designer"] == f"textarena:{p['skill']}" and p["document"]["domain"] == "textarena" for p in proposed)
    plays = [e.payload for e in events if e.type == "RolloutCompleted"]
    assert len(plays) == 6 and all(p["turns"] for p in plays)
    started = next(e for e in events if e.type == "RunStarted").payload
    assert started["config"]["loop"]["env_source"] == source
    assert started["config"]["sandbox"]["preload_modules"] == []  # derived from the source, never recorded
    res = runner.invoke(app, ["replay", run, "--verify", "--data-dir", str(data)])
    assert res.exit_code == 0 and "equal" in res.output, res.output
