"""The designer prompt for a puzzle (``loop.designer_format = "puzzle"``): the smallest game.

A puzzle is a ``TextGame`` subclass (``sandbox/textgame.py``) with one method, ``setup(rng)``:
it draws the puzzle's values, computes the answer with code into ``self.answer`` and returns the
question. The base class scores each reply against ``self.answer`` (``tries`` wrong answers end
the episode) and answers it in ``solution()``, so a model writes about fifteen lines, no game
logic that its own solution could contradict (the measured failure of the 0.5B on the scaffold:
plan() and act() disagreeing). The answer is right by construction when the code computes it;
whether the question states what the code computes is the designer's part, as in reasoning-gym's
generators; the validator rejects a puzzle whose repeated question gets two answers. The engine
keeps only the format's part of a completion (:func:`~spade_engine.sandbox.scaffold.puzzle_only`:
the base's methods a small model writes anyway are dropped). The prompt keeps the other
formats' order, task and repair flow; its examples are the bundled puzzle seeds, shown without
the base class.
"""

from __future__ import annotations

import re

from ..sandbox.scaffold import BASE_NAME, strip
from .designer import PUZZLE_OPENING, SHARED_ADVICE, PromptFormat

__all__ = [
    "PUZZLE_MARK", "puzzle_contract_text", "puzzle_designer_messages", "puzzle_reply_prefix", "PUZZLE_STOPS",
    "PUZZLE_ADVICE", "PUZZLE_SHORT_LINES",
]

#: how a prompt of this module is recognised (the repair flow and the advice depend on it)
PUZZLE_MARK = f"with one setup() method on the engine's {BASE_NAME} class"

_CONTRACT = PUZZLE_OPENING + ", " + PUZZLE_MARK + r""".

HOW THE AGENT PLAYS
- The agent reads your question and replies with its answer wrapped as \boxed{<answer>}, for example \boxed{42}.
- The engine compares the answer with self.answer (spaces and letter case ignored, numbers compared as numbers):
  reward 1.0 when equal, else 0.0. With tries = N (default 1) the agent may answer N times.

THE ENGINE PROVIDES THE REST: the class TextGame is defined for you, with reset(), step() and solution(); it
shows your question, reads the agent's \boxed{...} answer and compares it with self.answer. Do not write those
methods and do not import TextGame: your class only subclasses it.

YOU WRITE one class whose name ends in Env, class NameEnv(TextGame):, with ONE method, setup() (the engine starts
it for you; lists of names or words are local variables inside it; a helper method it calls must follow it):
- def setup(self, rng) -> str:
  1. draw the puzzle's values with rng (rng.randint, rng.choice, rng.sample, rng.shuffle);
  2. COMPUTE the correct answer from them with Python code and store it: self.answer = ... (an int or a short word);
  3. return the question text: the values, what to find, and the answer format. Never the answer itself.

WHAT MAKES A GOOD PUZZLE
- It needs several reasoning steps (combine, trace, order, convert), not one lookup; no guess can win.
- The question states exactly what the code computes, with every value the agent needs.
- The answer is an integer or one short word; keep numbers small.

DO NOT (the most common reasons puzzles are rejected)
1. Do not write __init__, reset, step, act, plan or solution: TextGame has them.
2. The code starts with the lines import random and import re (and import math when needed), no from-import lines.
3. Do not copy an example: write a new class name, a new question and a new theme.
4. Use only names setup() defines: every value is a local variable or self.answer. No print(), input(), files,
   numpy, or modules outside the standard library.
5. self.answer is computed by the code from the drawn values, never typed in by hand; no yes/no answers.
6. Inside an f-string, braces are code: write the values with {x}, and never write \boxed{...} in an f-string.

SELF-CHECK before you answer
- Run setup() in your head: is self.answer set, and does the question give every value needed to compute it?
- Could someone who reads only the question compute self.answer? If not, the puzzle is rejected."""


def puzzle_contract_text(turn_budget: int) -> str:
    """The puzzle contract, rules, do-not list and self-check (a puzzle has no turn budget of its
    own to state: it ends after ``tries`` answers; ``turn_budget`` is taken for the same call shape)."""
    del turn_budget
    return _CONTRACT


#: the chat messages asking the designer for one puzzle (the standalone prompt's parts and order;
#: examples shown without the base; the goal needs reasoning steps, not actions; no game ideas:
#: the skills' ideas are interactive, and the 0.5B given them wrote a step() loop instead)
puzzle_designer_messages = PromptFormat(puzzle_contract_text, display=strip, goal="reasoning steps", ideas=False)


#: the first line of setup()'s body in the reply the engine starts: the steps as a comment
SETUP_PLAN = "        # draw the values with rng; set self.answer = the value computed from them; return the question that shows them\n"


def puzzle_reply_prefix(skill: str) -> str:
    """How the engine starts the designer's reply to a puzzle prompt (the model continues it):
    the code block, the imports, a class named after the skill and the line ``def setup(self,
    rng):``, so the model's first tokens are setup()'s body. Measured with the 0.5B without it: its
    puzzles opened with ``from textgame import TextGame``, a class named ``Env``, or a ``step()``
    written before (or instead of) setup(), and most never set ``self.answer``. It ends with
    :data:`SETUP_PLAN`, setup()'s three steps as a comment (with the 0.5B: 2 of 8 first tries
    accepted with it, 0 of 16 without; 3 of 8 without had set no ``self.answer``)."""
    name = "".join(w[:1].upper() + w[1:] for w in re.split(r"[^A-Za-z0-9]+", skill) if w) or "Puzzle"
    if not name[0].isalpha():
        name = "P" + name
    return f"```python\nimport random\nimport re\nimport math\n\n\nclass {name}PuzzleEnv(TextGame):\n    def setup(self, rng):\n{SETUP_PLAN}"


#: where a puzzle reply ends (added to the designer's stop strings): the code block's end, a method
#: the base provides (the 0.5B wrote step() loops after setup() until its token limit; helper
#: methods stay: stopping at every method cut the helpers setup() calls) or a next top-level class
PUZZLE_STOPS = (
    "\n```", *(f"\n    def {name}(" for name in ("step", "reset", "solution", "act", "plan", "__init__")),
    "\nclass ", "\nif __name__",
)


#: (pattern in the failed check's detail, advice) for a puzzle
PUZZLE_ADVICE: tuple[tuple[str, str], ...] = (
    *SHARED_ADVICE,
    (r"object has no attribute 'answer'|must set self\.answer",
     "setup() must set self.answer = <the correct answer, computed by the code> before it returns the question."),
    (r"AttributeError: '(?!builtin_function_or_method)\w+' object has no attribute '(?![A-Z][A-Z0-9_]*')",
     "Use only names your class defines: local variables of setup(), attributes set in setup(), class constants."),
    (r"not success|ended with reward|gave no actions",
     "self.answer must be a plain int or short word without braces, computed by the code in setup()."),
    (r"same question has two answers|does not follow from the question",
     "The question must decide the answer: compute self.answer from the values the question shows, never draw it "
     "separately with rng."),
    (r"asks the same question",
     "Draw the puzzle's numbers or words with rng in setup(), so every episode asks a new question."),
    (r"shows its own answer",
     "Never put self.answer (or the number it is) in the question: give the values, and let the agent compute it."),
    (r"RecursionError",
     "setup() must not call reset(), step() or solution(), and must not call itself."),
    (r"has no reset\(\) or step\(\)|has no reset\(\)|has no step\(\)|no environment class",
     "Write one class NameEnv(TextGame): with one method setup(self, rng) (TextGame is provided: do not define it)."),
    (r"different observations",
     "Draw every value in setup() with the rng it is given (rng.randint, rng.choice), never with the global random module."),
)

#: a truncated puzzle is asked for in under this many lines
PUZZLE_SHORT_LINES = 30
