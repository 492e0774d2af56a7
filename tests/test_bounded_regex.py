"""Issue 31, class 7: model text can stall the engine's own process. An observation made a pattern
of the procedural agent backtrack for half an hour. Every pattern the procedural agent runs over
environment or model text is time-bounded (``policy/procedural/bounded_re.py``). The engine's
other parsers of model text (the agent's reply, the hint, the designer's completion and code, the
answer scorer, held-out evaluation) use linear patterns or linear code of their own: each agrees
with the pattern it replaced and answers a hostile text at once. The patterns left on the
standard library say in a comment why they are linear."""

from __future__ import annotations

import random
import re as stdlib_re
import time

import pytest

from spade_engine.engine.designer import _FENCE, _OPEN_FENCE, extract_code
from spade_engine.engine.hints import clean_hint
from spade_engine.engine.rollouts import parse_boxed
from spade_engine.envsources import scorer
from spade_engine.evaluation.scoring import extract_answer as eval_extract_answer
from spade_engine.policy.procedural import bounded_re
from spade_engine.policy.procedural.domain_science import _solve_formula
from spade_engine.sandbox import scaffold

#: the formula family's "known values" pattern and an observation that makes it backtrack
#: exponentially: 18 repetitions took 50 s with the standard library, 22 about 15 minutes
PATTERN = r"(?:Known:|with) ((?:[A-Za-z]\w* = -?[\d.]+ [\w/]+(?:, )?)+)[.:] (?:Find|compute) ([A-Za-z]\w*)"


def hostile(n: int) -> str:
    return "Solve `v = d / t`. Known: " + "ab = 1.5 m/s" * n


def test_the_pattern_is_exponential_with_the_standard_library():
    times = []
    for n in (8, 10, 12):
        t0 = time.perf_counter()
        stdlib_re.search(PATTERN, hostile(n))
        times.append(time.perf_counter() - t0)
    assert times[2] > 4 * times[0]  # each two repetitions multiply the time (the reason for this module)


def test_the_procedural_agent_answers_a_hostile_observation_within_its_bound():
    from spade_engine.policy.procedural import domain_code, domain_logic, domain_math, domain_science, domain_tools, families, kit, policy

    for module in (domain_code, domain_logic, domain_math, domain_science, domain_tools, families, kit, policy):
        assert module.re is bounded_re, module.__name__  # (checked first: with the standard library the call below would hang)
    t0 = time.perf_counter()
    assert _solve_formula(hostile(400)) is None  # it does not understand it, and says so at once
    assert time.perf_counter() - t0 < 10 * bounded_re.TIMEOUT_S + 1.0


def test_bounded_calls_answer_like_re_and_give_no_match_on_timeout():
    text = "a=1, b=22 and c=333"
    assert [m.group(0) for m in bounded_re.finditer(r"\d+", text)] == [m.group(0) for m in stdlib_re.finditer(r"\d+", text)]
    assert bounded_re.findall(r"(\w)=(\d+)", text) == stdlib_re.findall(r"(\w)=(\d+)", text)
    assert bounded_re.sub(r"(\d)", r"<\1>", text, count=2) == stdlib_re.sub(r"(\d)", r"<\1>", text, count=2)
    assert bounded_re.fullmatch(r"a=\d", "a=1").group(0) == "a=1"
    slow = r"(a+)+$"
    evil = "a" * 40 + "b"
    t0 = time.perf_counter()
    assert bounded_re.search(slow, evil) is None and bounded_re.findall(slow, evil) == []
    assert bounded_re.split(slow, evil) in ([evil], stdlib_re.split(r"x", evil))
    assert time.perf_counter() - t0 < 6 * bounded_re.TIMEOUT_S + 1.0


def test_extracting_code_from_a_hostile_completion_is_linear():
    """The designer's completion is model text parsed in the engine: many unclosed <think> tags
    and blank lines made two of its patterns quadratic (seconds per completion, growing)."""
    from spade_engine.engine.designer import extract_code

    assert extract_code("<think>plan</think>\n```python\nclass AEnv:\n    def step(self, a): pass\n```") .startswith("class AEnv")
    hostile = "</think>" + "<think>" * 40_000 + "```python\n" + "\n" * 200_000 + "x = 1\n```"
    t0 = time.perf_counter()
    assert extract_code(hostile) is not None  # the fenced block, found at once
    assert time.perf_counter() - t0 < 1.0


# ----------------------------------------------------------------------------------------------
# the engine's other parsers of model text: linear rewrites of patterns that were quadratic

#: what each parser was before (the reference its linear version must agree with)
OLD_BOXED = stdlib_re.compile(r"\\boxed\s*\{")
OLD_TAG = stdlib_re.compile(r"<answer>\s?(.*?)\s?</answer>", stdlib_re.S)
OLD_HINT_FENCE = r"```(?:json)?\s*\n?(.*?)\n?```"
OLD_FENCE = stdlib_re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", stdlib_re.S)
OLD_OPEN_FENCE = stdlib_re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*)\Z", stdlib_re.S)


def old_parse_boxed(text: str) -> str | None:
    last = None
    for m in OLD_BOXED.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            last = text[m.end() : i - 1].strip()
    return last


def old_extract_answer(text: str) -> str | None:
    boxed = old_parse_boxed(text)
    if boxed is not None:
        return boxed
    tags = OLD_TAG.findall(text)
    return tags[-1].strip() if tags else None


def old_first_fenced(text: str) -> str | None:
    m = stdlib_re.search(OLD_HINT_FENCE, text, stdlib_re.S)
    return m.group(1).strip() if m else None


def old_strip(code: str) -> str:
    block = stdlib_re.compile(stdlib_re.escape(scaffold.BEGIN) + r".*?" + stdlib_re.escape(scaffold.END) + r"\n{0,3}", stdlib_re.S)
    return block.sub("", code, count=1)


def _texts(parts: list[str], n: int = 20_000, seed: int = 0):
    rng = random.Random(seed)
    for _ in range(n):
        yield "".join(rng.choice(parts) for _ in range(rng.randint(0, 10)))


def test_the_linear_parsers_agree_with_the_patterns_they_replace():
    from spade_engine.engine.hints import _first_fenced

    for t in _texts(["\\boxed{", "\\boxed {", "{", "}", "x", " ", "<answer>", "</answer>", "\n", "\\boxed"]):
        assert parse_boxed(t) == old_parse_boxed(t), repr(t)
        assert scorer.extract_answer(t) == old_extract_answer(t) == eval_extract_answer(t), repr(t)
    for t in _texts(["```", "json", " ", "\n", "x", "`", '{"hint": "h"}']):
        assert _first_fenced(t) == old_first_fenced(t), repr(t)
    for t in _texts(["```", " ", "\t", "\n", "python", "py", "python3", "x", "3", "-"]):
        assert _FENCE.findall(t) == OLD_FENCE.findall(t), repr(t)
        a, b = _OPEN_FENCE.search(t), OLD_OPEN_FENCE.search(t)
        assert (a and (a.span(), a.group(1))) == (b and (b.span(), b.group(1))), repr(t)
    for t in _texts([scaffold.BEGIN, scaffold.END, "\n", "\n\n\n\n", "x"]):
        assert scaffold.strip(t) == old_strip(t), repr(t)
    ns: dict = {}
    exec("import re, unicodedata\nfrom fractions import Fraction\n" + scorer.EMBEDDED_SOURCE, ns)  # what a generated environment runs
    assert ns["extract_answer"]("<answer> 7 </answer> then \\boxed{ {1, 2} }") == "{1, 2}"


@pytest.mark.parametrize(
    ("name", "parse", "hostile"),
    [
        # each took about 10 s to 80 s with the pattern or loop it replaces (measured on this machine)
        ("agent reply: unclosed boxes", parse_boxed, "\\boxed{" * 20_000),
        ("answer: unclosed tags", scorer.extract_answer, "<answer>" * 20_000),
        ("evaluation: unclosed tags", eval_extract_answer, "x <answer>" * 20_000),
        ("hint: a fence and blanks", clean_hint, "```" + "\n" * 40_000 + "x"),
        ("designer code: the base's first line, repeated", scaffold.strip, scaffold.BEGIN * 10_000),
        ("designer completion: a fence and blanks", extract_code, ("```" + " \t" * 40_000) * 3),
    ],
)
def test_model_text_cannot_stall_the_engines_parsers(name, parse, hostile):
    t0 = time.perf_counter()
    parse(hostile)
    assert time.perf_counter() - t0 < 1.0, name
