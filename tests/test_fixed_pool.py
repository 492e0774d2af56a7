"""Fixed-pool environment sources (`start --env-source ...`): reasoning-gym items wrapped as SPADE
environments (training seeds only, the embedded scorer, single- and multi-turn), played through
the real sandbox, validator, plays, regret and projections, so a baseline run's log is like any
other (full event chain, `replay --verify` equal); `archive:RUN` replays a run's accepted
environments; textarena games are tested in tests/test_textarena_source.py."""

from __future__ import annotations

import pytest
from engine_support import check_chains
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.envsources import EnvSourceError, parse_env_source
from spade_engine.envsources.rgpool import build_pool, class_name_for, render_env, scorer_agreement
from spade_engine.envsources.scorer import EMBEDDED_SOURCE, answers_match, extract_answer
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.evaluation.seeds import TRAINING_RANGE
from spade_engine.evaluation.suites import DEFAULT_TASKS

runner = CliRunner()
SANDBOX = "[sandbox]\nimport_timeout_s = 30.0\nstep_timeout_s = 10.0\nvalidate_timeout_s = 120.0\n"


def test_env_source_parsing():
    s = parse_env_source("reasoning-gym:gcd,maze?size=7&turns=3")
    assert (s.kind, s.tasks, s.size, s.turns, s.fixed) == ("reasoning-gym", ("gcd", "maze"), 7, 3, True)
    assert parse_env_source("rg:gcd").size == 50 and parse_env_source("rg:gcd").turns == 1
    assert parse_env_source("reasoning-gym").tasks == DEFAULT_TASKS
    assert parse_env_source("archive:run-1").run == "run-1"
    assert parse_env_source("").kind == parse_env_source("designer").kind == "designer"
    for bad, why in [("rg:gcdd", "did you mean gcd"), ("rg:gcd?size=0", "between 1"), ("rg:gcd?sise=3", "unknown env source parameter"),
                     ("rg:gcd?turns=x", "not an integer"), ("archive:", "needs a run"), ("wat:x", "unknown environment source"),
                     ("textarena:Wordle-v0", "not offered"), ("textarena:", "needs games"),
                     ("textarena:Mastermind-v0?size=0", "between 1"), ("rg:gcd,gcd", "twice")]:
        with pytest.raises(EnvSourceError, match=why):
            parse_env_source(bad)
    # the config's loop section reads its source through the same parser, the one place it is parsed
    from spade_engine.config import load_config

    from spade_engine.envsources.spec import source_of

    loop = load_config(overrides={"loop.env_source": "rg:gcd,maze?size=7&turns=3"}, environ={}).loop
    assert source_of(loop) == s and source_of(load_config(environ={}).loop).kind == "designer"
    with pytest.raises(EnvSourceError, match="did you mean gcd"):
        source_of(load_config(overrides={"loop.env_source": "rg:gcdd"}, environ={}).loop)


def test_scorer_extraction_and_matching():
    assert extract_answer("so \\boxed{12} or rather \\boxed{ {1, 2} }") == "{1, 2}"
    assert extract_answer("<answer> 7 </answer>") == "7" and extract_answer("no answer") is None
    assert answers_match("-1,234", "-1234") and answers_match("2.50", "2.5") and answers_match("25e-1", "2.5")
    assert not answers_match("8.0", "8")  # an integer answer needs an integer
    assert answers_match("$\\frac{3}{4}$", "3/4") and not answers_match("6/8", "$\\frac{3}{4}$")
    assert answers_match("a,b ,c", "a, b, c") and not answers_match("c, b, a", "a, b, c")
    assert answers_match("Zoey is a pioneer", "Zoey is a pioneer.") and not answers_match("zoey is a pioneer", "Zoey is a pioneer")
    assert not answers_match("", "0") and not answers_match("garbage", "17")
    # the generated code carries exactly these functions (the sandbox grades with the same code)
    ns: dict = {}
    exec("import re, unicodedata\nfrom fractions import Fraction\n" + EMBEDDED_SOURCE, ns)
    for g, e in [("-1,234", "-1234"), ("8.0", "8"), ("a,b", "a, b"), ("x", "y")]:
        assert ns["answers_match"](g, e) == answers_match(g, e)


@pytest.mark.parametrize("task", DEFAULT_TASKS)
def test_scorer_never_accepts_what_the_verifier_rejects(task):
    """On the default tasks the embedded scorer accepts every oracle answer, and it never accepts
    another item's answer that the task's own verifier rejects (it may be stricter: that is the
    documented loss, counted here)."""
    r = scorer_agreement(task, size=12)
    assert r["oracle_accepted"] == 12 - r["no_oracle_answer"] == 12
    assert r["scorer_accepts_verifier_rejects"] == 0, r


def test_pool_is_deterministic_uses_training_seeds_and_interleaves_tasks():
    a = build_pool(["gcd", "word_sorting"], size=5, turns=1, seed=3)
    b = build_pool(["gcd", "word_sorting"], size=5, turns=1, seed=3)
    assert [i.code for i in a.items] == [i.code for i in b.items]
    assert [i.task for i in a.items] == ["gcd", "word_sorting"] * 5
    assert all(i.seed in TRAINING_RANGE for i in a.items)
    assert [i.seed for i in a.items if i.task == "gcd"] == list(range(a.items[0].seed, a.items[0].seed + 5))
    other = build_pool(["gcd"], size=5, turns=1, seed=4)
    assert {i.seed for i in other.items}.isdisjoint({i.seed for i in a.items if i.task == "gcd"})
    item = a.items[0]
    assert item.item_id == f"gcd/{item.seed}" and f"# item: gcd/{item.seed}" in item.code
    assert repr(item.answer) in item.code and class_name_for("basic_arithmetic") == "BasicArithmeticEnv"


def test_pool_drops_items_asking_an_evaluation_question():
    """lcm has a small question space: some training items ask what evaluation items ask."""
    from spade_engine.envsources.rgpool import _eval_questions

    eval_q = _eval_questions(["reasoning-gym:lcm"], 200, 0, ["lcm"])["lcm"]
    full = build_pool(["lcm"], size=200, turns=1, seed=0)
    clashes = sum(1 for i in full.items if i.question in eval_q)
    assert clashes > 0
    pool = build_pool(["lcm"], size=200, turns=1, seed=0, exclude_eval=(["reasoning-gym:lcm"], 200, 0))
    assert pool.dropped == {"lcm": {"same question as an evaluation item": clashes}}
    assert len(pool.items) == 200 - clashes and not any(i.question in eval_q for i in pool.items)


def test_wrapped_items_validate_and_grade_in_the_sandbox():
    from spade_engine.config import SandboxConfig
    from spade_engine.sandbox import SandboxPool
    from spade_engine.sandbox.validator import Validator

    single = build_pool(["gcd"], size=1, turns=1, seed=0).items[0]
    multi = build_pool(["knights_knaves"], size=1, turns=3, seed=0).items[0]
    pool = SandboxPool(SandboxConfig(workers=1, import_timeout_s=30.0, step_timeout_s=10.0, validate_timeout_s=120.0))
    try:
        v = Validator(pool, turn_limit=8)
        for item in (single, multi):
            report = v.validate(item.code)
            assert report.valid, (item.item_id, report.error_kind, report.detail)
            assert report.solution_actions == ["\\boxed{" + item.answer + "}"]
        with pool.open_session(single.code) as s:
            obs, _ = s.reset(seed=5)
            assert obs.startswith(single.question.rstrip()) and "\\boxed{<answer>}" in obs
            r = s.step("\\boxed{" + single.answer + "}")
            assert (r[1], r[2]) == (1.0, True)
        with pool.open_session(multi.code) as s:
            s.reset(seed=0)
            first = s.step("\\boxed{nobody}")
            assert first[1] == 0.0 and not first[2] and "2 attempt(s) left" in first[0]
            second = s.step("\\boxed{still wrong}")
            assert not second[2]
            third = s.step("the answer is \\boxed{" + multi.answer + "}")
            assert (third[1], third[2]) == (1.0, True)
        with pool.open_session(multi.code) as s:
            s.reset(seed=0)
            ends = [s.step("\\boxed{x}")[2] for _ in range(3)]
            assert ends == [False, False, True]
    finally:
        pool.close()



def test_agent_v1_evaluation_asks_exactly_as_the_agent_plays_a_pool_item():
    """The held-out prompt agent-v1 sends the messages a play of the same item as a pool environment
    sends: the agent's system prompt and the first observation, as the environment's own reset
    gives it in the sandbox; so a learning run is evaluated in the form it trains on."""
    from spade_engine.config import SandboxConfig
    from spade_engine.engine.rollouts import AGENT_SYSTEM_PROMPT, first_user_message
    from spade_engine.evaluation.runner import eval_messages
    from spade_engine.sandbox import SandboxPool

    item = build_pool(["basic_arithmetic"], size=1, turns=1, seed=0).items[0]
    pool = SandboxPool(SandboxConfig(workers=1, import_timeout_s=30.0, step_timeout_s=10.0))
    try:
        with pool.open_session(item.code) as s:
            observation, _ = s.reset(seed=3)
    finally:
        pool.close()
    assert eval_messages("agent-v1", item.question) == [
        {"role": "system", "content": AGENT_SYSTEM_PROMPT},
        {"role": "user", "content": first_user_message(observation, None)},
    ]
    assert eval_messages("boxed-v1", item.question)[1] == {"role": "user", "content": item.question}

def test_render_keeps_answers_with_odd_characters_as_data():
    code = render_env(task="t", seed=1, question='say "hi"\n\\boxed{no} __CLASS__ """', answer="a'b\"c\\d __TASK__", turns=1,
                      generator="g")
    ns: dict = {}
    exec(code, ns)
    env = ns["TEnv"]()
    assert env.reset()[0].startswith('say "hi"\n\\boxed{no} __CLASS__ """')
    assert env.step(env.solution()[0])[1] == 1.0


def _events(data, run_id):
    log = open_event_log(run_id, data_dir=data)
    try:
        return [r.envelope for r in log.read()]
    finally:
        log.close()


@pytest.mark.slow
@pytest.mark.sandbox
def test_fixed_pool_run_with_the_procedural_agent(tmp_path):
    data = tmp_path / "data"
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(SANDBOX)
    source = "reasoning-gym:gcd,spell_backward?size=2&turns=2"
    res = runner.invoke(app, ["start", "--env-source", source, "--max-envs", "5", "--plays", "2", "--data-dir", str(data),
                              "--config", str(cfg), "--no-progress", "--seed", "7"])
    assert res.exit_code == 0, res.output
    assert f"environments from {source}" in res.output
    (run,) = DataDir(data).runs()
    log = open_event_log(run, data_dir=data)
    try:
        summary = check_chains(log, k=2, max_repairs=0)
    finally:
        log.close()
    assert summary["envs"] == summary["roots"] == 5 and summary["accepted"] == 5, summary
    events = _events(data, run)
    started = next(e for e in events if e.type == "RunStarted").payload
    assert started["config"]["loop"]["env_source"] == source
    assert started["config"]["loop"]["max_repairs"] == 0 and started["config"]["memory"]["novelty_threshold"] == 0.0
    proposed = [e.payload for e in events if e.type == "EnvironmentProposed"]
    pool = build_pool(["gcd", "spell_backward"], size=2, turns=2, seed=7)
    # slot i is pool item i mod 4: the fifth environment starts a second pass
    want = [pool.items[i % 4] for i in range(5)]
    assert [p["code"] for p in proposed] == [w.code for w in want]
    assert [p["document"]["doc_id"] for p in proposed] == [w.item_id for w in want]
    assert [p["skill"] for p in proposed] == ["gcd", "spell_backward"] * 2 + ["gcd"]
    assert all(p["designer"] == f"reasoning-gym:{p['skill']}" and p["generation"] is None for p in proposed)
    assert all(int(p["document"]["doc_id"].split("/")[1]) in TRAINING_RANGE for p in proposed)
    # validated by the sandbox (every check ran), hinted, played by the procedural agent, estimated
    validated = [e.payload for e in events if e.type == "EnvironmentValidated"]
    assert all(v["accepted"] and v["novelty"] is not None for v in validated)
    assert {c["name"] for c in validated[0]["checks"]} >= {"solution", "not_trivial", "gymnasium_api"}
    plays = [e.payload for e in events if e.type == "RolloutCompleted"]
    assert len(plays) == 20 and all(1 <= len(p["turns"]) <= 2 for p in plays)
    assert any(len(p["turns"]) == 2 for p in plays)  # a wrong first attempt gets a second one
    assert len([e for e in events if e.type == "RegretEstimated"]) == 5

    res = runner.invoke(app, ["replay", run, "--verify", "--data-dir", str(data)])
    assert res.exit_code == 0 and "equal" in res.output, res.output
    res = runner.invoke(app, ["audit", run, "--data-dir", str(data), "--out", str(tmp_path / "audit")])
    assert res.exit_code == 0, res.output

    # resumed with a larger bound: the same pool continues where it stopped
    res = runner.invoke(app, ["start", "--run", run, "--max-envs", "6", "--data-dir", str(data), "--no-progress"])
    assert res.exit_code == 0, res.output
    codes = [e.payload["code"] for e in _events(data, run) if e.type == "EnvironmentProposed"]
    assert codes == [pool.items[i % 4].code for i in range(6)]

    # archive:RUN replays that run's accepted environments, in order, cycling
    res = runner.invoke(app, ["start", "--new", "--env-source", f"archive:{run}", "--max-envs", "7", "--plays", "1",
                              "--data-dir", str(data), "--config", str(cfg), "--no-progress"])
    assert res.exit_code == 0, res.output
    new = [r for r in DataDir(data).runs() if r != run][-1]
    replayed = [e.payload for e in _events(data, new) if e.type == "EnvironmentProposed"]
    assert [p["code"] for p in replayed] == [codes[i % 6] for i in range(7)]
    assert all(p["designer"].startswith(f"archive:{run}/") for p in replayed)
    started = next(e for e in _events(data, new) if e.type == "RunStarted").payload
    assert started["config"]["policy"]["kind"] == "procedural"  # the source run's policy (no --model)


def test_bad_sources_are_one_line_errors(tmp_path):
    data = tmp_path / "d"
    for source, why in [("rg:nope", "unknown reasoning-gym task"), ("textarena:Wordle-v0", "not offered"),
                        ("archive:run-missing", "run-missing")]:
        res = runner.invoke(app, ["start", "--env-source", source, "--max-envs", "1", "--data-dir", str(data), "--no-progress"])
        assert res.exit_code == 2 and why in res.output and "Traceback" not in res.output, (source, res.output)
    res = runner.invoke(app, ["start", "--env-source", "rg:gcd?turns=30", "--max-envs", "1", "--data-dir", str(data), "--no-progress"])
    assert res.exit_code == 2 and "exceeds loop.turn_limit" in res.output, res.output
    assert DataDir(data).runs() == []  # nothing recorded for a refused source


def test_the_distributed_designer_proposes_from_the_source(tmp_path):
    """`worker designer` with loop.env_source: the designer role proposes the pool's items."""
    import threading
    import time

    from spade_engine.config import load_config
    from spade_engine.engine.corpus import Corpus
    from spade_engine.engine.loop import Engine
    from spade_engine.engine.stages import StageContext
    from spade_engine.engine.worker import DesignerWorker
    from spade_engine.envsources import open_env_source
    from spade_engine.events.sqlite.log import SqliteEventLog
    from spade_engine.events.store import new_run_id
    from spade_engine.policy.registry import make_policy

    run_id = new_run_id()
    log = SqliteEventLog(tmp_path / "events.sqlite", run_id)
    cfg = load_config(overrides={"seed": 2, "loop.max_envs": 3, "loop.env_source": "rg:gcd,lcm?size=1"}, environ={})
    source = open_env_source(cfg.loop, cfg.eval, cfg.log, seed=cfg.seed, data_dir=tmp_path)
    ctx = StageContext(run_id=run_id, cfg=cfg, policy=make_policy(cfg.policy), corpus=Corpus.from_paths([]))
    engine = Engine(log=log, cfg=cfg, ctx=ctx, proposer=source.propose)
    designer = DesignerWorker(engine, ahead=5)
    t = threading.Thread(target=designer.serve, kwargs={"poll_s": 0.05}, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(1 for r in log.read() if r.envelope.type == "EnvironmentProposed") < 3:
            time.sleep(0.05)
    finally:
        designer.stop_event.set()
        t.join(10)
    proposed = [r.envelope.payload for r in log.read() if r.envelope.type == "EnvironmentProposed"]
    log.close()
    assert [p["code"] for p in proposed] == [source.pool.items[i % 2].code for i in range(3)]
    assert [p["designer"] for p in proposed] == ["reasoning-gym:gcd", "reasoning-gym:lcm", "reasoning-gym:gcd"]
