"""Unit tests of the engine's pure parts: corpus, regret/reward, action parsing, prompts, code
extraction, hints, procedural designer adaptation, run-state folding."""

from __future__ import annotations

import json
import random

import pytest

from spade_engine.config import RewardConfig
from spade_engine.engine import regret as R
from spade_engine.engine.corpus import Corpus, CorpusError, bundled_corpus, load_documents, truncate_tokens
from spade_engine.engine.designer import (
    SKILLS,
    declared_difficulty,
    designer_messages,
    extract_code,
    novelty_text,
    repair_messages,
)
from spade_engine.archive.examples import MemoryExamples
from spade_engine.engine.hints import clean_hint, hint_messages
from spade_engine.policy.protocol import Policy, PolicyRequest
from spade_engine.policy.procedural import ProceduralPolicy, adapt_difficulty
from spade_engine.policy.procedural.families import FAMILIES, family_of_code, next_term, render
from spade_engine.engine.rollouts import first_user_message, parse_boxed, to_action
from spade_engine.engine.stages import choose_skill, derive_seed, estimate_regret, play_specs
from spade_engine.engine.state import RunState
from spade_engine.events import SqliteEventLog
from spade_engine.policy.request_context import DesignContext, PlayContext
from factories import run_events

# -- corpus ------------------------------------------------------------------------------------


def test_bundled_corpus_has_40_docs_across_domains():
    c = bundled_corpus()
    assert len(c) >= 40
    assert set(c.domains()) >= {"math", "science", "code", "logic", "tool_use"}
    for d in c.documents:
        ref = d.ref()
        assert ref.source.startswith("bundled:") and len(ref.sha256) == 64 and d.text


def test_load_text_markdown_jsonl(tmp_path):
    (tmp_path / "a.txt").write_text("Plain text document about primes.")
    (tmp_path / "b.md").write_text("intro\n# First\nbody one\n# Second\nbody two\n")
    (tmp_path / "c.jsonl").write_text(json.dumps({"id": "x1", "text": "json doc", "domain": "math"}) + "\n\n")
    docs = load_documents([tmp_path])
    by_id = {d.doc_id: d for d in docs}
    assert by_id["a"].text.startswith("Plain")
    assert by_id["b#first"].text == "body one" and by_id["b#second"].title == "Second"
    assert by_id["b#0"].text == "intro"
    assert by_id["x1"].domain == "math"


@pytest.mark.parametrize(
    "content, msg",
    [("{not json\n", "not valid JSON"), (json.dumps({"title": "t"}) + "\n", "'text' field")],
)
def test_bad_jsonl_is_a_clear_error(tmp_path, content, msg):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(CorpusError, match=msg):
        load_documents([p])


def test_missing_or_unsupported_corpus_path(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_documents([tmp_path / "nope.txt"])
    (tmp_path / "x.pdf").write_text("x")
    with pytest.raises(CorpusError, match="unsupported"):
        load_documents([tmp_path / "x.pdf"])
    with pytest.raises(CorpusError, match="empty"):
        Corpus([])


def test_sampling_is_seeded_and_rotates_documents():
    c = bundled_corpus()
    assert c.sample(3, 7) == c.sample(3, 7)
    math = [c.nth(1, i, domain="math") for i in range(len([d for d in c.documents if d.domain == "math"]))]
    assert len({d.doc_id for d in math}) == len(math)  # every math doc once before any repeats
    assert all(d.domain == "math" for d in math)
    assert c.nth(1, 0, domain="math") == c.nth(1, 0, domain="math")


def test_truncate_tokens():
    text = "one two three four five six"
    assert truncate_tokens(text, 10) == text
    assert truncate_tokens(text, 3) == "one two three ..."
    chars = truncate_tokens(text, 9, tokenize=list)  # one token per character
    assert chars.endswith("...") and len(chars.replace(" ...", "")) <= 9


# -- regret and designer reward ------------------------------------------------------------------


def test_episode_reward_and_win_rate():
    assert R.episode_reward(0.7, True) == 0.7
    assert R.episode_reward(3.0, True) == 1.0 and R.episode_reward(-2, True) == -1.0
    assert R.episode_reward(1.0, False) == 0.0 and R.episode_reward(None, True) == 0.0
    assert R.win_rate([1.0, 0.5, 0.0, 1.0]) == 0.5


def test_regret_floored_and_plateau():
    assert R.regret([1, 1], [0, 0]) == 0.0
    assert R.regret([0, 0.5], [1, 1]) == pytest.approx(0.75)
    assert R.plateau(0.5) == 1.0 and R.plateau(0.4) == 1.0 and R.plateau(0.6) == 1.0
    assert R.plateau(0.15) == 0.0 and R.plateau(0.9) == 0.0
    assert R.plateau(0.275) == pytest.approx(0.5) and R.plateau(0.725) == pytest.approx(0.5)
    # the release's plateau_reward: zero points at band -/+ ramp, for any band and ramp
    assert R.plateau(0.2, 0.3, 0.5, 0.2) == pytest.approx(0.5) and R.plateau(0.1, 0.3, 0.5, 0.2) == pytest.approx(0.0, abs=1e-12)
    assert R.plateau(0.65, 0.3, 0.5, 0.2) == pytest.approx(0.25) and R.plateau(0.7, 0.3, 0.5, 0.2) == pytest.approx(0.0, abs=1e-12)
    assert R.designer_reward(0.0, 0.2, variant="solve_rate", cfg=RewardConfig(band_low=0.3, band_high=0.5, plateau_ramp=0.2)) == pytest.approx(0.5)


def test_designer_reward_variants():
    cfg = RewardConfig()
    # blend: 0.4 * clip(regret / 0.15) + 0.6 * plateau
    assert R.designer_reward(0.075, 0.5, cfg=cfg) == pytest.approx(0.4 * 0.5 + 0.6)
    assert R.designer_reward(0.5, 0.9, cfg=cfg) == pytest.approx(0.4)
    assert R.designer_reward(0.5, 0.5, variant="solve_rate") == 1.0
    assert R.designer_reward(0.3, 0.9, variant="regret") == 0.3
    # outcome_variance (the earlier learning_potential): 4 p (1 - p)
    assert R.designer_reward(0.0, 0.5, variant="outcome_variance") == 1.0
    assert R.designer_reward(0.0, 1.0, variant="outcome_variance") == 0.0
    assert R.designer_reward(0.0, 0.25, variant="outcome_variance") == pytest.approx(0.75)
    # learning_potential (the release's): |w - mu_slow|, mu_slow the EMA after folding in w
    mu = R.ema_update(0.2, 0.6, 0.85)  # 0.15 * 0.2 + 0.85 * 0.6 = 0.54
    assert mu == pytest.approx(0.54)
    assert R.designer_reward(0.0, 0.6, variant="learning_potential", baseline=mu) == pytest.approx(0.06)
    assert R.designer_reward(0.0, 0.6, variant="learning_potential") == 0.0  # a skill's first: mu = w
    assert R.ema_update(None, 0.3, 0.85) == 0.3
    assert R.designer_reward(0.9, 0.5, step_timeouts=1) == -0.5
    with pytest.raises(ValueError):
        R.designer_reward(0.1, 0.5, variant="nope")


def test_center_by_skill():
    from spade_engine.trainer.losses import centre_per_skill  # the one per-skill centring (was a test-only copy here)

    out = centre_per_skill([1.0, 0.0, 0.4], ["a", "a", "b"], scale=2.0)
    assert out == [1.0, -1.0, 0.0]


def test_estimate_regret_is_order_free(tmp_path):
    from spade_engine.events import EnvironmentProposed, RolloutCompleted

    prop = EnvironmentProposed(env_id="e", skill="math", difficulty=0.5, code="x", code_sha256="0", policy_version="v0")
    plays = [
        (f"id{h}{i}", RolloutCompleted(env_id="e", play_id="p", hinted=bool(h), seed=i, policy_version="v0",
                                        episode_reward=float(h or i), index=i, step_timeout=False))
        for h in (0, 1) for i in (0, 1)
    ]
    a = estimate_regret(prop, plays, RewardConfig())
    b = estimate_regret(prop, list(reversed(plays)), RewardConfig())
    assert a == b
    assert a.plain_rewards == [0.0, 1.0] and a.hinted_rewards == [1.0, 1.0]
    assert a.regret == 0.5 and a.win_rate_plain == 0.5 and a.rollout_ids == ["id00", "id01", "id10", "id11"]


# -- actions, prompts, extraction, hints --------------------------------------------------------


def test_parse_boxed():
    assert parse_boxed("I think \\boxed{42}") == "42"
    assert parse_boxed("\\boxed{a} then \\boxed{ swap 1 2 }") == "swap 1 2"
    assert parse_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert parse_boxed("no box") is None and parse_boxed("\\boxed{open") is None
    assert to_action("answer: \\boxed{7}") == "\\boxed{7}"
    assert to_action("  plain  ") == "plain"
    assert first_user_message("obs", "use bisection") == "obs\n\nHint: use bisection"
    assert first_user_message("obs", None) == "obs"


def test_designer_prompt_has_contract_skill_document_and_examples():
    ex = MemoryExamples(
        frontier=[{"env_id": "p1", "code": "class GoodEnv: pass", "win_rate_plain": 0.5, "regret": 0.4}],
        negatives=[{"env_id": "n1", "code": "class EasyEnv: pass", "win_rate_plain": 1.0, "regret": 0.0}],
        neighbours=[{"env_id": "z9", "code": "class NearEnv: pass"}],
    )
    msgs = designer_messages(skill="tool_use", difficulty=0.9, document_text="DOC-TEXT-HERE", examples=ex)
    user = msgs[-1]["content"]
    assert msgs[0]["role"] == "system"
    for needle in ("DOC-TEXT-HERE", "\\boxed{<action>}", "solution(self)", "tool_use", "hard", "GoodEnv", "too easy", "z9: NearEnv"):
        assert needle in user, needle
    assert ex.parents == ["p1", "n1"] and ex.avoid == ["z9"]
    bad = "```python\nclass BadEnv:\n    def step(self, a) return\n```"
    rep = repair_messages(msgs, bad, error_kind="syntax", failed_check="parse", detail="line 3: invalid")
    # compact: system + one user turn with the contract, document and task again, the rejected
    # code, and the verdict last
    assert [m["role"] for m in rep] == ["system", "user"]
    fix = rep[-1]["content"]
    assert "DOC-TEXT-HERE" in fix and "tool_use" in fix and "class BadEnv" in fix
    assert fix.index("class BadEnv") < fix.index("VERDICT") and "syntax" in fix and "line 3" in fix[fix.index("VERDICT"):]
    # a prompt of another shape gets the conversation so far plus the verdict
    other = repair_messages([{"role": "user", "content": "make an env"}], "bad completion", error_kind="syntax",
                            failed_check="parse", detail="line 3: invalid")
    assert other[-2] == {"role": "assistant", "content": "bad completion"} and "line 3" in other[-1]["content"]


def test_extract_code():
    assert extract_code("text\n```python\nclass AEnv:\n    pass\n```\nmore") == "class AEnv:\n    pass\n"
    two = "```python\nprint(1)\n```\n```python\nclass BEnv:\n    def step(self, a): pass\n```"
    assert extract_code(two).startswith("class BEnv")
    assert extract_code("```json\n{}\n```") is None
    assert extract_code("class CEnv:\n    def step(self, a):\n        pass").startswith("class CEnv")
    assert extract_code("random garbage ~~ !!") is None
    assert declared_difficulty("# difficulty: 0.42\nx=1") == 0.42 and declared_difficulty("x") is None


def test_novelty_text_focuses_on_docstring_and_env_class():
    code = '"""About primes."""\nimport re\n\ndef helper():\n    return 1\n\n# note\nclass PrimeEnv:\n    X = 1\n'
    text = novelty_text(code)
    assert text.startswith("About primes.") and "class PrimeEnv" in text and "helper" not in text and "# note" not in text
    assert novelty_text("def broken(:") == "def broken(:"


def test_hint_prompt_and_cleaning():
    msgs = hint_messages("class XEnv: pass")
    assert "class XEnv" in msgs[-1]["content"] and "not reveal" in msgs[0]["content"].lower()
    assert clean_hint('```json\n{"hint": "bisect"}\n```') == "bisect"
    assert clean_hint("Hint:   use   the midpoint ") == "use the midpoint"
    assert len(clean_hint("word " * 400)) <= 610


# -- procedural policy ---------------------------------------------------------------------------


def test_procedural_policy_is_a_policy_and_labelled():
    p = ProceduralPolicy()
    assert isinstance(p, Policy)
    d = p.describe()
    assert d["simulation"] is True and "not an LLM" in d["note"] and len(d["families"]) >= 6


def test_procedural_designer_writes_every_family_in_spade_format():
    assert len(FAMILIES) >= 6
    for name, fam in FAMILIES.items():
        for diff in (0.1, 0.9):
            code = render(fam, diff, random.Random(0), title="Doc", doc_text="A doc.")
            assert family_of_code(code) is fam
            assert declared_difficulty(code) == pytest.approx(diff, abs=1e-3)
            assert "def reset(self, seed=None)" in code and "def step(self, action)" in code and "def solution(self)" in code
            compile(code, name, "exec")  # parses (it is run only in the sandbox)


def test_difficulty_knobs_change_the_code():
    fam = FAMILIES["number_search"]
    easy = render(fam, 0.0, random.Random(0))
    hard = render(fam, 1.0, random.Random(0))
    assert "UPPER = 4\n" in easy and "UPPER = 128\n" in hard


def test_adapt_difficulty_moves_toward_band():
    assert adapt_difficulty([]) == 0.5
    assert adapt_difficulty([(0.5, 1.0, 0.0)]) > 0.5  # agent always wins: harder
    assert adapt_difficulty([(0.8, 0.0, 0.0)]) < 0.8  # agent always loses: easier
    assert adapt_difficulty([(0.6, 0.5, 0.4)]) == pytest.approx(0.6)  # in band with regret: stay
    assert 0.0 <= adapt_difficulty([(0.0, 0.0, 0.0)] * 3) <= 1.0


def test_procedural_designer_uses_history_only_when_adaptive():
    ctx = DesignContext(env_id="e", skill="arithmetic", difficulty=0.2, turn_limit=8, skill_history=((0.5, 1.0, 0.0),))
    req = PolicyRequest(role="designer", messages=[{"role": "user", "content": "x"}], context=ctx, seed=1)
    adaptive = declared_difficulty(extract_code(ProceduralPolicy(defect_rate=0).generate([req])[0].text))
    fixed = declared_difficulty(extract_code(ProceduralPolicy(adaptive=False, defect_rate=0).generate([req])[0].text))
    assert adaptive > 0.7 and fixed < 0.3


def test_procedural_agent_solves_from_observations():
    p = ProceduralPolicy(skill=1.0)
    assert p.solve_probability(FAMILIES["arithmetic"], 0.0, False) == 0.98
    assert p.solve_probability(FAMILIES["arithmetic"], 1.0, True) > p.solve_probability(FAMILIES["arithmetic"], 1.0, False)
    obs = "Evaluate the expression 2 + 3 * 4 (usual precedence: * before + and -). Reply with \\boxed{<integer>}."
    req = PolicyRequest(role="agent", messages=[], context=PlayContext(skill="arithmetic", difficulty=0.0, observation=obs,
                                                                     env_id="e", play_seed=1, turn=0), seed=3)
    assert parse_boxed(p.generate([req])[0].text) == "14"
    assert next_term([1, 1, 2, 3, 5]) == 8 and next_term([2, 6, 18]) == 54 and next_term([1, 2, 4, 7]) == 11


def test_seeds_and_skills_are_deterministic():
    assert derive_seed(1, "e", 2) == derive_seed(1, "e", 2) != derive_seed(1, "e", 3)
    skills = list(SKILLS)
    block = [choose_skill(5, i, skills) for i in range(len(skills))]
    assert sorted(block) == sorted(skills)  # each block covers every skill once
    specs = play_specs(0, "e", 3)
    assert [(s.hinted, s.index) for s in specs] == [(False, 0), (False, 1), (False, 2), (True, 0), (True, 1), (True, 2)]
    assert specs[0].seed == specs[3].seed  # paired plain/hinted seeds


# -- run state -----------------------------------------------------------------------------------


def test_run_state_fold_is_idempotent(tmp_path):
    log = SqliteEventLog(tmp_path / "events.sqlite", "run-x")
    evs = run_events("run-x", n_envs=3, k=2)
    log.append(evs)
    st = RunState.from_log(log)
    assert len(st.roots()) == 3 and st.finished
    assert all(len(s.plays) == 4 and s.regret is not None for s in st.roots())
    s1 = st.stats()
    assert s1["plays"] == 12 and s1["accepted"] == 3 and s1["estimated"] == 3
    for e in evs:  # re-applying changes nothing
        st.add_envelope(e)
    assert st.stats() == s1
    assert st.skill_history("math") == [(0.5, 0.5, 0.5)] * 3
