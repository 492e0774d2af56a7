"""Issue 31, class 7: model text can stall the engine's own process. An observation made a pattern
of the procedural agent backtrack for half an hour. Every pattern the procedural agent runs over
environment or model text is time-bounded (``policy/procedural/bounded_re.py``)."""

from __future__ import annotations

import re as stdlib_re
import time

from spade_engine.policy.procedural import bounded_re
from spade_engine.policy.procedural.domain_science import _solve_formula

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
