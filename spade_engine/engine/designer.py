"""The Environment Designer role: prompts, code extraction, lineage, and repair prompts.

The prompt follows the public SPADE release's corpus-grounded, interactive multi-turn contract:
a reference document, the interface the environment must implement (``reset``/``step``/
``solution``, actions as ``\\boxed{...}``, rewards in [0, 1]), the target skill and difficulty,
and examples from the memory: frontier positives (high regret, win rate in the band), a negative
(too easy or too hard) and near neighbours to avoid. The memory examples shown become the
proposal's lineage (``parents``, ``avoid``).

A failed validation can be sent back with :func:`repair_messages` (the conversation so far plus
the failed check), a bounded number of times; each repair is its own environment id and chain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..archive.examples import MemoryExamples

__all__ = [
    "SKILLS",
    "Skill",
    "difficulty_label",
    "designer_messages",
    "repair_messages",
    "extract_code",
    "declared_difficulty",
    "INTERACTIVE_SPEC",
]


@dataclass(frozen=True)
class Skill:
    """A target skill the designer is asked to exercise, and the corpus domain that grounds it."""

    name: str
    description: str
    domain: str


SKILLS: dict[str, Skill] = {
    s.name: s
    for s in (
        Skill("arithmetic", "mathematical reasoning: evaluate multi-step arithmetic exactly", "math"),
        Skill("sequence", "pattern induction: infer the rule of a sequence and extend it", "logic"),
        Skill("number_search", "search under feedback: locate a hidden value with few queries", "logic"),
        Skill("code_trace", "program tracing: predict what a short program computes", "code"),
        Skill("unit_convert", "scientific quantities: convert and compute with physical units", "science"),
        Skill("tool_use", "tool use: call tools in the right order and follow references", "tool_use"),
        Skill("sort_swaps", "planning: reach a goal state through a sequence of moves", "code"),
        Skill("gcd_steps", "number theory: run Euclid's algorithm, gcd and lcm step by step", "math"),
        Skill("linear_equation", "algebra: solve linear equations and small systems exactly", "math"),
        Skill("truth_table", "propositional logic: evaluate formulas and count satisfying assignments", "logic"),
        Skill("ordering", "deduction: order items consistently with precedence or comparison facts", "logic"),
        Skill("graph_path", "graph search: reach a goal through a map within a cost budget", "logic"),
        Skill("stack_machine", "data structures: simulate stacks, queues and postfix evaluation", "code"),
        Skill("string_ops", "string manipulation: apply and invert character-level transformations", "code"),
        Skill("formula", "scientific laws: compute and rearrange physical formulas with units", "science"),
        Skill("inventory", "tool use: query and update an inventory or price list through tools", "tool_use"),
    )
}


def difficulty_label(d: float) -> str:
    """``easy`` / ``medium`` / ``hard`` for a difficulty in [0, 1]."""
    return "easy" if d < 1 / 3 else ("medium" if d < 2 / 3 else "hard")


INTERACTIVE_SPEC = r"""Write a genuine multi-turn INTERACTIVE environment, not a one-shot quiz where possible.

How the agent acts: every turn it submits ONE action wrapped as \boxed{<action>}. step() receives
that string; extract the command with re.search(r'\\boxed\{(.+?)\}', action) and treat it as a
command that changes the environment's state, then return a NEW observation.

Interface contract:
```python
import random, re

class SomethingEnv:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.reset()
    def reset(self, seed=None):
        # hidden state, randomised by seed; return (observation, {}) where the observation says
        # which actions exist and to reply with \boxed{<action>}
        ...
    def step(self, action):
        # parse the command, update state, return (observation, reward, terminated, truncated, {})
        # reward in [0, 1]; 1.0 and terminated=True only when the goal is reached
        ...
    def solution(self):
        # a reference list of actions that solves the current episode (after reset)
        ...
```

Rules: the class name ends in Env; only the Python standard library; every step() path returns
the 5-tuple (str, float, bool, bool, dict); never crash on a garbage action (return a helpful
observation and reward 0.0); the same seed gives the same episode; never reveal the answer in
the observation; double braces inside f-strings to print a literal \boxed{{...}}."""

DESIGNER_SYSTEM_PROMPT = (
    "You are the Environment Designer of a self-play curriculum. You write executable Python "
    "environments that teach a reasoning agent. You are rewarded when the agent solves your "
    "environment about half of the time and a privileged hint helps it a lot."
)


def _clip_code(code: str, limit: int = 1800) -> str:
    return code if len(code) <= limit else code[:limit] + "\n# ... (truncated)"


def _class_names(code: str) -> str:
    names = re.findall(r"^class\s+(\w+)", code, flags=re.M)
    return ", ".join(names) or "(no class)"


def _examples_text(ex: MemoryExamples) -> str:
    parts = []
    for e in ex.frontier:
        parts.append(
            f"POSITIVE EXAMPLE (win rate {float(e.get('win_rate_plain', 0)):.2f}, regret "
            f"{float(e.get('regret', 0)):.2f}: at the agent's frontier; write something different "
            f"that is as well calibrated):\n```python\n{_clip_code(str(e.get('code', '')))}\n```"
        )
    for e in ex.negatives:
        w = float(e.get("win_rate_plain", 0))
        why = "too easy" if w > 0.6 else "too hard"
        parts.append(
            f"NEGATIVE EXAMPLE (win rate {w:.2f}: {why}; do not repeat its mistake):\n"
            f"```python\n{_clip_code(str(e.get('code', '')), 900)}\n```"
        )
    if ex.neighbours:
        names = "; ".join(f"{e.get('env_id')}: {_class_names(str(e.get('code', '')))}" for e in ex.neighbours)
        parts.append(f"ALREADY IN THE ARCHIVE (near neighbours, do not write near-copies): {names}")
    return "\n\n".join(parts)


def designer_messages(
    *,
    skill: str,
    difficulty: float,
    document_text: str,
    examples: MemoryExamples | None = None,
) -> list[dict[str, str]]:
    """The chat messages asking the designer for one environment."""
    info = SKILLS.get(skill)
    description = info.description if info else skill
    label = difficulty_label(difficulty)
    steps = 2 if label == "easy" else (3 if label == "medium" else 4)
    user = (
        "You are given a reference document. Create an interactive Python environment grounded in a "
        "concept or technique from it. Never mention the document in the environment's text.\n\n"
        f"<REFERENCE_DOCUMENT>\n{document_text}\n</REFERENCE_DOCUMENT>\n\n"
        f"{INTERACTIVE_SPEC}\n\n"
    )
    ex_text = _examples_text(examples or MemoryExamples())
    if ex_text:
        user += ex_text + "\n\n"
    user += (
        f"Target skill: {skill} ({description}). Difficulty: {label} ({difficulty:.2f} on a 0-1 scale): "
        f"the goal should need {steps}+ interaction steps.\n\n"
        "Reply with the complete Python code in one ```python block."
    )
    return [{"role": "system", "content": DESIGNER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def repair_messages(
    messages: Sequence[Mapping[str, str]],
    completion: str,
    *,
    error_kind: str | None,
    failed_check: str | None,
    detail: str,
) -> list[dict[str, str]]:
    """The conversation so far plus the validator's verdict, asking for a corrected environment."""
    feedback = (
        f"The environment failed validation (error: {error_kind or 'unknown'}, check: "
        f"{failed_check or 'unknown'}): {detail.strip()[:800]}\n\n"
        "Fix the problem and reply with the complete corrected code in one ```python block."
    )
    return [
        *[dict(m) for m in messages],
        {"role": "assistant", "content": completion},
        {"role": "user", "content": feedback},
    ]


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)


def extract_code(completion: str) -> str | None:
    """The environment code in a completion, or ``None`` when there is none.

    Preference: the last fenced block tagged python (or untagged) that defines a class, then the
    last such block, then the whole completion if it looks like a module defining a class with a
    ``step`` method.
    """
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(completion)]
    py = [b for lang, b in blocks if lang in ("", "python", "py", "python3")]
    with_class = [b for b in py if re.search(r"^\s*class\s+\w+", b, re.M)]
    for cand in (with_class, py):
        if cand:
            code = cand[-1].strip("\n")
            return code + "\n" if code.strip() else None
    if re.search(r"^class\s+\w+", completion, re.M) and "def step" in completion:
        return completion.strip("\n") + "\n"
    return None


def declared_difficulty(code: str) -> float | None:
    """The difficulty an environment declares in a ``# difficulty: 0.42`` comment, if any."""
    m = re.search(r"^#\s*difficulty:\s*([0-9]*\.?[0-9]+)", code, re.M)
    if not m:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        return None
    return v if 0.0 <= v <= 1.0 else None


def novelty_text(code: str, limit: int = 1500) -> str:
    """The part of an environment's source its novelty embedding is computed from.

    The module docstring (what the environment is about) and the environment classes (names
    ending in ``Env``, else every class), without comments, so the embedding model's short
    context window sees the environment's description and logic rather than shared helper
    boilerplate; falls back to the whole source when it does not parse.
    """
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code[:limit]
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    envs = [n for n in classes if n.name.endswith("Env")] or classes
    parts = [ast.get_source_segment(code, n) or "" for n in envs]
    text = "\n".join([ast.get_docstring(tree) or "", *(p for p in parts if p)]).strip() or code
    text = "\n".join(line for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    return text[:limit]
