"""The procedural designer's skill families (a labelled simulation): every family writes
environments that pass the sandboxed validator at every difficulty, that its simulated agent
solves when it acts on its solver (and not when it acts on its failure mode), whose deliberate
defects the validator catches, and whose code differs in substance between environments of one
family; and over a long procedural run at least half of the proposals are novel."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandbox_support import fast_config, wait_no_sandbox_processes

from spade_engine.engine.corpus import bundled_corpus
from spade_engine.engine.designer import SKILLS, declared_difficulty, extract_code, novelty_text
from spade_engine.policy.protocol import PolicyRequest
from spade_engine.policy.procedural import DEFECTS, ProceduralPolicy
from spade_engine.policy.procedural.policy import _inject_defect
from spade_engine.policy.procedural.families import FAMILIES, family_of_code, render
from spade_engine.engine.rollouts import parse_boxed
from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.validator import Validator
from spade_engine.policy.request_context import DesignContext, DocumentFacts

ROOT = Path(__file__).resolve().parent.parent
DIFFICULTIES = (0.0, 0.35, 0.7, 1.0)
SEEDS = (3, 17)
PLAY_SEEDS = (5, 29)


def _document(name: str, k: int):
    corpus = bundled_corpus()
    return corpus.nth(k, k, domain=SKILLS[name].domain)


def _code(name: str, difficulty: float, seed: int) -> str:
    """An environment as the loop gets it: the designer's completion, through extract_code."""
    doc = _document(name, seed)
    context = DesignContext(env_id="e", skill=name, difficulty=difficulty, turn_limit=8,
                            document=DocumentFacts(doc_id=doc.doc_id, title=doc.title, text=doc.text, domain=doc.domain))
    req = PolicyRequest(role="designer", messages=[{"role": "user", "content": "design"}], context=context, seed=seed)
    code = extract_code(ProceduralPolicy(adaptive=False, defect_rate=0.0).generate([req])[0].text)
    assert code is not None
    return code


def test_families_cover_the_skills_and_domains():
    assert len(FAMILIES) >= 14
    assert set(FAMILIES) == set(SKILLS)
    corpus_domains = set(bundled_corpus().domains())
    for name, fam in FAMILIES.items():
        assert fam.domain == SKILLS[name].domain and fam.domain in corpus_domains, name
        assert fam.hint and "`" not in fam.hint


def test_render_is_a_pure_function_of_its_seed():
    state = random.getstate()
    for name in FAMILIES:
        a = _code(name, 0.5, 7)
        random.seed(12345)  # the global random state plays no part
        assert _code(name, 0.5, 7) == a
        assert family_of_code(a) is FAMILIES[name] and declared_difficulty(a) == pytest.approx(0.5, abs=0.031)
        assert random.getstate() == random.Random(12345).getstate()
        random.setstate(state)


def test_environments_of_one_family_differ_in_substance():
    """Twelve environments of one family on one document: several rule variants and reward
    schemes, several class names, and code that still differs once every number is masked."""
    doc = _document("arithmetic", 0)
    for name, fam in FAMILIES.items():
        codes = [render(fam, 0.6, random.Random(s), title=doc.title, doc_text=doc.text) for s in range(12)]
        variants = {re.search(r"^# variant: (\S+)", c, re.M).group(1) for c in codes}
        classes = {re.search(r"^class (\w+)", c, re.M).group(1) for c in codes}
        assert all(extract_code(f"```python\n{c}```\n") == c for c in codes), name  # no fence inside
        masked = {re.sub(r"\d+", "N", novelty_text(c)) for c in codes}
        schemes = {v.rsplit("/", 1)[1] for v in variants}
        assert len(variants) >= 4 and len(schemes) >= 2, (name, variants)
        assert len(classes) >= 5, (name, classes)
        assert len(masked) == len(codes), name


@pytest.fixture(scope="module")
def validator():
    cfg = fast_config(uid_base=2_000_000_220)
    pool = SandboxPool(cfg)
    yield Validator(pool, turn_limit=8)
    pool.close()
    assert wait_no_sandbox_processes(cfg) == []


def _play(pool: SandboxPool, code: str, act, seed: int) -> tuple[float, bool]:
    """One episode in the sandbox where ``act(observation)`` picks each action (the solver or the
    failure mode of the simulated agent, which read observations only)."""
    with pool.open_session(code, step_timeout_s=2.0) as s:
        obs, _ = s.reset(seed=seed)
        for _ in range(8):
            obs, reward, terminated, truncated, _ = s.step("\\boxed{" + act(obs) + "}")
            if terminated or truncated:
                return float(reward), bool(terminated)
    return 0.0, False


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_validates_and_its_agent_wins_only_when_it_solves(validator, name):
    fam = FAMILIES[name]
    codes = [_code(name, d, s) for d in DIFFICULTIES for s in SEEDS]
    with ThreadPoolExecutor(2) as ex:
        reports = list(ex.map(validator.validate, codes))
    for code, report in zip(codes, reports):
        assert report.valid, (declared_difficulty(code), report.failed_check, report.detail, code)
        assert report.class_name and report.class_name.endswith("Env") and report.has_solution
        assert len(report.solution_actions) <= 8

    pool = validator.pool
    wrong_wins = 0
    for i, code in enumerate(codes):
        for seed in PLAY_SEEDS:
            reward, terminated = _play(pool, code, lambda o: fam.solve(o) or "?", seed)
            assert terminated and reward == 1.0, (name, declared_difficulty(code), seed, code)
            rng = random.Random(i * 100 + seed)
            reward, _ = _play(pool, code, lambda o, rng=rng: fam.wrong(rng, o, fam.solve(o)), seed)
            assert 0.0 <= reward <= 1.0
            wrong_wins += reward >= 1.0
    assert wrong_wins <= len(codes) * len(PLAY_SEEDS) // 8, f"{name}: the failure mode won {wrong_wins} episodes"


@pytest.mark.sandbox
@pytest.mark.parametrize("defect", DEFECTS)
def test_every_deliberate_defect_is_caught_in_every_family(validator, defect):
    codes = [_inject_defect(_code(name, 0.5, 1), defect, random.Random(0)) for name in sorted(FAMILIES)]
    with ThreadPoolExecutor(2) as ex:
        reports = list(ex.map(validator.validate, codes))
    for name, report in zip(sorted(FAMILIES), reports):
        assert not report.valid, (name, defect)


def test_the_agent_reads_its_answers_from_observations():
    """The procedural agent's solver acts on observation text alone."""
    obs = "Sequence so far: [3 -> 7 -> 11 -> 15]. What is the next term? Reply with \\boxed{<integer>}."
    assert FAMILIES["sequence"].solve(obs) == "19"
    obs = "Trace this program:\n--- program ---\nx = 2\nfor i in range(3):\n    x = x * 2 + i\n--- end ---\nWhat is the value of x after iteration 2? Reply."
    assert FAMILIES["code_trace"].solve(obs) == "9"
    obs = "Corridors: a-b, b-c, a-d. You are in d. Goal: c. Budget left: 3. Move with \\boxed{go <room>}."
    assert FAMILIES["graph_path"].solve(obs) == "go a"
    assert parse_boxed("\\boxed{" + FAMILIES["graph_path"].solve(obs) + "}") == "go a"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_long_procedural_run_keeps_proposing_novel_environments():
    """At least half of 1,000 proposals are novel against the accepted archive.

    The cheapest faithful run (``bench/novelty.py --mode designer``): the real designer, seeded
    corpus documents and adaptive difficulty, the real embedding model and novelty rule
    (``memory.novelty_threshold``, 1 - max cosine similarity to every accepted environment), but
    no sandbox: the designer's deliberate defects are switched off (they are orthogonal to
    novelty, and their validation is tested above), and the plays that steer the adaptive
    difficulty are the procedural agent's own per-episode draws instead of sandboxed episodes
    (the draws decide the real plays' outcomes too). Proposals are embedded one block of skills
    at a time, which changes no decision. Its cost is the 1,000 embeddings: 0.25-0.7 s each on
    the shared 2-core VM (4-12 minutes with other jobs on the cores), against 0.3-0.5 s per
    environment more for sandboxed validation (``--mode stages``) and about 0.9 s for the full
    loop with plays."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "novelty.py"), "--mode", "designer", "--n", "1000"],
                         capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=2300)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["proposals"] == result["checked"] == 1000
    assert result["novel_share"] >= 0.5, result
    assert all(share > 0.2 for share in result["novel_share_by_family"].values()), result["novel_share_by_family"]
