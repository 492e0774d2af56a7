"""Skill families of the procedural policy (a SIMULATION, not an LLM): environment code templates
in the SPADE format with difficulty knobs, and the matching observation solvers its simulated
agent uses to find the correct next action.

Each family writes a complete, self-contained environment module (class name ending in ``Env``,
``reset(seed)``, ``step(action)`` with ``\\boxed{...}`` actions, ``solution()`` returning the
reference actions for the current episode, rewards in [0, 1], deterministic per seed, standard
library only). Templates are filled with ``str.replace`` on ``__NAME__`` placeholders so the
generated code needs no brace escaping.

The solvers parse observations only (they never execute environment code): they exist so the
simulated agent can act correctly with a probability set by its skill, see
:mod:`spade_engine.policy.procedural`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Family", "FAMILIES", "UNIT_TABLE", "render", "family_of_code"]

UNIT_TABLE: dict[str, dict[str, float]] = {
    "length": {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "mi": 1609.344},
    "time": {"s": 1.0, "min": 60.0, "h": 3600.0, "day": 86400.0},
    "mass": {"g": 0.001, "kg": 1.0, "lb": 0.45359237, "t": 1000.0},
}

HEADER = r'''# Environment written by the spade-engine PROCEDURAL designer (a simulation, not an LLM).
# family: __FAMILY__
# difficulty: __DIFFICULTY__
"""__TITLE__

__BLURB__
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

'''

ARITHMETIC = r'''
class __CLASS__:
    """Evaluate an arithmetic expression with operator precedence."""

    N_TERMS = __N_TERMS__
    MAX_VALUE = __MAX_VALUE__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._answer = 0
        self._expr = ""
        self.reset()

    @staticmethod
    def _evaluate(terms, ops):
        vals, pending = [terms[0]], []
        for op, t in zip(ops, terms[1:]):
            if op == "*":
                vals[-1] = vals[-1] * t
            else:
                pending.append(op)
                vals.append(t)
        total = vals[0]
        for op, v in zip(pending, vals[1:]):
            total = total + v if op == "+" else total - v
        return total

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        terms = [rng.randint(2, self.MAX_VALUE) for _ in range(self.N_TERMS)]
        ops = [rng.choice(["+", "-", "*"]) for _ in range(self.N_TERMS - 1)]
        self._expr = " ".join([str(terms[0])] + [f"{op} {t}" for op, t in zip(ops, terms[1:])])
        self._answer = self._evaluate(terms, ops)
        self.turn_count = 0
        return ("Evaluate the expression " + self._expr + " (usual precedence: * before + and -). "
                "Reply with \\boxed{<integer>}."), {}

    def step(self, action):
        self.turn_count += 1
        guess = _int(_cmd(action))
        if guess is None:
            return ("Reply with a single integer as \\boxed{<integer>}.", 0.0, False,
                    self.turn_count >= self.max_turns, {})
        if guess == self._answer:
            return "Correct.", 1.0, True, False, {}
        return "Incorrect.", 0.0, True, False, {}

    def solution(self):
        return [_boxed(self._answer)]
'''

SEQUENCE = r'''
class __CLASS__:
    """Infer the rule of a sequence and extend it term by term."""

    RULES = __RULES__
    SHOWN = __SHOWN__
    ASK = __ASK__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._seq = []
        self._pos = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        rule = rng.choice(self.RULES)
        n = self.SHOWN + self.ASK
        a = rng.randint(1, 9)
        seq = []
        if rule == "add":
            d = rng.randint(2, 9)
            seq = [a + i * d for i in range(n)]
        elif rule == "mul":
            r = rng.randint(2, 3)
            seq = [a * r ** i for i in range(n)]
        elif rule == "quad":
            d, s, x = rng.randint(1, 4), rng.randint(1, 3), a
            for _ in range(n):
                seq.append(x)
                x, d = x + d, d + s
        else:
            seq = [a, rng.randint(1, 9)]
            while len(seq) < n:
                seq.append(seq[-1] + seq[-2])
        self._seq = seq
        self._pos = self.SHOWN
        self.turn_count = 0
        return self._obs(), {}

    def _obs(self):
        shown = ", ".join(str(v) for v in self._seq[: self._pos])
        return ("Sequence so far: " + shown + ". What is the next term? Reply with \\boxed{<integer>}.")

    def step(self, action):
        self.turn_count += 1
        guess = _int(_cmd(action))
        if guess is None:
            return ("Reply with the next term as \\boxed{<integer>}.", 0.0, False,
                    self.turn_count >= self.max_turns, {})
        if guess != self._seq[self._pos]:
            return "Incorrect.", 0.0, True, False, {}
        self._pos += 1
        if self._pos >= len(self._seq):
            return "Correct, sequence complete.", 1.0, True, False, {}
        return "Correct. " + self._obs(), 0.0, False, self.turn_count >= self.max_turns, {}

    def solution(self):
        return [_boxed(v) for v in self._seq[self._pos:]]
'''

NUMBER_SEARCH = r'''
class __CLASS__:
    """Find a hidden integer; every wrong guess says higher or lower."""

    UPPER = __UPPER__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._target = 1
        self._lo, self._hi = 1, self.UPPER
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self._target = rng.randint(1, self.UPPER)
        self._lo, self._hi = 1, self.UPPER
        self.turn_count = 0
        return ("A whole number is hidden. The hidden number is between 1 and " + str(self.UPPER) + ". "
                "Guess it with \\boxed{<integer>}; you will be told whether it is higher or lower."), {}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        guess = _int(_cmd(action))
        if guess is None:
            return "Reply with a guess as \\boxed{<integer>}.", 0.0, False, truncated, {}
        if guess == self._target:
            return "Found it.", 1.0, True, False, {}
        if guess < self._target:
            self._lo = max(self._lo, guess + 1)
            word = "Higher."
        else:
            self._hi = min(self._hi, guess - 1)
            word = "Lower."
        obs = (word + " The hidden number is between " + str(self._lo) + " and " + str(self._hi) + ". "
               "Guess again with \\boxed{<integer>}.")
        return obs, 0.0, False, truncated, {}

    def solution(self):
        lo, hi, out = self._lo, self._hi, []
        while lo <= hi:
            mid = (lo + hi) // 2
            out.append(_boxed(mid))
            if mid == self._target:
                break
            if mid < self._target:
                lo = mid + 1
            else:
                hi = mid - 1
        return out
'''

CODE_TRACE = r'''
class __CLASS__:
    """Trace a small loop and report the variable after each iteration."""

    ITERATIONS = __ITERATIONS__
    N_OPS = __N_OPS__
    BRANCH = __BRANCH__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._program = ""
        self._trace = []
        self._pos = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        x0 = rng.randint(1, 9)
        ops = []
        for _ in range(self.N_OPS):
            op = rng.choice(["+", "-", "*"])
            ops.append((op, rng.randint(2, 3) if op == "*" else rng.randint(1, 9)))
        limit, cut = rng.randint(20, 60), rng.randint(5, 15)
        lines = ["x = " + str(x0), "for i in range(" + str(self.ITERATIONS) + "):"]
        lines += ["    x = x " + op + " " + str(k) for op, k in ops]
        if self.BRANCH:
            lines += ["    if x > " + str(limit) + ":", "        x = x - " + str(cut)]
        self._program = "\n".join(lines)
        x, trace = x0, []
        for _ in range(self.ITERATIONS):
            for op, k in ops:
                x = x + k if op == "+" else (x - k if op == "-" else x * k)
            if self.BRANCH and x > limit:
                x = x - cut
            trace.append(x)
        self._trace = trace
        self._pos = 0
        self.turn_count = 0
        return self._obs(), {}

    def _obs(self):
        return ("Trace this program:\n" + self._program + "\nWhat is the value of x after iteration "
                + str(self._pos + 1) + "? Reply with \\boxed{<integer>}.")

    def step(self, action):
        self.turn_count += 1
        guess = _int(_cmd(action))
        if guess is None:
            return "Reply with an integer as \\boxed{<integer>}.", 0.0, False, self.turn_count >= self.max_turns, {}
        if guess != self._trace[self._pos]:
            return "Incorrect.", 0.0, True, False, {}
        self._pos += 1
        if self._pos >= len(self._trace):
            return "Correct, trace complete.", 1.0, True, False, {}
        return "Correct. " + self._obs(), 0.0, False, self.turn_count >= self.max_turns, {}

    def solution(self):
        return [_boxed(v) for v in self._trace[self._pos:]]
'''

UNIT_CONVERT = r'''
class __CLASS__:
    """Convert physical quantities between units, one task per turn."""

    TABLE = __TABLE__
    KINDS = __KINDS__
    TASKS = __TASKS__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._tasks = []
        self._pos = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self._tasks = []
        for _ in range(self.TASKS):
            kind = rng.choice(self.KINDS)
            src, dst = rng.sample(sorted(self.TABLE[kind]), 2)
            value = round(rng.uniform(1, 500), 1)
            answer = round(value * self.TABLE[kind][src] / self.TABLE[kind][dst], 3)
            self._tasks.append((value, src, dst, answer))
        self._pos = 0
        self.turn_count = 0
        return self._obs(), {}

    def _obs(self):
        value, src, dst, _ = self._tasks[self._pos]
        return ("Convert " + str(value) + " " + src + " to " + dst + ". Reply with \\boxed{<number>} rounded to "
                "3 decimal places. (Task " + str(self._pos + 1) + " of " + str(len(self._tasks)) + ")")

    def step(self, action):
        self.turn_count += 1
        try:
            guess = float(_cmd(action).replace(",", ""))
        except ValueError:
            return "Reply with a number as \\boxed{<number>}.", 0.0, False, self.turn_count >= self.max_turns, {}
        answer = self._tasks[self._pos][3]
        if abs(guess - answer) > 0.0015 + 1e-9 * abs(answer):
            return "Incorrect.", 0.0, True, False, {}
        self._pos += 1
        if self._pos >= len(self._tasks):
            return "Correct, all conversions done.", 1.0, True, False, {}
        return "Correct. " + self._obs(), 0.0, False, self.turn_count >= self.max_turns, {}

    def solution(self):
        return [_boxed(t[3]) for t in self._tasks[self._pos:]]
'''

TOOL_USE = r'''
class __CLASS__:
    """Use a key-value tool to follow a chain of references to a final value."""

    DEPTH = __DEPTH__
    DISTRACTORS = __DISTRACTORS__
    WORDS = ["amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
             "kelp", "lumen", "maple", "nickel", "onyx", "pixel", "quartz", "raven", "sierra", "tundra"]

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._store = {}
        self._answer = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        names = rng.sample(self.WORDS, self.DEPTH + self.DISTRACTORS)
        chain, extra = ["start"] + names[: self.DEPTH], names[self.DEPTH:]
        self._answer = rng.randint(10, 999)
        self._store = {}
        for a, b in zip(chain, chain[1:]):
            self._store[a] = ("ref", b)
        self._store[chain[-1]] = ("value", self._answer)
        for name in extra:
            if rng.random() < 0.5:
                self._store[name] = ("value", rng.randint(10, 999))
            else:
                self._store[name] = ("ref", rng.choice(chain))
        self._chain = chain
        self.turn_count = 0
        keys = ", ".join(sorted(self._store))
        return ("Tools: \\boxed{get <key>} shows what a key holds; \\boxed{answer <number>} submits the final "
                "value. Keys: " + keys + ". Find the number reached by following references from key 'start'."), {}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        cmd = _cmd(action)
        parts = cmd.split()
        if len(parts) == 2 and parts[0].lower() == "get":
            entry = self._store.get(parts[1].strip("'\""))
            if entry is None:
                return "No key named '" + parts[1] + "'.", 0.0, False, truncated, {}
            if entry[0] == "ref":
                return "Key '" + parts[1] + "' holds a reference to key '" + entry[1] + "'.", 0.0, False, truncated, {}
            return "Key '" + parts[1] + "' holds the value " + str(entry[1]) + ".", 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0].lower() == "answer":
            if _int(parts[1]) == self._answer:
                return "Correct.", 1.0, True, False, {}
            return "Incorrect.", 0.0, True, False, {}
        return "Unknown tool. Use \\boxed{get <key>} or \\boxed{answer <number>}.", 0.0, False, truncated, {}

    def solution(self):
        return [_boxed("get " + k) for k in self._chain] + [_boxed("answer " + str(self._answer))]
'''

SORT_SWAPS = r'''
class __CLASS__:
    """Sort a list with a limited number of swap moves."""

    LENGTH = __LENGTH__
    SLACK = __SLACK__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._list = []
        self._moves_left = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        values = rng.sample(range(1, 10 * self.LENGTH), self.LENGTH)
        while values == sorted(values):
            rng.shuffle(values)
        self._list = values
        self._moves_left = self.LENGTH - 1 + self.SLACK
        self.turn_count = 0
        return ("Sort the list into ascending order with moves \\boxed{swap i j} (0-based positions). "
                + self._state()), {}

    def _state(self):
        return "Current list: [" + ", ".join(str(v) for v in self._list) + "]. Moves left: " + str(self._moves_left) + "."

    def step(self, action):
        self.turn_count += 1
        m = re.fullmatch(r"swap\s+(\d+)\s+(\d+)", _cmd(action).lower())
        if not m or max(int(m.group(1)), int(m.group(2))) >= len(self._list):
            return ("Invalid move. Use \\boxed{swap i j} with positions 0 to " + str(len(self._list) - 1) + ". "
                    + self._state()), 0.0, False, self.turn_count >= self.max_turns, {}
        i, j = int(m.group(1)), int(m.group(2))
        self._list[i], self._list[j] = self._list[j], self._list[i]
        self._moves_left -= 1
        if self._list == sorted(self._list):
            return "Sorted!", 1.0, True, False, {}
        if self._moves_left <= 0:
            return "Out of moves.", 0.0, True, False, {}
        return self._state(), 0.0, False, self.turn_count >= self.max_turns, {}

    def solution(self):
        work, out = list(self._list), []
        target = sorted(work)
        for i in range(len(work)):
            if work[i] != target[i]:
                j = work.index(target[i], i + 1)
                work[i], work[j] = work[j], work[i]
                out.append(_boxed("swap " + str(i) + " " + str(j)))
        return out
'''


# ----------------------------------------------------------------------------------------------
# Solvers (observation -> correct next action content), used by the simulated agent


def _ints(text: str) -> list[int]:
    return [int(v) for v in re.findall(r"-?\d+", text)]


def _solve_arithmetic(obs: str) -> str | None:
    m = re.search(r"Evaluate the expression (.+?) \(usual", obs)
    if not m:
        return None
    tokens = m.group(1).split()
    try:
        terms = [int(t) for t in tokens[0::2]]
    except ValueError:
        return None
    ops = tokens[1::2]
    vals, pending = [terms[0]], []
    for op, t in zip(ops, terms[1:]):
        if op == "*":
            vals[-1] *= t
        else:
            pending.append(op)
            vals.append(t)
    total = vals[0]
    for op, v in zip(pending, vals[1:]):
        total = total + v if op == "+" else total - v
    return str(total)


def next_term(seq: Sequence[int]) -> int | None:
    """The next term under the first rule (add, mul, fib, quad) consistent with ``seq``."""
    if len(seq) < 3:
        return None
    diffs = [b - a for a, b in zip(seq, seq[1:])]
    if len(set(diffs)) == 1:
        return seq[-1] + diffs[0]
    if all(a != 0 and b % a == 0 for a, b in zip(seq, seq[1:])):
        ratios = {b // a for a, b in zip(seq, seq[1:])}
        if len(ratios) == 1:
            return seq[-1] * ratios.pop()
    if all(seq[i] == seq[i - 1] + seq[i - 2] for i in range(2, len(seq))):
        return seq[-1] + seq[-2]
    second = [b - a for a, b in zip(diffs, diffs[1:])]
    if len(set(second)) == 1:
        return seq[-1] + diffs[-1] + second[0]
    return None


def _solve_sequence(obs: str) -> str | None:
    m = re.search(r"Sequence so far: (.+?)\. What", obs)
    if not m:
        return None
    v = next_term(_ints(m.group(1)))
    return None if v is None else str(v)


def _solve_number_search(obs: str) -> str | None:
    m = list(re.finditer(r"between (\d+) and (\d+)", obs))
    if not m:
        return None
    lo, hi = int(m[-1].group(1)), int(m[-1].group(2))
    return str((lo + hi) // 2)


def _solve_code_trace(obs: str) -> str | None:
    m = re.search(r"after iteration (\d+)", obs)
    start = re.search(r"^x = (-?\d+)$", obs, re.M)
    loop = re.search(r"^for i in range\((\d+)\):$", obs, re.M)
    if not (m and start and loop):
        return None
    ops = [(o, int(k)) for o, k in re.findall(r"^    x = x ([+*-]) (\d+)$", obs, re.M)]
    branch = re.search(r"^    if x > (\d+):\n        x = x - (\d+)$", obs, re.M)
    x = int(start.group(1))
    for _ in range(int(m.group(1))):
        for op, k in ops:
            x = x + k if op == "+" else (x - k if op == "-" else x * k)
        if branch and x > int(branch.group(1)):
            x -= int(branch.group(2))
    return str(x)


def _solve_unit_convert(obs: str) -> str | None:
    m = re.search(r"Convert ([\d.]+) (\w+) to (\w+)\.", obs)
    if not m:
        return None
    value, src, dst = float(m.group(1)), m.group(2), m.group(3)
    for table in UNIT_TABLE.values():
        if src in table and dst in table:
            return str(round(value * table[src] / table[dst], 3))
    return None


def _solve_tool_use(obs: str) -> str | None:
    m = re.search(r"holds the value (\d+)\.", obs)
    if m:
        return f"answer {m.group(1)}"
    m = re.search(r"holds a reference to key '(\w+)'", obs)
    if m:
        return f"get {m.group(1)}"
    if "from key 'start'" in obs:
        return "get start"
    return None


def _solve_sort_swaps(obs: str) -> str | None:
    m = re.search(r"Current list: \[([^\]]*)\]", obs)
    if not m:
        return None
    work = _ints(m.group(1))
    target = sorted(work)
    for i in range(len(work)):
        if work[i] != target[i]:
            j = work.index(target[i], i + 1)
            return f"swap {i} {j}"
    return None


# ----------------------------------------------------------------------------------------------
# Wrong actions (what the simulated agent does when it fails)


def _off_by(rng: random.Random, correct: str | None) -> str:
    try:
        v = int(correct) if correct is not None else rng.randint(0, 99)
    except ValueError:
        v = rng.randint(0, 99)
    return str(v + rng.choice([-3, -2, -1, 1, 2, 3, 10]))


def _wrong_number_search(rng: random.Random, obs: str, correct: str | None) -> str:
    m = list(re.finditer(r"between (\d+) and (\d+)", obs))
    lo = int(m[-1].group(1)) if m else 1
    return str(lo)  # a linear, inefficient search


def _wrong_unit(rng: random.Random, obs: str, correct: str | None) -> str:
    try:
        return str(round(float(correct or 1.0) * rng.choice([10.0, 0.1, 1.1]), 3))
    except ValueError:
        return "1.0"


def _wrong_tool(rng: random.Random, obs: str, correct: str | None) -> str:
    return f"answer {rng.randint(10, 999)}"


def _wrong_sort(rng: random.Random, obs: str, correct: str | None) -> str:
    m = re.search(r"Current list: \[([^\]]*)\]", obs)
    n = len(_ints(m.group(1))) if m else 3
    i, j = rng.sample(range(n), 2) if n >= 2 else (0, 0)
    return f"swap {i} {j}"


# ----------------------------------------------------------------------------------------------
# Families


@dataclass(frozen=True)
class Family:
    """One skill family: a code template with difficulty knobs, a solver and a failure mode."""

    name: str
    domain: str
    class_names: tuple[str, ...]
    blurb: str
    template: str
    knobs: Callable[[float, random.Random], dict[str, str]]
    solve: Callable[[str], str | None]
    wrong: Callable[[random.Random, str, str | None], str]
    hint: str
    #: simulated agent's aptitude for this family, added to its skill
    aptitude: float = 0.0


def _k_arith(d: float, rng: random.Random) -> dict[str, str]:
    return {"N_TERMS": str(2 + round(4 * d)), "MAX_VALUE": str(9 + int(60 * d))}


def _k_seq(d: float, rng: random.Random) -> dict[str, str]:
    rules = ["add"] if d < 0.25 else (["add", "mul"] if d < 0.5 else (["mul", "quad"] if d < 0.75 else ["quad", "fib"]))
    return {"RULES": repr(rules), "SHOWN": str(6 - round(2 * d)), "ASK": str(1 + round(2 * d))}


def _k_search(d: float, rng: random.Random) -> dict[str, str]:
    bits = 2 + round(5 * d)
    return {"UPPER": str(2**bits), "MAX_TURNS": str(bits + 1)}


def _k_trace(d: float, rng: random.Random) -> dict[str, str]:
    return {"ITERATIONS": str(1 + round(3 * d)), "N_OPS": str(1 + round(2 * d)), "BRANCH": str(d >= 0.5)}


def _k_units(d: float, rng: random.Random) -> dict[str, str]:
    kinds = ["length"] if d < 0.3 else (["length", "time"] if d < 0.6 else ["length", "time", "mass"])
    table = {k: UNIT_TABLE[k] for k in kinds}
    return {"TABLE": repr(table), "KINDS": repr(kinds), "TASKS": str(1 + round(2 * d))}


def _k_tool(d: float, rng: random.Random) -> dict[str, str]:
    return {"DEPTH": str(1 + round(3 * d)), "DISTRACTORS": str(1 + round(5 * d))}


def _k_sort(d: float, rng: random.Random) -> dict[str, str]:
    return {"LENGTH": str(3 + round(3 * d)), "SLACK": str(1 if d < 0.5 else 0)}


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("arithmetic", "math", ("ArithmeticChainEnv", "PrecedenceEnv", "ExpressionEnv"),
               "The agent evaluates an expression exactly, respecting operator precedence.",
               ARITHMETIC, _k_arith, _solve_arithmetic, lambda r, o, c: _off_by(r, c),
               "Multiply before adding or subtracting, left to right; keep intermediate results exact. "
               "Answer with one integer as \\boxed{<integer>}.", 0.1),
        Family("sequence", "logic", ("SequenceRuleEnv", "NextTermEnv", "PatternEnv"),
               "The agent infers the rule behind a sequence and extends it one term per turn.",
               SEQUENCE, _k_seq, _solve_sequence, lambda r, o, c: _off_by(r, c),
               "Check constant differences, constant ratios, sums of the two previous terms, then "
               "differences of differences. Answer one term per turn as \\boxed{<integer>}.", 0.05),
        Family("number_search", "logic", ("HiddenNumberEnv", "BisectionEnv", "HigherLowerEnv"),
               "The agent locates a hidden integer using higher/lower feedback.",
               NUMBER_SEARCH, _k_search, _solve_number_search, _wrong_number_search,
               "Bisect: always guess the midpoint of the range the last observation states. Reply with "
               "\\boxed{<integer>}.", 0.0),
        Family("code_trace", "code", ("LoopTraceEnv", "TraceEnv", "AccumulatorEnv"),
               "The agent traces a loop and reports a variable after each iteration.",
               CODE_TRACE, _k_trace, _solve_code_trace, lambda r, o, c: _off_by(r, c),
               "Simulate the loop body line by line, including the if-branch, and report x after the "
               "requested iteration as \\boxed{<integer>}.", -0.05),
        Family("unit_convert", "science", ("UnitConversionEnv", "ConvertEnv", "QuantityEnv"),
               "The agent converts physical quantities between units.",
               UNIT_CONVERT, _k_units, _solve_unit_convert, _wrong_unit,
               "Convert through the base unit (metre, second, kilogram): multiply by the source factor, "
               "divide by the target factor, round to 3 decimals, reply \\boxed{<number>}.", 0.0),
        Family("tool_use", "tool_use", ("KeyChainToolEnv", "ReferenceLookupEnv", "ToolChainEnv"),
               "The agent calls a lookup tool repeatedly to follow references to a final value.",
               TOOL_USE, _k_tool, _solve_tool_use, _wrong_tool,
               "Call \\boxed{get start}, then get each key you are referred to; only when a key holds a "
               "value, submit it with \\boxed{answer <number>}.", -0.1),
        Family("sort_swaps", "code", ("SwapSortEnv", "SelectionSwapEnv", "OrderingEnv"),
               "The agent sorts a list with a limited budget of swap moves.",
               SORT_SWAPS, _k_sort, _solve_sort_swaps, _wrong_sort,
               "Selection sort: swap the smallest misplaced value into the first wrong position each "
               "move, as \\boxed{swap i j} with 0-based positions.", 0.0),
    )
}


def _safe_text(text: str, limit: int = 240) -> str:
    t = re.sub(r"\s+", " ", text.replace("\\", "/").replace('"""', "'''")).strip()
    return t if len(t) <= limit else t[:limit].rsplit(" ", 1)[0] + " ..."


def render(
    family: Family, difficulty: float, rng: random.Random, *, title: str = "", doc_text: str = "", turn_limit: int = 8
) -> str:
    """Complete environment source for ``family`` at ``difficulty`` (knobs set from it); episodes
    end by themselves within ``turn_limit`` turns."""
    class_name = rng.choice(family.class_names)
    knobs = family.knobs(difficulty, rng)
    knobs["MAX_TURNS"] = str(min(int(knobs.get("MAX_TURNS", turn_limit)), turn_limit))
    code = HEADER + family.template
    subs = {
        "FAMILY": family.name,
        "DIFFICULTY": f"{difficulty:.3f}",
        "TITLE": _safe_text(title or family.name.replace("_", " ").title(), 80),
        "BLURB": family.blurb,
        "DOC": _safe_text(doc_text) or "(no document)",
        "CLASS": class_name,
        **knobs,
    }
    for k, v in subs.items():
        code = code.replace(f"__{k}__", v)
    # ground the episode in the document: a theme line opens the first observation
    theme = _theme(title, doc_text)
    code = code.replace("    def reset(self, seed=None):\n", "    def _reset(self, seed=None):\n", 1)
    wrapper = (
        f"    THEME = {theme!r}\n\n"
        "    def reset(self, seed=None):\n"
        "        obs, info = self._reset(seed)\n"
        '        return self.THEME + "\\n" + obs, info\n\n'
    )
    marker = "    def __init__("
    return code.replace(marker, wrapper + marker, 1)


def _theme(title: str, doc_text: str) -> str:
    """A digit-free one-line theme from the document (title and first sentence)."""
    first = re.split(r"(?<=[.!?])\s", doc_text.strip(), maxsplit=1)[0] if doc_text.strip() else ""
    text = f"Theme: {title}. {first}" if title else f"Theme: {first}"
    text = re.sub(r"[0-9{}\\\[\]]", "", text)
    return _safe_text(text, 200)


def family_of_code(code: str) -> Family | None:
    """The family that wrote ``code`` (from its header comment or class name), if any."""
    m = re.search(r"^# family: (\w+)", code, re.M)
    if m and m.group(1) in FAMILIES:
        return FAMILIES[m.group(1)]
    for fam in FAMILIES.values():
        if any(re.search(rf"^class {c}\b", code, re.M) for c in fam.class_names):
            return fam
    return None
