"""Skill families of the procedural policy (a SIMULATION, not an LLM): environment code in the
SPADE format with difficulty knobs, and the matching observation solvers its simulated agent uses
to find the correct next action.

Each family (defined by domain in ``domain_math``, ``domain_logic``, ``domain_code``,
``domain_science`` and ``domain_tools``) writes a complete, self-contained environment
module: a class whose name ends in ``Env``, ``reset(seed)``, ``step(action)`` with
``\\boxed{...}`` actions, ``solution()`` returning the reference actions for the current episode,
rewards in [0, 1] (1.0 only for a solved episode), deterministic per seed, standard library only.

Two environments of one family differ in substance, not only in numbers: the builder picks a rule
variant allowed at the difficulty, a reward scheme (all or nothing, partial credit, shaped steps),
wording and state layout, and grounds the text on the corpus document (a document word names the
class, one of its sentences opens the docstring and another the first observation), all from the
seeded ``random.Random`` it is given.

The solvers parse observations only (they never execute environment code): they exist so the
simulated agent can act correctly with a probability set by its skill, see
:mod:`spade_engine.policy.procedural`.
"""

from __future__ import annotations

import random
from . import bounded_re as re

from .domain_code import CODE_TRACE, SORT_SWAPS, STACK_MACHINE, STRING_OPS
from .kit import Family, Spec, fill
from .domain_logic import GRAPH_PATH, NUMBER_SEARCH, ORDERING, SEQUENCE, TRUTH_TABLE, next_term
from .domain_math import ARITHMETIC, GCD_STEPS, LINEAR_EQUATION
from .scenarios import SCENARIOS
from .domain_science import FORMULA, UNIT_CONVERT, UNIT_TABLE
from .text import class_name, content_words, safe_text, sentences, theme_line
from .domain_tools import INVENTORY, TOOL_USE

__all__ = ["Family", "FAMILIES", "UNIT_TABLE", "render", "family_of_code", "next_term"]

HEADER = r'''# Environment written by the spade-engine PROCEDURAL designer (a simulation, not an LLM).
# family: __FAMILY__
# difficulty: __DIFFICULTY__
# variant: __VARIANT__
"""__TITLE__

__SCENARIO__ __DESCRIPTION__
Grounded on: __DOC__
"""
import random
import re


def _cmd(action):
    """The command inside (possibly nested) \\boxed{...}, else the raw text."""
    text = str(action)
    for _ in range(4):
        m = re.search(r"\\boxed\s*\{(.*)\}", text, re.S)
        if not m:
            break
        text = m.group(1)
    return text.strip()


def _boxed(value):
    return "\\boxed{" + str(value) + "}"


def _int(text):
    try:
        return int(str(text).replace(",", "").strip())
    except ValueError:
        return None


def _num(text):
    try:
        value = float(str(text).replace(",", "").strip())
    except ValueError:
        return None
    return value if value == value and abs(value) < 1e12 else None


def _word(text):
    word = str(text).strip().strip("'\"").lower()
    return word if word and len(word) <= 200 else None


class __CLASS__:
    """__CLASSDOC__"""

    THEME = __THEME__
'''

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        ARITHMETIC, GCD_STEPS, LINEAR_EQUATION,
        SEQUENCE, NUMBER_SEARCH, TRUTH_TABLE, ORDERING, GRAPH_PATH,
        CODE_TRACE, SORT_SWAPS, STACK_MACHINE, STRING_OPS,
        UNIT_CONVERT, FORMULA,
        TOOL_USE, INVENTORY,
    )
}


def render(
    family: Family, difficulty: float, rng: random.Random, *, title: str = "", doc_text: str = "", turn_limit: int = 8
) -> str:
    """Complete environment source for ``family`` at ``difficulty`` (knobs set from it), grounded
    on the document ``title``/``doc_text``; episodes end by themselves within ``turn_limit``
    turns and solutions need at most ``turn_limit`` actions."""
    words = content_words(title, doc_text)
    sents = sentences(doc_text)
    spec = Spec(difficulty=difficulty, rng=rng, words=words, sentences=sents, title=title, turn_limit=max(1, turn_limit))
    built = family.build(spec)
    name = class_name(words, family.nouns, rng)
    scenario = rng.choice(SCENARIOS.get(family.name) or (family.title + ".",))
    grounding = safe_text(rng.choice(sents), 220) if sents else (safe_text(title, 80) or "(no document)")
    head = fill(
        HEADER,
        FAMILY=family.name,
        DIFFICULTY=f"{difficulty:.3f}",
        VARIANT=built.variant,
        TITLE=(safe_text(title, 80) + ": " if title else "") + family.title,
        SCENARIO=safe_text(scenario, 160),
        DESCRIPTION=safe_text(built.description, 400),
        DOC=grounding,
        CLASS=name,
        CLASSDOC=safe_text(built.doc, 120),
        THEME=repr(theme_line(title or family.title, scenario, rng)),
    )
    return head + built.body


def family_of_code(code: str) -> Family | None:
    """The family that wrote ``code`` (from its header comment or class name), if any."""
    m = re.search(r"^# family: (\w+)", code, re.M)
    if m and m.group(1) in FAMILIES:
        return FAMILIES[m.group(1)]
    for fam in FAMILIES.values():
        if any(re.search(rf"^class \w*{c}\b", code, re.M) for c in fam.class_names):
            return fam
    return None
