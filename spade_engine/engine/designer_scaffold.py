"""The designer prompt for a scaffolded environment (``loop.designer_format = "scaffold"``).

The designer writes a subclass of the engine's ``TextGame`` (``sandbox/textgame.py``): only the
game (``setup``, ``act``, ``plan``), not the reset/step/solution contract, which the base class
provides and :func:`~spade_engine.sandbox.scaffold.inline` puts into the recorded code. The prompt
keeps the standalone prompt's order (contract and rules, examples, document, task: the shared
part first for a prefix cache), its task text and its repair flow; its examples are the seeds
written as TextGame games, shown without the base class; the advice for a failed check names
the game's methods instead of reset() and step().
"""

from __future__ import annotations

from ..sandbox.scaffold import BASE_NAME, strip
from .designer import CONTRACT_OPENING, SHARED_ADVICE, PromptFormat

__all__ = ["SCAFFOLD_MARK", "scaffold_contract_text", "scaffold_designer_messages", "SCAFFOLD_ADVICE", "SCAFFOLD_SHORT_LINES"]

#: how a prompt of this module is recognised (the repair flow and the advice depend on it)
SCAFFOLD_MARK = f"as a subclass of the engine's {BASE_NAME} class"

_CONTRACT = CONTRACT_OPENING + ", " + SCAFFOLD_MARK + r""".

HOW THE AGENT PLAYS
- Every turn the agent replies with ONE command wrapped as \boxed{<command>}, for example \boxed{read 2}
  or \boxed{move north}. The command changes the game's hidden state and the agent sees what happened.

THE ENGINE ALREADY PROVIDES (TextGame is defined for you: do not write it and do not import it)
class TextGame:
    max_turns = 20
    def reset(self, seed=None): ...  # sets self.turn_count = 0 and self.rng = random.Random(seed), then calls self.setup(self.rng)
    def step(self, action): ...      # counts the turn, reads the command inside \boxed{...}, calls self.act(command), ends the episode after max_turns
    def solution(self): ...          # wraps each command of self.plan() as \boxed{command}
TURN BUDGET: episodes are capped at __BUDGET__ turns (max_turns becomes min(yours, __BUDGET__)); plan() must win in
fewer turns than that.

YOU WRITE one class whose name ends in Env, class NameEnv(TextGame):, with a one-line docstring, an optional
max_turns = N and constants as class attributes, and exactly these three methods:
- def setup(self, rng) -> str: draw the HIDDEN state with rng (rng.randint, rng.choice, rng.sample, rng.shuffle), store
  it on self, and return the first observation: the goal, the rules and the commands. Never the hidden values.
- def act(self, command: str) -> tuple[str, float, bool]: returns (text, reward, done); command is the text
  inside \boxed{} with its spaces trimmed, like "read 2"; split it with command.split(). Change the state and return what happened:
    reward 1.0 with done True when the goal is reached;
    reward 0.0 with done True for a final wrong answer;
    a small reward (0.01 to 0.2) with done False for real progress (new information, a correct sub-result);
    an unknown command returns a helpful text, 0.0, False.
- def plan(self) -> list[str]: the commands, without \boxed, that win the game just set up, computed from the hidden
  state, for example ["read 1", "read 2", "answer 42"].

WHAT MAKES A GOOD GAME
- Hidden state that the agent uncovers by acting; several commands are needed; no single lucky command wins.
- Texts state the result of the command and the current state; keep numbers small.

DO NOT (the most common reasons games are rejected)
1. Do not write __init__, reset, step or solution: TextGame has them. Set every attribute in setup().
2. The code starts with the lines import random and import re (and import math when needed), no from-import lines.
3. Every path of act() returns a (text, reward, done) tuple; plan() returns a LIST of command strings.
4. Do not copy an example: write a new class name, new rules and a new theme.
5. Everything the class uses is defined inside it: constants as class attributes (used as self.NAME), helpers as
   methods. No print(), input(), files, numpy, or modules outside the standard library.
6. Never reveal the answer in a text, and never let an unknown or garbage command win.
7. Use only names your class defines: an attribute is set in setup() before it is read (also in the first
   observation's text), and a constant is a class attribute of YOUR class. The examples' names (self.WORDS,
   self.swaps_left, ...) do not exist in your class.
8. plan() returns exactly the commands act() accepts, with the same words and letter case: when act() checks
   words[0] == "answer" and words[1] == str(self.total), plan() returns [..., f"answer {self.total}"].

SELF-CHECK before you answer
- Run setup() in your head, then play plan() through act(): does the last command return reward 1.0 and done True?
- Does act("garbage") return a helpful text with reward 0.0 and done False?"""


def scaffold_contract_text(turn_budget: int) -> str:
    """The scaffold contract, rules, do-not list and self-check, with the run's turn budget."""
    return _CONTRACT.replace("__BUDGET__", str(int(turn_budget)))


#: the chat messages asking the designer for one TextGame game (the standalone prompt's parts and
#: order; examples shown without the base)
scaffold_designer_messages = PromptFormat(scaffold_contract_text, display=strip)


#: (pattern in the failed check's detail, advice) for a TextGame game
SCAFFOLD_ADVICE: tuple[tuple[str, str], ...] = (
    *SHARED_ADVICE,
    (r"solution\(\) returned|solution\(\) must return|gave no actions|object is not iterable",
     "plan() must return a list of command strings, like [\"read 1\", \"answer 42\"], that wins the game."),
    (r"not success|ended with reward",
     "Playing plan() through act() must end with reward 1.0 and done True: compute the commands from the hidden "
     "state drawn in setup(), with the same command words (and letter case) act() compares with."),
    (r"RecursionError",
     "setup(), act() and plan() must not call reset(), step() or solution(), and no method may call itself."),
    (r"AttributeError: '(?!builtin_function_or_method)\w+' object has no attribute '(?![A-Z][A-Z0-9_]*')",
     "Set every attribute act() and plan() use in setup(), and do not name an attribute plan or act."),
    (r"act\(\) must return|cannot unpack|must return \(observation",
     "Every path of act() returns a (text, reward, done) tuple, for example return \"Wrong.\", 0.0, True."),
    (r"did not end within",
     "act() must return done True when the goal is reached or the game is lost."),
    (r"has no reset\(\) or step\(\)|has no reset\(\)|has no step\(\)|no environment class",
     "Write one class NameEnv(TextGame): with setup, act and plan (TextGame is provided: do not define it)."),
    (r"different observations",
     "Draw every hidden value in setup() with the rng it is given (rng.randint, rng.choice), never with the "
     "global random module."),
)

#: a truncated TextGame game is asked for in under this many lines
SCAFFOLD_SHORT_LINES = 60
