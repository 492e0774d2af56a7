"""The seed archive (issue 17): the bundled environments validate in full, span the skills, have
hidden state, partial rewards and solutions; a run records them like any environment (replay sees
them) and its first designer prompts show their complete code; a near-copy of one is sent back to
the designer as a repair ("too close to X")."""

from __future__ import annotations

from collections import Counter

import pytest

from engine_support import ScriptedDesigner, run_scripted
from sandbox_support import fast_config
from spade_engine.config import load_config
from spade_engine.engine.seed_archive import BUNDLED_DIR, load_seed_envs, resolve_seed_spec
from spade_engine.engine.skills import SKILLS
from spade_engine.errors import ConfigError
from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.scaffold import code_format, strip
from spade_engine.sandbox.validator import Validator
from spade_engine.policy.request_context import DesignContext

SEEDS = load_seed_envs("bundled")


def test_the_bundled_archive_spans_the_skills() -> None:
    assert len(SEEDS) >= 2 * len(SKILLS)
    by_skill = Counter(s.skill for s in SEEDS)
    # every engine skill has at least two seeds, and no seed declares a skill outside the set
    assert set(by_skill) == set(SKILLS) and min(by_skill.values()) >= 2, by_skill
    assert len({s.code for s in SEEDS}) == len(SEEDS)
    import ast

    for s in SEEDS:
        assert s.code.startswith('"""') and "def solution(self)" in s.code and "random.Random(seed)" in s.code, s.name
        # self-contained classes: a designer that copies only the class copies everything it uses
        # (a TextGame game is recorded with its base class inlined: the game is the class after it)
        body = ast.parse(strip(s.code)).body
        assert [type(n).__name__ for n in body if not isinstance(n, (ast.Import, ast.Expr))] == ["ClassDef"], s.name
        assert not any(isinstance(n, ast.ImportFrom) for n in ast.walk(ast.parse(s.code))), s.name
        assert s.designer == f"seed:{s.name}" and 0.0 <= s.difficulty <= 1.0
    assert resolve_seed_spec("auto", needs_model=True) == "bundled"
    assert resolve_seed_spec("auto", needs_model=False) is None and resolve_seed_spec("none", needs_model=True) is None


def test_a_seed_directory_is_read_and_bad_specs_are_clear_errors(tmp_path) -> None:
    (tmp_path / "mine.py").write_text("# skill: tool_use\n# difficulty: 0.9\nclass MineEnv: pass\n")
    (tmp_path / "notes.txt").write_text("ignored")
    (mine,) = load_seed_envs(str(tmp_path))
    assert (mine.name, mine.skill, mine.difficulty) == ("mine", "tool_use", 0.9)
    with pytest.raises(ConfigError, match="not 'bundled'"):
        load_seed_envs(str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no .py environments"):
        load_seed_envs(str(empty))


@pytest.mark.sandbox
def test_every_seed_validates_in_full_with_partial_rewards_along_its_solution() -> None:
    cfg = load_config()
    with SandboxPool(fast_config()) as pool:
        validator = Validator(pool, turn_limit=cfg.loop.turn_limit)
        partial = 0
        for seed in SEEDS:
            report = validator.validate(seed.code)
            assert report.valid, f"{seed.name}: {report.failed_check}: {report.detail}"
            assert [c.name for c in report.checks][-1] == "gymnasium_api" and report.has_solution
            with pool.open_session(seed.code, max_turns=cfg.loop.turn_limit) as s:
                s.reset(seed=3)
                actions = s.solution()
                assert actions and len(actions) <= cfg.loop.turn_limit, seed.name
                rewards = [s.step(a)[1] for a in actions]
            assert rewards[-1] == 1.0, seed.name
            partial += any(0.0 < r < 1.0 for r in rewards[:-1])
        games = [s for s in SEEDS if code_format(s.code) != "puzzle"]  # a one-answer puzzle has no way along
        assert partial >= 3 * len(games) // 4  # most games reward progress along the way


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_run_records_the_seeds_shows_them_and_repairs_a_near_copy(tmp_path) -> None:
    copied = next(s for s in SEEDS if s.name == "ledger_audit")
    fresh = (BUNDLED_DIR.parent.parent.parent / "tests" / "envs" / "guess_number_env.py").read_text()
    policy = ScriptedDesigner(copied.code, fresh)
    cfg = load_config(overrides={
        "loop.seed_envs": "bundled", "loop.max_envs": 1, "loop.plays_per_env": 1, "loop.max_repairs": 1,
        "sandbox.workers": 2, "sandbox.step_timeout_s": 2.0,
    })
    data = tmp_path / "data"
    by_type, props, verdicts = run_scripted(cfg, policy, "run-seeds-abcdef", data)
    seeds = {k: p for k, p in props.items() if p["designer"].startswith("seed:")}
    assert len(seeds) == len(SEEDS) and all(verdicts[k]["accepted"] for k in seeds)
    assert not any(e.payload["env_id"] in seeds for e in by_type.get("HintWritten", []))  # validated, not played
    copied_id = next(k for k, p in seeds.items() if p["designer"] == "seed:ledger_audit")

    # the first designer prompt shows complete seed code and names it as a parent
    first = props["abcdef-e00000"]
    shown = [k for k, p in seeds.items() if p["code"].strip() in first["prompt"]]
    assert shown and set(shown) <= set(first["parents"])
    # ... of other skills than the one asked for (a small model copies a same-skill example)
    assert all(seeds[k]["skill"] != first["skill"] for k in shown), (first["skill"], [seeds[k]["skill"] for k in shown])
    assert f"capped at {cfg.loop.turn_limit} turns" in first["prompt"]

    # the verbatim copy is a duplicate of the seed, sent back as a repair that says so
    dup = verdicts["abcdef-e00000"]
    assert dup["valid"] and not dup["accepted"] and dup["error_kind"] == "duplicate" and dup["nearest_env_id"] == copied_id
    repair = props["abcdef-e00000-r1"]
    assert repair["repair_of"] == "abcdef-e00000" and repair["attempt"] == 1
    repair_req = next(r for r in policy.requests if r.role == "designer" and (isinstance(r.context, DesignContext) and r.context.repair is not None))
    assert f"too close to {copied_id}" in repair_req.messages[-1]["content"]
    assert verdicts["abcdef-e00000-r1"]["accepted"]

    # replay sees the seeds like any environment
    from spade_engine.archive.queries import list_environments
    from spade_engine.archive.replay import open_projections
    from spade_engine.events.store import DataDir

    with open_projections(DataDir(data).run_dir("run-seeds-abcdef"), cfg) as projs:
        rows = {r["env_id"] for r in list_environments(projs.archive.engine, limit=None)}
    assert set(seeds) <= rows


def test_a_renamed_seed_without_its_docstring_is_still_a_copy() -> None:
    from spade_engine.engine.stages import code_lines, copied_share

    seed = next(s for s in SEEDS if s.name == "interleaved_sequence").code
    body = seed.split('"""', 2)[2]  # no module docstring
    renamed = body.replace("class InterleavedSequenceEnv:", "class SequenceEnv:").replace("max_turns=12", "max_turns=16")
    assert "class SequenceEnv" in renamed
    assert copied_share(renamed, seed) >= 0.9
    assert not any(line.startswith("class ") or line.startswith("#") for line in code_lines(renamed))
    # different seeds share their boilerplate only
    others = [s.code for s in SEEDS if s.name != "interleaved_sequence"]
    assert max(copied_share(seed, o) for o in others) < load_config().memory.copy_threshold


def test_no_seed_is_a_near_copy_of_another() -> None:
    """Each seed's logic lines are its own: no pair of seeds comes near the copy threshold in
    either direction (a designer copying one seed is caught as a copy of that seed only)."""
    from spade_engine.engine.stages import copied_share

    limit = load_config().memory.copy_threshold
    worst = max((copied_share(a.code, b.code), a.name, b.name) for a in SEEDS for b in SEEDS if a is not b)
    assert worst[0] < limit, f"{worst[1]} repeats {worst[0]:.0%} of the lines of {worst[2]} (threshold {limit:g})"
    # and the seeds of one skill are different games, not variants of one
    for a in SEEDS:
        for b in SEEDS:
            if a is not b and a.skill == b.skill:
                assert copied_share(a.code, b.code) < limit * 0.75, (a.name, b.name)


@pytest.mark.sandbox
def test_validation_calls_a_renamed_seed_copy_a_duplicate_even_when_its_embedding_looks_new() -> None:
    import numpy as np

    from spade_engine.archive.examples import MemoryExamples
    from spade_engine.engine import stages
    from spade_engine.engine.corpus import bundled_corpus
    from spade_engine.events.catalogue import EnvironmentProposed

    class NewLooking:  # an embedding memory that finds nothing close
        def novelty(self, vec):
            return 1.0, None

        def vector(self, env_id):
            return None

        def examples(self, skill, query_vec=None, k=3, band=(0.4, 0.6)):
            return MemoryExamples()

    class Embedder:
        def embed(self, texts):
            return np.eye(len(texts), 8, dtype=np.float32)

    seed = next(s for s in SEEDS if s.name == "interleaved_sequence")
    renamed = seed.code.split('"""', 2)[2].replace("InterleavedSequenceEnv", "SequenceEnv")
    fresh = (BUNDLED_DIR.parent.parent.parent / "tests" / "envs" / "guess_number_env.py").read_text()
    cfg = load_config()
    with SandboxPool(fast_config()) as pool:
        ctx = stages.StageContext(
            run_id="run-copy-abcdef", cfg=cfg, policy=None, corpus=bundled_corpus(), validator=Validator(pool, turn_limit=25),  # type: ignore[arg-type]
            memory=NewLooking(), embedder=Embedder(), seed_envs=SEEDS,
        )
        props = [
            EnvironmentProposed(env_id=f"abcdef-e0000{i}", skill="sequence", difficulty=0.5, code=c, code_sha256="x", policy_version="v0")
            for i, c in enumerate((renamed, fresh))
        ]
        copy, new = stages.validate_batch(ctx, props)
    index = next(i for i, s in enumerate(SEEDS) if s.name == "interleaved_sequence")
    assert copy.valid and not copy.accepted and copy.error_kind == "duplicate" and copy.novelty == 1.0
    assert copy.nearest_env_id == f"abcdef-s{index:05d}" and "repeats" in copy.checks[-1].detail
    assert new.valid and new.accepted
