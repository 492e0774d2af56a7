"""Building blocks of the procedural designer's skill families (a SIMULATION, not an LLM).

* :class:`Family`: one skill family, i.e. a builder that writes an environment class for a
  difficulty, the observation solver and failure mode of the simulated agent, and the hint;
* :class:`Spec` and :class:`Built`: what a builder receives (difficulty, a seeded
  ``random.Random``, vocabulary and sentences of the grounding document, the turn limit) and
  returns (class body, class docstring, description, variant label);
* reward shaping: :func:`reward_scheme` picks how an environment scores a failed episode
  (nothing, partial credit for progress, or a small reward per correct step) and writes its
  ``_score``/``_progress_reward`` helpers;
* small shared solver helpers.

Every generated class uses the same few anchors that the designer's deliberate defects and the
validator rely on: ``def step(self, action):`` opening with ``self.turn_count += 1``,
``rng = random.Random(0 if seed is None else seed)`` in ``_reset``, a success return of the form
``return <message>, 1.0, True, False, {}`` and ``def solution(self):``.
"""

from __future__ import annotations

import random
from . import bounded_re as re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Family",
    "Spec",
    "Built",
    "fill",
    "reward_scheme",
    "pick",
    "ints",
    "off_by",
    "step_reward",
    "CHAIN",
    "chain_methods",
    "state_names",
    "eval_expr",
    "EvalError",
    "backticked",
]


@dataclass(frozen=True)
class Spec:
    """What a family builder gets: everything it may vary on, all seeded."""

    difficulty: float
    rng: random.Random
    #: content words of the grounding document (lowercase, letters only), most specific first
    words: tuple[str, ...] = ()
    #: sentences of the grounding document
    sentences: tuple[str, ...] = ()
    title: str = ""
    turn_limit: int = 8

    @property
    def d(self) -> float:
        return self.difficulty


@dataclass(frozen=True)
class Built:
    """A builder's output. ``body`` is the class body (4-space indented, ``__CLASS__`` for the
    class name); ``description`` opens the module docstring."""

    body: str
    doc: str
    description: str
    variant: str


@dataclass(frozen=True)
class Family:
    """One skill family: a builder with difficulty knobs, a solver and a failure mode."""

    name: str
    domain: str
    title: str
    build: Callable[[Spec], Built]
    solve: Callable[[str], str | None]
    wrong: Callable[[random.Random, str, str | None], str]
    hint: str
    #: simulated agent's aptitude for this family, added to its skill
    aptitude: float = 0.0
    #: nouns for class names (with a document word in front and ``Env`` behind)
    nouns: tuple[str, ...] = field(default_factory=tuple)

    @property
    def class_names(self) -> tuple[str, ...]:
        """Class-name suffixes this family writes (``<Word><Noun>Env``)."""
        return tuple(f"{n}Env" for n in self.nouns)


def fill(template: str, **subs: object) -> str:
    """``template`` with every ``__KEY__`` replaced by ``str(value)``."""
    for k, v in subs.items():
        template = template.replace(f"__{k}__", str(v))
    return template


def pick(rng: random.Random, options: Sequence[str]) -> str:
    return options[rng.randrange(len(options))]


# ----------------------------------------------------------------------------------------------
# Reward shaping: how a failed or unfinished episode is scored (a win is always 1.0)

_SCORE = {
    "binary": (
        "all or nothing: a wrong answer ends the episode with reward 0",
        '''
    def _score(self, done, total):
        """Reward of an episode that ends unsolved: all or nothing."""
        return 0.0
''',
    ),
    "partial": (
        "partial credit: a wrong answer ends the episode with half the share of the work already done",
        '''
    def _score(self, done, total):
        """Reward of an episode that ends unsolved: partial credit for the steps done."""
        return round(0.5 * done / max(1, total), 3)
''',
    ),
    "stepwise": (
        "shaped: each correct intermediate step earns __STEP__, a wrong answer ends with a quarter of the progress",
        '''
    STEP_REWARD = __STEP__

    def _score(self, done, total):
        """Reward of an episode that ends unsolved: a quarter of the progress made."""
        return round(0.25 * done / max(1, total), 3)
''',
    ),
}


def reward_scheme(rng: random.Random, *, multi_step: bool) -> tuple[str, str, str]:
    """``(name, description, helper source)`` of a reward scheme; ``stepwise`` only for
    environments with intermediate steps. The helper defines ``_score(done, total)`` (and
    ``STEP_REWARD`` for stepwise); :func:`step_reward` gives the reward of a correct
    intermediate step."""
    names = ["binary", "partial", "stepwise"] if multi_step else ["binary", "partial"]
    name = names[rng.randrange(len(names))]
    step = rng.choice(["0.05", "0.1", "0.15"])
    desc, src = _SCORE[name]
    return name, desc.replace("__STEP__", step), src.replace("__STEP__", step)


def step_reward(scheme: str) -> str:
    """Expression for the reward of a correct intermediate step under ``scheme``."""
    return "self.STEP_REWARD" if scheme == "stepwise" else "0.0"


# ----------------------------------------------------------------------------------------------
# Solver helpers


def ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def off_by(rng: random.Random, correct: str | None) -> str:
    """A near miss of an integer answer."""
    try:
        v = int(correct) if correct is not None else rng.randint(0, 99)
    except ValueError:
        v = rng.randint(0, 99)
    return str(v + rng.choice([-3, -2, -1, 1, 2, 3, 10]))


# ----------------------------------------------------------------------------------------------
# The answer-chain skeleton: an episode is a list of answers asked one per turn (one-shot tasks
# have a list of one). A family supplies ``_make(rng)`` (fills ``__ANS__``) and ``_obs()``.

CHAIN = r'''
    def _accepts(self, guess, expected):
        __ACCEPT__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self.__ANS__ = []
        self.__POS__ = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.__ANS__ = []
        self.__POS__ = 0
        self._make(rng)
        self.turn_count = 0
        return self.THEME + "\n" + self._obs(), {}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        guess = __PARSE__(_cmd(action))
        if guess is None:
            return __HELP__ + " " + self._obs(), 0.0, False, truncated, {}
        if not self._accepts(guess, self.__ANS__[self.__POS__]):
            return __WRONG__, self._score(self.__POS__, len(self.__ANS__)), True, False, {}
        self.__POS__ += 1
        if self.__POS__ >= len(self.__ANS__):
            return __DONE__, 1.0, True, False, {}
        return __OK__ + " " + self._obs(), __STEP_REWARD__, False, truncated, {}

    def solution(self):
        return [_boxed(v) for v in self.__ANS__[self.__POS__:]]
'''

_ACCEPT = {
    "int": ("_int", "return guess == expected"),
    "float": ("_num", "return abs(guess - expected) <= self.TOLERANCE + 1e-9 * abs(expected)"),
    "text": ("_word", "return guess == str(expected).lower()"),
}

_STATE_NAMES = {
    "ANS": ("_answers", "_expected", "_targets", "_key", "_goals"),
    "POS": ("_pos", "_index", "_cursor", "_solved", "_stage"),
}

_MESSAGES = {
    "HELP": ('"Reply with one answer as \\\\boxed{<answer>}."', '"That is not an answer I can read; use \\\\boxed{<answer>}."',
             '"Unreadable reply: wrap a single answer in \\\\boxed{...}."'),
    "WRONG": ('"Incorrect."', '"Wrong answer; the episode is over."', '"Not right. Episode finished."',
              '"That is not correct."'),
    "DONE": ('"Correct, all done."', '"Correct, everything solved."', '"Right: task complete."',
             '"Correct. That completes the task."'),
    "OK": ('"Correct."', '"Right."', '"Yes, that is it."', '"Correct, keep going."'),
}


def state_names(rng: random.Random) -> dict[str, str]:
    """Attribute names of an answer chain's state (answers and position)."""
    return {k: pick(rng, v) for k, v in _STATE_NAMES.items()}


def chain_methods(rng: random.Random, *, answer: str, scheme: str, max_turns: int, names: dict[str, str]) -> str:
    """``_accepts``, ``__init__``, ``reset``, ``step`` and ``solution`` of an answer chain."""
    parse, accept = _ACCEPT[answer]
    subs = {k: pick(rng, v) for k, v in _MESSAGES.items()}
    return fill(CHAIN, ACCEPT=accept, PARSE=parse, MAX_TURNS=max_turns, STEP_REWARD=step_reward(scheme), **subs, **names)


# ----------------------------------------------------------------------------------------------
# A safe evaluator for the simulated agent's solvers: they read expressions shown in
# observations and compute them without executing any environment code.


class EvalError(ValueError):
    """The text is not an expression the solver evaluates."""


def eval_expr(text: str, names: dict[str, object] | None = None) -> object:
    """Value of an arithmetic/boolean expression (ints, floats, names from ``names``; + - * / //
    % **, comparisons, and/or/not); raises :class:`EvalError` for anything else."""
    import ast
    import operator as op

    bins = {ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.Div: op.truediv, ast.FloorDiv: op.floordiv,
            ast.Mod: op.mod, ast.Pow: op.pow}
    cmps = {ast.Eq: op.eq, ast.NotEq: op.ne, ast.Lt: op.lt, ast.LtE: op.le, ast.Gt: op.gt, ast.GtE: op.ge}
    env = names or {}

    def ev(n: ast.AST) -> object:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, bool)):
            return n.value
        if isinstance(n, ast.Name):
            if n.id in env:
                return env[n.id]
            if n.id in ("True", "False"):
                return n.id == "True"
            raise EvalError(f"unknown name {n.id}")
        if isinstance(n, ast.BinOp) and type(n.op) in bins:
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Pow) and abs(b) > 64:
                raise EvalError("exponent too large")
            return bins[type(n.op)](a, b)
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            if isinstance(n.op, ast.USub):
                return -v  # type: ignore[operator]
            if isinstance(n.op, ast.UAdd):
                return +v  # type: ignore[operator]
            if isinstance(n.op, ast.Not):
                return not v
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return all(vals) if isinstance(n.op, ast.And) else any(vals)
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in cmps:
            return cmps[type(n.ops[0])](ev(n.left), ev(n.comparators[0]))
        raise EvalError(f"unsupported expression: {type(n).__name__}")

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise EvalError(str(exc)) from None
    try:
        return ev(tree)
    except (ZeroDivisionError, OverflowError, TypeError) as exc:
        raise EvalError(str(exc)) from None


def backticked(obs: str) -> list[str]:
    """Every `...` span of an observation, in order."""
    return re.findall(r"`([^`\n]+)`", obs)

