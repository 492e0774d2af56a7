"""The designer prompt and repair message as they were before issue 17 (verbatim), the baseline
arm of ``bench/designer.py``: a skeleton with ``...`` bodies, no complete example, no turn
budget, no list of what not to do, and a repair message without advice."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from spade_engine.archive.examples import MemoryExamples
from spade_engine.engine.designer import difficulty_label
from spade_engine.engine.skills import SKILLS

__all__ = ["baseline_designer_messages", "baseline_repair_messages", "BASELINE_SETTINGS"]

#: the generation settings every role used before issue 17
BASELINE_SETTINGS = {"max_new_tokens": 512, "temperature": 1.0, "top_p": 1.0}

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


def baseline_designer_messages(
    *,
    skill: str,
    difficulty: float,
    document_text: str,
    examples: MemoryExamples | None = None,
    **_ignored: Any,
) -> list[dict[str, str]]:
    """The chat messages asking the designer for one environment (the pre-issue-17 prompt)."""
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


def baseline_repair_messages(
    messages: Sequence[Mapping[str, str]],
    completion: str,
    *,
    error_kind: str | None,
    failed_check: str | None,
    detail: str,
    **_ignored: Any,
) -> list[dict[str, str]]:
    """The conversation so far plus the validator's verdict (the pre-issue-17 repair message)."""
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
