"""Held-out evaluation (`spade-engine eval`): reasoning-gym items scored by their own verifiers,
archived environments played in the sandbox, the Wilson interval, EvaluationCompleted events
read back from the log, and the seed rule that keeps evaluation items out of training."""

from __future__ import annotations

import json
import random
import typing
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from spade_engine.blobs import BlobStore
from spade_engine.cli import app
from spade_engine.config import EvalConfig, load_config
from spade_engine.policy.protocol import PolicyRequest, Sample
from spade_engine.policy.procedural.families import FAMILIES
from spade_engine.engine.rollouts import AGENT_SYSTEM_PROMPT
from spade_engine.engine.stages import derive_seed, play_specs
from spade_engine.events import PolicyUpdated, RunStarted, json_schemas, make_envelope
from spade_engine.events.catalogue import EVENT_TYPES, EvaluationCompleted
from spade_engine.events.store import DataDir, open_event_log
from spade_engine.evaluation.recording import EVALUATIONS_RUN, read_evaluations, record
from spade_engine.evaluation.runner import EVAL_PROMPTS, EvalSettings, EvaluationError, eval_messages, evaluate, policy_info
from spade_engine.evaluation.scoring import extract_answer, wilson_interval
from spade_engine.evaluation.seeds import (
    EVAL_RANGE,
    MAX_ITEMS,
    SEED_RULE,
    TRAINING_RANGE,
    SeedRangeError,
    check_training_seeds,
    eval_dataset_seed,
    eval_seed,
    is_eval_seed,
    training_dataset_seed,
    training_seed,
)
from spade_engine.evaluation.suites import DEFAULT_TASKS, SuiteError, parse_suite, reasoning_gym_tasks

runner = CliRunner()


class Scripted:
    """A policy without weights that answers from the request (a test double of the protocol)."""

    kind = "scripted"
    context_window: int | None = None  # the Policy protocol's declared members
    on_progress = None

    def __init__(self, answer, name="scripted"):
        self._answer = answer
        self.name = name
        self.calls: list[int] = []

    @property
    def version(self) -> str:
        return "v0"

    def generate(self, requests):
        self.calls.append(len(requests))
        return [Sample(text=self._answer(r), completion_token_ids=[1, 2]) for r in requests]

    def load_version(self, version, checkpoint, *, adapter=None):
        raise AssertionError("not used")

    def describe(self):
        return {"kind": self.kind, "model": self.name}


def oracle(req: PolicyRequest) -> str:
    return f"Thinking. \\boxed{{{req.context.eval.answer}}}"


def garbage(req: PolicyRequest) -> str:
    return "I am not sure. \\boxed{zzz garbage}"


def rg(tasks=("gcd", "basic_arithmetic", "word_sorting"), size=3, seed=0):
    return reasoning_gym_tasks(parse_suite("reasoning-gym:" + ",".join(tasks)), size=size, seed=seed)


# -- the seed rule ----------------------------------------------------------------------------


def test_seed_ranges_are_disjoint_and_fit_32_bits():
    assert TRAINING_RANGE.stop <= EVAL_RANGE.start and EVAL_RANGE.stop == 2**32
    assert (EVAL_RANGE.start - 1) in TRAINING_RANGE and EVAL_RANGE.start not in TRAINING_RANGE
    rng = random.Random(5)
    for _ in range(2000):
        seed, task, size = rng.randrange(10**9), rng.choice(DEFAULT_TASKS), rng.choice([1, 7, 500, MAX_ITEMS])
        eb, tb = eval_dataset_seed(seed, task, size), training_dataset_seed(seed, task, size)
        assert eb in EVAL_RANGE and eb + size - 1 in EVAL_RANGE
        assert tb in TRAINING_RANGE and tb + size - 1 in TRAINING_RANGE
        assert eval_seed("archive", "run", seed) in EVAL_RANGE
        assert training_seed("x", seed) == derive_seed("x", seed) and training_seed("x", seed) in TRAINING_RANGE
    with pytest.raises(SeedRangeError):
        eval_dataset_seed(0, "gcd", MAX_ITEMS + 1)
    with pytest.raises(SeedRangeError):
        training_dataset_seed(0, "gcd", 0)


def test_training_sources_reject_evaluation_seeds_and_the_engine_passes():
    # the engine's own training plays (play_specs -> derive_seed) are in the training range
    seeds = [s.seed for i in range(300) for s in play_specs(i, f"env-{i:04d}", 4)]
    check_training_seeds(seeds, source="engine plays")
    # every item seed an evaluation uses is refused by the check training sources call
    items = [it.seed for t in rg(size=5, seed=11) for it in t.items]
    assert all(is_eval_seed(s) for s in items)
    for s in items[:3] + [EVAL_RANGE.start, EVAL_RANGE.stop - 1]:
        with pytest.raises(SeedRangeError, match="evaluation seed"):
            check_training_seeds([1, 2, s])
    with pytest.raises(SeedRangeError, match="out of range"):
        check_training_seeds([-1])


def test_training_and_evaluation_datasets_share_no_item():
    """The same task at the same user seed, as a training dataset and as the evaluation suite:
    no item seed in common (so no item of the suite can be generated for training)."""
    import reasoning_gym

    size = 40
    for task in ("gcd", "word_sorting"):
        train = reasoning_gym.create_dataset(task, size=size, seed=training_dataset_seed(0, task, size))
        (ev,) = reasoning_gym_tasks(parse_suite(f"reasoning-gym:{task}"), size=size, seed=0)
        train_seeds = {train.seed + i for i in range(size)}
        eval_seeds = {it.seed for it in ev.items}
        assert len(eval_seeds) == size and not train_seeds & eval_seeds
        check_training_seeds(train_seeds)


# -- suites -----------------------------------------------------------------------------------


def test_suite_parsing_and_bad_names():
    assert parse_suite("reasoning-gym").tasks == DEFAULT_TASKS
    assert parse_suite("rg:gcd,lcm").tasks == ("gcd", "lcm")
    spec = parse_suite("archive:run-1")
    assert spec.kind == "archive" and spec.run == "run-1" and spec.name == "archive:run-1"
    with pytest.raises(SuiteError, match="did you mean gcd"):
        parse_suite("reasoning-gym:gcdd")
    with pytest.raises(SuiteError, match="unknown suite"):
        parse_suite("mmlu:all")
    with pytest.raises(SuiteError, match="needs a run"):
        parse_suite("archive:")
    with pytest.raises(SuiteError, match="not supported"):
        parse_suite("rg:composite")


def test_items_are_deterministic_for_a_seed():
    a, b, c = rg(seed=3), rg(seed=3), rg(seed=4)
    assert [[(i.seed, i.question, i.answer) for i in t.items] for t in a] == [
        [(i.seed, i.question, i.answer) for i in t.items] for t in b
    ]
    assert {i.seed for t in a for i in t.items}.isdisjoint({i.seed for t in c for i in t.items})
    assert [i.question for i in a[0].items] != [i.question for i in c[0].items]
    assert a[0].generator.startswith("reasoning-gym 0.1.") and a[0].config["size"] == 3


# -- scoring ----------------------------------------------------------------------------------


def test_wilson_interval_values():
    lo, hi = wilson_interval(0, 3)
    assert lo == 0.0 and hi == pytest.approx(0.56151, abs=1e-4)
    lo, hi = wilson_interval(3, 3)
    assert lo == pytest.approx(0.43849, abs=1e-4) and hi == 1.0
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-4), pytest.approx(0.76341, abs=1e-4))
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_answer_extraction():
    assert extract_answer("so \\boxed{1} no wait \\boxed{ {2} }") == "{2}"
    assert extract_answer("<answer> 42 </answer>") == "42"
    assert extract_answer("forty-two") is None


def test_oracle_scores_one_and_garbage_zero_on_the_default_tasks():
    """The verifier path is real: reasoning-gym's own score_answer gives the oracle's boxed
    answers 1.0 and garbage 0.0 on every default task; an off-by-one answer is wrong."""
    tasks = reasoning_gym_tasks(parse_suite("reasoning-gym"), size=3, seed=0)
    settings = EvalSettings(batch_size=7)
    good = evaluate(Scripted(oracle), tasks, settings)
    bad = evaluate(Scripted(garbage), tasks, settings)
    assert [r.task.task for r in good] == list(DEFAULT_TASKS)
    for g, b in zip(good, bad):
        assert (g.score.accuracy, g.score.mean_score, g.score.item_correct) == (1.0, 1.0, [1, 1, 1]), g.task.task
        assert (b.score.accuracy, b.score.correct) == (0.0, 0), b.task.task
        assert g.score.interval() == (pytest.approx(0.4385, abs=1e-3), 1.0)
        assert b.score.interval() == (0.0, pytest.approx(0.5615, abs=1e-3))
    (gcd,) = rg(("gcd",))
    off_by_one = evaluate(Scripted(lambda r: f"\\boxed{{{int(r.context.eval.answer) + 1}}}"), [gcd], settings)
    assert off_by_one[0].score.accuracy == 0.0
    tags = evaluate(Scripted(lambda r: f"<answer>{r.context.eval.answer}</answer>"), [gcd], settings)
    assert tags[0].score.accuracy == 1.0


def test_batches_samples_avg_at_k_and_a_raising_verifier():
    tasks = rg(size=4)
    policy = Scripted(lambda r: oracle(r) if r.context.eval.sample % 2 == 0 else garbage(r))
    res = evaluate(policy, tasks, EvalSettings(k=4, temperature=0.7, batch_size=5))
    assert policy.calls == [5] * 9 + [3]  # 3 tasks x 4 items x 4 samples = 48 requests
    for r in res:
        assert r.score.accuracy == 0.5 and r.score.item_correct == [2, 2, 2, 2]
        ev = r.event(evaluation_id="e", policy=policy_info(policy), settings=EvalSettings(k=4, temperature=0.7))
        assert ev.k == 4 and ev.correct == 8 and not ev.greedy and ev.completion_tokens == 32
        assert (ev.ci_low, ev.ci_high) == pytest.approx(wilson_interval(2, 4))  # over the 4 items, not 16 samples
    with pytest.raises(EvaluationError, match="needs sampling"):
        EvalSettings(k=2, temperature=0.0)
    # prime_factorization's verifier raises on a non-number: a scoring error, scored 0, no crash
    (pf,) = rg(("prime_factorization",))
    (r,) = evaluate(Scripted(garbage), [pf], EvalSettings())
    assert r.score.accuracy == 0.0 and r.score.scoring_errors == 3


def test_the_system_prompt_is_chosen_by_name_and_recorded():
    """boxed-v1 (the first prompt) is the default; boxed-v2 asks for an empty box; agent-v1 asks as
    the agent plays a fixed pool's item; agent-plain-v1 sends the agent's system prompt and the bare
    question; the name is recorded as prompt_version."""
    assert "\\boxed{}" in EVAL_PROMPTS["boxed-v2"] and "\\boxed{<answer>}" in EVAL_PROMPTS["boxed-v1"]
    (gcd,) = rg(("gcd",), size=2)
    assert EVAL_PROMPTS["agent-v1"] == EVAL_PROMPTS["agent-plain-v1"] == AGENT_SYSTEM_PROMPT
    assert set(EVAL_PROMPTS) == {"boxed-v1", "boxed-v2", "agent-v1", "agent-plain-v1"}
    assert set(typing.get_args(EvalConfig.model_fields["prompt"].annotation)) == set(EVAL_PROMPTS)  # [eval] prompt takes each
    for name in EVAL_PROMPTS:
        seen: list[str] = []
        users: list[str] = []

        def reply(req, seen=seen, users=users):
            seen.append(req.messages[0]["content"])
            users.append(req.messages[1]["content"])
            return oracle(req)

        settings = EvalSettings(prompt=name) if name != "boxed-v1" else EvalSettings()
        policy = Scripted(reply)
        (res,) = evaluate(policy, [gcd], settings)
        assert seen == [EVAL_PROMPTS[name]] * 2 and res.score.accuracy == 1.0
        assert users == [eval_messages(name, item.question)[1]["content"] for item in gcd.items]
        assert (users[0] == gcd.items[0].question) == (name != "agent-v1")  # only agent-v1 adds to the question
        assert res.event(evaluation_id="e", policy=policy_info(policy), settings=settings).prompt_version == name


def test_greedy_tiny_model_is_deterministic_and_records_its_events(tmp_path):
    from spade_engine.policy.transformers_policy import TransformersPolicy

    def run():
        policy = TransformersPolicy.from_tiny(seed=1, max_new_tokens=6)
        res = evaluate(policy, rg(size=2, seed=9), EvalSettings(max_new_tokens=6, batch_size=4))
        info = policy_info(policy)
        return [r.event(evaluation_id="x", policy=info, settings=EvalSettings(max_new_tokens=6)) for r in res]

    a, b = run(), run()
    strip = lambda evs: [msgspec.structs.replace(e, seconds=0.0) for e in evs]  # noqa: E731
    assert strip(a) == strip(b)
    assert a[0].model == "tiny:1" and a[0].policy_version == "v0" and a[0].checkpoint_sha256 is None
    assert a[0].completion_tokens > 0 and a[0].seed_rule == SEED_RULE
    log = open_event_log("run-eval", data_dir=tmp_path, create=True)
    try:
        record(log, a)
        back = read_evaluations(log)
    finally:
        log.close()
    assert back == a


# -- the event --------------------------------------------------------------------------------


def test_evaluation_completed_is_a_versioned_run_level_event():
    assert EVENT_TYPES["EvaluationCompleted"] is EvaluationCompleted and EvaluationCompleted.VERSION == 1
    schema = json_schemas()["EvaluationCompleted"]
    required = set(schema["$defs"]["EvaluationCompleted"]["required"])
    assert {"suite", "task", "items", "seed", "accuracy", "ci_low", "ci_high", "policy_version",
            "checkpoint_sha256", "item_seeds", "k", "greedy", "temperature", "correct", "model"} <= required
    env = make_envelope(
        EvaluationCompleted(
            evaluation_id="e", suite="reasoning-gym", task="gcd", items=1, seed=0, k=1, temperature=0.0, greedy=True,
            correct=1, accuracy=1.0, ci_low=0.2, ci_high=1.0, policy_version="v0", checkpoint_sha256=None,
            model="m", item_seeds=[EVAL_RANGE.start],
        ),
        run_id="run-x", producer="t",
    )
    assert env.key == "run-x" and env.schema_version == 1


# -- the command ------------------------------------------------------------------------------


def _eval(*args, data, progress=False):
    return runner.invoke(app, ["eval", *args, "--data-dir", str(data), *([] if progress else ["--no-progress"])])


def test_cli_tiny_model_json_recorded_in_the_evaluations_log(tmp_path):
    data = tmp_path / "data"
    res = _eval("reasoning-gym:gcd,lcm", "--model", "tiny:2", "--size", "2", "--max-new-tokens", "4", "--json", data=data)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["recorded_in"] == EVALUATIONS_RUN and doc["policy"]["model"] == "tiny:2"
    assert [r["task"] for r in doc["results"]] == ["gcd", "lcm"]
    log = open_event_log(EVALUATIONS_RUN, data_dir=data)
    try:
        back = read_evaluations(log)
    finally:
        log.close()
    assert [msgspec.to_builtins(e) for e in back] == doc["results"]
    for ev in back:
        assert ev.items == 2 and len(ev.item_seeds) == 2 and all(map(is_eval_seed, ev.item_seeds))
        assert ev.greedy and ev.k == 1 and ev.max_new_tokens == 4 and ev.evaluation_id == doc["evaluation_id"]
        assert 0.0 <= ev.ci_low <= ev.accuracy <= ev.ci_high <= 1.0
    # the evaluations log is never "the latest run"
    runs_dir = DataDir(data)
    log = open_event_log("run-20990101-000000-aaaaaa", data_dir=data, create=True)
    log.close()
    assert runs_dir.latest_run() == "run-20990101-000000-aaaaaa"
    # the table as TSV, its legend and plain progress lines on stderr (not a terminal)
    res = _eval("rg:gcd", "--model", "tiny:2", "--size", "2", "--max-new-tokens", "4", "--no-record", data=data, progress=True)
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0] == ["suite", "task", "items", "k", "acc", "95% CI", "score", "err"]
    assert [r[:4] for r in rows[1:]] == [["reasoning-gym", "gcd", "2", "1"]]
    assert "not recorded" in res.stderr and "Wilson" in res.stderr
    assert "eval reasoning-gym/gcd: 0/2 items" in res.stderr and "eval reasoning-gym/gcd: 2/2 items" in res.stderr


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    data = tmp_path / "data"
    for args, needle in [
        (["rg:gcdd", "--model", "tiny"], "did you mean gcd"),
        (["rg:gcd"], "give a policy"),
        (["rg:gcd", "--model", "tiny", "--samples", "3", "--temperature", "0"], "needs sampling"),
        (["rg:gcd", "--model", "tiny", "--size", "1", "--record-run", "nope"], "no run 'nope'"),
        (["archive:nope", "--model", "procedural"], "no run"),
        (["rg:gcd", "rg:gcd", "--model", "tiny", "--size", "1"], "named twice"),
        (["rg:gcd", "--run", "nope"], "no run 'nope'"),
        (["rg:gcd", "--model", "tiny", "--prompt", "boxed-v9"], "unknown evaluation prompt 'boxed-v9'"),
    ]:
        res = _eval(*args, data=data)
        assert res.exit_code == 2, (args, res.output)
        assert needle in res.output and "Traceback" not in res.output


def _run_with_checkpoint(data: Path) -> tuple[str, str]:
    """A run whose trainer published v1 (perturbed tiny:1 weights) as a real checkpoint blob."""
    import torch

    from spade_engine.policy.tiny import build_tiny_model
    from spade_engine.trainer.checkpoints import save_weights

    model, _ = build_tiny_model(seed=1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05)
    ref = save_weights(model, BlobStore(DataDir(data).blobs_dir))
    run_id = "run-20260101-000000-ckpt00"
    log = open_event_log(run_id, data_dir=data, create=True)
    try:
        cfg = load_config(overrides={"policy.kind": "transformers", "policy.model": "tiny:1"})
        log.append([
            make_envelope(RunStarted(config=cfg.model_dump(), engine_version="t", seed=0), run_id=run_id, producer="t"),
            make_envelope(
                PolicyUpdated(version="v1", parent_version="v0", checkpoint=ref, step=1, base_model="tiny:1"),
                run_id=run_id, producer="t",
            ),
        ])
    finally:
        log.close()
    return run_id, ref.sha256


def test_cli_run_version_loads_the_checkpoint_and_records_into_that_run(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    from spade_engine.evaluation import cli as eval_cli
    from spade_engine.trainer.checkpoints import effective_state_dict

    data = tmp_path / "data"
    run_id, sha = _run_with_checkpoint(data)
    built = []
    real_build = eval_cli.build_policy
    monkeypatch.setattr(eval_cli, "build_policy", lambda *a, **kw: built.append(real_build(*a, **kw)) or built[-1])
    base = ["rg:basic_arithmetic", "--size", "2", "--max-new-tokens", "12", "--json"]
    res = _eval(*base, "--run", run_id, "--version", "v1", data=data)
    assert res.exit_code == 0, res.output
    (v1,) = json.loads(res.stdout.strip().splitlines()[-1])["results"]
    assert (v1["policy_version"], v1["checkpoint_sha256"], v1["policy_run_id"], v1["model"]) == ("v1", sha, run_id, "tiny:1")
    res = _eval(*base, "--run", run_id, "--version", "v0", data=data)
    assert res.exit_code == 0, res.output
    (v0,) = json.loads(res.stdout.strip().splitlines()[-1])["results"]
    assert v0["policy_version"] == "v0" and v0["checkpoint_sha256"] is None
    assert v0["item_seeds"] == v1["item_seeds"]
    # the v1 policy evaluated the checkpoint's weights, the v0 one the base weights
    ckpt = load_file(str(BlobStore(DataDir(data).blobs_dir).path_for(sha)))
    w1, w0 = effective_state_dict(built[0].model), effective_state_dict(built[1].model)
    assert set(w1) == set(ckpt) and all(torch.equal(w1[k], ckpt[k]) for k in ckpt)
    assert not all(torch.equal(w0[k], ckpt[k]) for k in ckpt)
    log = open_event_log(run_id, data_dir=data)
    try:
        recorded = read_evaluations(log)
    finally:
        log.close()
    assert [e.policy_version for e in recorded] == ["v1", "v0"]
    res = _eval(*base, "--run", run_id, "--version", "v7", data=data)
    assert res.exit_code == 2 and "known: v0, v1" in res.output


# -- the archive suite ------------------------------------------------------------------------


class SkillOracle(Scripted):
    """Plays archived procedural environments perfectly: the skill family's own solver."""

    def __init__(self):
        super().__init__(lambda r: f"\\boxed{{{FAMILIES[r.context.skill].solve(r.context.observation)}}}", "oracle")


@pytest.fixture(scope="module")
def archived_run(tmp_path_factory):
    from spade_engine.runs.engine import open_engine

    data = tmp_path_factory.mktemp("archive")
    cfg = load_config(overrides={
        "seed": 3, "loop.max_envs": 7, "loop.plays_per_env": 1, "policy.defect_rate": 0.0, "loop.max_repairs": 0,
    })
    run_id = "run-20260101-000000-arc000"
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True, projections=False) as opened:
        assert opened.engine.run() == "max_envs"
        accepted = sorted(s.env_id for s in opened.engine.state.proposed() if s.accepted)
    return data, run_id, accepted, cfg


@pytest.mark.sandbox
@pytest.mark.slow
def test_archive_suite_plays_archived_environments_in_the_sandbox(archived_run):
    from spade_engine.sandbox import SandboxPool
    from spade_engine.evaluation.suites import archive_tasks

    data, run_id, accepted, cfg = archived_run
    log = open_event_log(run_id, data_dir=data)
    try:
        tasks = archive_tasks(log, size=None, seed=0)
        again = archive_tasks(log, size=None, seed=0)
        other = archive_tasks(log, size=None, seed=1)
    finally:
        log.close()
    assert sorted(i.item_id for t in tasks for i in t.items) == accepted and len(accepted) >= 5
    assert [[i.seed for i in t.items] for t in tasks] == [[i.seed for i in t.items] for t in again]
    assert {i.seed for t in tasks for i in t.items}.isdisjoint({i.seed for t in other for i in t.items})
    assert all(is_eval_seed(i.seed) for t in tasks for i in t.items)
    assert {t.suite for t in tasks} == {f"archive:{run_id}"} and tasks[0].turn_limit == cfg.loop.turn_limit
    pool = SandboxPool(cfg.sandbox)
    try:
        good = evaluate(SkillOracle(), tasks, EvalSettings(), pool=pool, step_timeout_s=2.0, concurrency=2)
        bad = evaluate(Scripted(garbage), tasks, EvalSettings(), pool=pool, step_timeout_s=2.0, concurrency=2)
        sampler = SkillOracle()
        seen: list[tuple[int, int]] = []
        answer = sampler._answer
        sampler._answer = lambda r: seen.append((r.context.play_seed, r.seed)) or answer(r)
        sampled = evaluate(sampler, tasks[:1], EvalSettings(k=3, temperature=0.5), pool=pool, concurrency=2)
    finally:
        pool.close()
    assert all(r.score.accuracy == 1.0 and r.score.scoring_errors == 0 for r in good)
    assert all(r.score.accuracy == 0.0 for r in bad)
    assert sampled[0].score.item_correct == [3] * len(tasks[0].items)
    # k plays in groups of `concurrency`: each play its own evaluation reset seed and sampling seed
    ev = sampled[0].event(evaluation_id="e", policy=policy_info(sampler), settings=EvalSettings(k=3, temperature=0.5))
    n = len(tasks[0].items)
    assert len(ev.item_seeds) == 3 * n == len(set(ev.item_seeds)) and all(map(is_eval_seed, ev.item_seeds))
    assert ev.item_seeds[::3] == [i.seed for i in tasks[0].items]
    assert {play_seed for play_seed, _ in seen} == set(ev.item_seeds)
    assert len({request_seed for _, request_seed in seen}) >= 3 * n
    check = good[0].event(evaluation_id="e", policy=policy_info(sampler), settings=EvalSettings())
    assert check.item_seeds == [i.seed for i in tasks[0].items]
    with pytest.raises(EvaluationError, match="needs a sandbox pool"):
        evaluate(SkillOracle(), tasks, EvalSettings())


@pytest.mark.sandbox
@pytest.mark.slow
def test_cli_archive_suite_with_the_procedural_policy(archived_run):
    data, run_id, accepted, _ = archived_run
    res = _eval(f"archive:{run_id}", "--model", "procedural", "--json", "--record-run", run_id, data=data)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["recorded_in"] == run_id
    assert sorted(i for r in doc["results"] for i in r["item_ids"]) == accepted
    assert sum(r["items"] for r in doc["results"]) == len(accepted)
    log = open_event_log(run_id, data_dir=data)
    try:
        assert [msgspec.to_builtins(e) for e in read_evaluations(log)] == doc["results"]
    finally:
        log.close()


@pytest.mark.sandbox
@pytest.mark.slow
def test_cli_archive_suite_warns_when_the_policy_trained_on_that_archive(archived_run):
    """A policy of a run whose environments came from `--env-source archive:X` (or of X itself)
    has seen X's environments: evaluating it on archive:X says so."""
    data, run_id, _, cfg = archived_run
    trained = "run-20260101-000000-trn000"
    recorded = load_config(overrides={"loop.env_source": f"archive:{run_id[:-2]}"})  # a unique prefix, as a user types it
    log = open_event_log(trained, data_dir=data, create=True)
    log.append([make_envelope(RunStarted(config=recorded.model_dump(mode="json"), engine_version="t", seed=0),
                              run_id=trained, producer="t")])
    log.close()
    for policy_run, warned in ((trained, True), (run_id, True)):
        res = _eval(f"archive:{run_id}", "--run", policy_run, "--version", "v0", "--model", "procedural", "--size", "1",
                    "--no-record", data=data)
        assert res.exit_code == 0, res.output
        assert (f"archive:{run_id} is not held out for it" in res.stderr) is warned, res.stderr
    res = _eval("reasoning-gym:gcd", "--run", trained, "--version", "v0", "--model", "procedural", "--size", "1",
                "--no-record", data=data)
    assert res.exit_code == 0 and "not held out" not in res.stderr


def test_each_task_is_reported_when_its_last_item_is_scored():
    tasks = rg(size=3)
    seen: list[tuple[int, str, int, int]] = []
    policy = Scripted(oracle)
    res = evaluate(policy, tasks, EvalSettings(batch_size=4),
                   on_task_done=lambda i, r: seen.append((i, r.task.task, r.score.items, len(policy.calls))))
    # in order, once each, complete, and as soon as possible: gcd's 3 items end in the first batch of 4
    assert [(i, t, n) for i, t, n, _ in seen] == [(0, "gcd", 3), (1, "basic_arithmetic", 3), (2, "word_sorting", 3)]
    assert [calls for *_, calls in seen] == [1, 2, 3]
    assert all(r.score.accuracy == 1.0 for r in res)


def test_an_interrupted_cli_eval_keeps_the_tasks_it_finished(tmp_path, monkeypatch):
    # the policy dies on the second task: the first task's result is already in the log
    import spade_engine.evaluation.cli as eval_cli

    class DiesOnLcm(Scripted):
        def generate(self, requests):
            if any(r.context.eval.task == "lcm" for r in requests):
                raise KeyboardInterrupt
            return super().generate(requests)

        def close(self):
            pass

    monkeypatch.setattr(eval_cli, "build_policy", lambda *a, **k: DiesOnLcm(oracle))
    data = tmp_path / "data"
    res = _eval("reasoning-gym:gcd,lcm", "--model", "tiny:2", "--size", "2", "--batch-size", "2", data=data)
    assert res.exit_code != 0
    log = open_event_log(EVALUATIONS_RUN, data_dir=data)
    try:
        back = read_evaluations(log)
    finally:
        log.close()
    assert [(e.task, e.items, e.accuracy) for e in back] == [("gcd", 2, 1.0)]


def test_eval_prints_no_syntax_warnings_of_dependencies(tmp_path):
    """A reasoning-gym `eval` on a fresh interpreter (nothing compiled yet: its own bytecode cache)
    prints its results, not the SyntaxWarning lines cellpylib's source raises when compiled."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    # nothing cached: every module is compiled in the subprocess, as on a fresh install
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    fresh = ["-X", f"pycache_prefix={tmp_path / 'pycache'}"]
    bare = subprocess.run([sys.executable, *fresh, "-c", "import reasoning_gym"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert "SyntaxWarning" in bare.stderr, "the dependency's warnings are due here (else this test proves nothing)"
    res = subprocess.run(
        [sys.executable, *fresh, "-m", "spade_engine.cli", "eval", "reasoning-gym:gcd", "--model", "procedural", "--size", "2",
         "--no-record", "-d", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "reasoning-gym\tgcd\t2\t" in res.stdout
    assert "SyntaxWarning" not in res.stderr and "Warning" not in res.stderr, res.stderr


@pytest.mark.sandbox
def test_start_after_eval_starts_a_run_and_leaves_the_evaluations_log_alone(tmp_path):
    """The data directory's evaluations log (``eval --model``) is not a run: a plain ``start``
    after an evaluation starts a new run (it once resumed the evaluations log as an unfinished
    run and wrote a whole run into it), and commands that pick the latest run pick that run."""
    data = tmp_path / "data"
    res = _eval("reasoning-gym:gcd", "--model", "procedural", "--size", "4", data=data)
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["start", "--max-envs", "2", "--no-progress", "--data-dir", str(data)])
    assert res.exit_code == 0, res.output
    from spade_engine.events.store import list_runs, resolve_run

    listed = list_runs(data_dir=data)
    assert EVALUATIONS_RUN in listed and len(listed) == 2
    (run_id,) = [r for r in listed if r != EVALUATIONS_RUN]
    assert resolve_run(None, data_dir=data) == run_id
    log = open_event_log(EVALUATIONS_RUN, data_dir=data)
    try:
        assert {r.envelope.type for r in log.read()} == {"EvaluationCompleted"}
    finally:
        log.close()
