"""Math skill families of the procedural designer (a SIMULATION, not an LLM): arithmetic,
Euclid's algorithm and linear equations, each with rule variants, difficulty knobs, reward
schemes and wordings, plus the observation solvers of the simulated agent."""

from __future__ import annotations

import math
from . import bounded_re as re

from .kit import (
    Built,
    EvalError,
    Family,
    Spec,
    backticked,
    chain_methods,
    eval_expr,
    fill,
    off_by,
    pick,
    reward_scheme,
    state_names,
)

__all__ = ["ARITHMETIC", "GCD_STEPS", "LINEAR_EQUATION"]


def _assemble(spec: Spec, *, constants: str, make: str, obs: str, answer: str, multi: bool, max_turns: int,
              extra: str = "") -> tuple[str, str, str]:
    """Class body of an answer chain; returns (body, scheme name, scheme description)."""
    rng = spec.rng
    names = state_names(rng)
    scheme, scheme_desc, score = reward_scheme(rng, multi_step=multi)
    body = constants + make + obs + extra + score + chain_methods(rng, answer=answer, scheme=scheme, max_turns=max_turns, names=names)
    return fill(body, **names), scheme, scheme_desc


# ----------------------------------------------------------------------------------------------
# arithmetic

_EVALUATE = r'''
    @staticmethod
    def _evaluate(terms, ops):
        """Value of terms joined by ops, * before + and -."""
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
'''

_ARITH_MAKE = {
    "precedence": r'''
    def _make(self, rng):
        terms = [rng.randint(2, self.MAX_VALUE) for _ in range(self.N_TERMS)]
        ops = [rng.choice(self.OPS) for _ in range(self.N_TERMS - 1)]
        self._expr = " ".join([str(terms[0])] + [op + " " + str(t) for op, t in zip(ops, terms[1:])])
        self.__ANS__ = [self._evaluate(terms, ops)]
''' + _EVALUATE,
    "parentheses": r'''
    def _make(self, rng):
        terms = [rng.randint(2, self.MAX_VALUE) for _ in range(self.N_TERMS)]
        ops = [rng.choice(self.OPS) for _ in range(self.N_TERMS - 1)]
        inner = self._evaluate(terms[:2], ops[:1])
        rest = " ".join(op + " " + str(t) for op, t in zip(ops[1:], terms[2:]))
        self._expr = "(" + str(terms[0]) + " " + ops[0] + " " + str(terms[1]) + ") " + rest
        self.__ANS__ = [self._evaluate([inner] + terms[2:], ops[1:])]
''' + _EVALUATE,
    "modular": r'''
    def _make(self, rng):
        terms = [rng.randint(2, self.MAX_VALUE) for _ in range(self.N_TERMS)]
        ops = [rng.choice(self.OPS) for _ in range(self.N_TERMS - 1)]
        modulus = rng.randint(3, self.MODULUS)
        body = " ".join([str(terms[0])] + [op + " " + str(t) for op, t in zip(ops, terms[1:])])
        self._expr = "(" + body + ") mod " + str(modulus)
        self.__ANS__ = [self._evaluate(terms, ops) % modulus]
''' + _EVALUATE,
    "running": r'''
    def _make(self, rng):
        total = rng.randint(1, self.MAX_VALUE)
        self._start = total
        self._ops = []
        for _ in range(self.N_TERMS - 1):
            op = rng.choice(self.OPS)
            k = rng.randint(2, 3) if op == "*" else rng.randint(1, self.MAX_VALUE)
            total = total * k if op == "*" else (total + k if op == "+" else total - k)
            self._ops.append(op + " " + str(k))
            self.__ANS__.append(total)
''',
}

_ARITH_OBS = {
    "precedence": (
        '"Evaluate `" + self._expr + "` with the usual precedence (* before + and -). Reply with \\\\boxed{<integer>}."',
        '"Compute the exact value of `" + self._expr + "`; multiplication binds tighter than + and -. Answer as \\\\boxed{<integer>}."',
        '"What does `" + self._expr + "` equal? Respect operator precedence and reply \\\\boxed{<integer>}."',
    ),
    "parentheses": (
        '"Evaluate `" + self._expr + "`: the bracket first, then * before + and -. Reply with \\\\boxed{<integer>}."',
        '"Work out `" + self._expr + "` exactly (parentheses, then precedence). Answer \\\\boxed{<integer>}."',
    ),
    "modular": (
        '"Compute `" + self._expr + "`, the remainder in 0..m-1 (precedence inside the bracket). Reply with \\\\boxed{<integer>}."',
        '"Reduce `" + self._expr + "` to its least non-negative residue and answer \\\\boxed{<integer>}."',
    ),
    "running": (
        '"Running total: " + str(self._current()) + ". Next operation: `" + self._ops[self.__POS__] + "`. Reply with the new total as \\\\boxed{<integer>}."',
        '"Current total: " + str(self._current()) + ". Apply `" + self._ops[self.__POS__] + "` and report the result as \\\\boxed{<integer>}."',
    ),
}

_ARITH_DESC = {
    "precedence": (
        "The agent evaluates one expression of {n} integer terms (up to {v}) exactly, respecting operator precedence.",
        "A one-shot precedence drill: {n} terms up to {v}, operators {ops}; products bind before sums.",
    ),
    "parentheses": (
        "The agent evaluates an expression of {n} terms whose first two are bracketed, then applies precedence.",
        "Bracket-first evaluation: {n} integers up to {v} with operators {ops}, the leading pair in parentheses.",
    ),
    "modular": (
        "Modular arithmetic: the agent evaluates {n} terms (up to {v}) and reduces the result modulo a small m.",
        "Clock-style residues: compute an expression of {n} terms, then its remainder modulo at most {m}.",
    ),
    "running": (
        "A multi-turn running total: {k} operations applied strictly left to right, the agent reports the total after each.",
        "Left-to-right accumulation: start from a number up to {v} and report the total after each of {k} operations.",
    ),
}


def _build_arithmetic(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variants = ["precedence", "running"] + (["parentheses"] if d >= 0.25 else []) + (["modular"] if d >= 0.45 else [])
    variant = pick(rng, variants)
    n_terms = 2 + round(4 * d) + (1 if variant == "parentheses" and d < 0.3 else 0)
    if variant == "running":
        n_terms = min(n_terms, spec.turn_limit + 1)
    max_value = 9 + int(60 * d) + rng.randint(0, 6)
    ops = ["+", "-"] if d < 0.2 and variant != "running" else ["+", "-", "*"]
    modulus = 5 + int(20 * d)
    constants = fill(
        "\n    N_TERMS = __N__\n    MAX_VALUE = __V__\n    OPS = __OPS__\n" + ("    MODULUS = __M__\n" if variant == "modular" else ""),
        N=n_terms, V=max_value, OPS=repr(ops), M=modulus,
    )
    obs = "\n    def _obs(self):\n        return " + pick(rng, _ARITH_OBS[variant]) + "\n"
    if variant == "running":
        obs = (
            "\n    def _current(self):\n        return self._start if self.__POS__ == 0 else self.__ANS__[self.__POS__ - 1]\n" + obs
        )
    multi = variant == "running"
    body, scheme, scheme_desc = _assemble(
        spec, constants=constants, make=_ARITH_MAKE[variant], obs=obs, answer="int", multi=multi,
        max_turns=min(spec.turn_limit, n_terms + 1 if multi else 3),
    )
    desc = pick(rng, _ARITH_DESC[variant]).format(n=n_terms, v=max_value, ops=" ".join(ops), m=modulus, k=n_terms - 1)
    return Built(
        body=body, doc=pick(rng, ("Evaluate arithmetic exactly.", "Exact integer arithmetic, " + variant + " variant.",
                                   "Arithmetic with " + " ".join(ops) + ".")),
        description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}",
    )


def _solve_arithmetic(obs: str) -> str | None:
    spans = backticked(obs) or re.findall(r"Evaluate (?:the expression )?(.+?) \(usual", obs)
    if not spans:
        return None
    expr = spans[-1].strip()
    total = re.search(r"(?:Running|Current) total: (-?\d+)", obs)
    if expr[:1] in "+-*" and total:
        expr = total.group(1) + " " + expr
    try:
        v = eval_expr(expr.replace(" mod ", " % "))
    except EvalError:
        return None
    return str(v) if isinstance(v, int) else None


ARITHMETIC = Family(
    "arithmetic", "math", "Exact arithmetic", _build_arithmetic, _solve_arithmetic, lambda r, o, c: off_by(r, c),
    "Multiply before adding or subtracting, left to right; brackets first; for a running total apply each "
    "operation to the last total; keep intermediate results exact. Answer with one integer as \\boxed{<integer>}.",
    0.1, ("ArithmeticChain", "Precedence", "Expression", "RunningTotal", "Residue", "Calculation"),
)


# ----------------------------------------------------------------------------------------------
# Euclid's algorithm

_GCD_MAKE = {
    "remainders": r'''
    def _make(self, rng):
        while True:
            g = rng.randint(1, self.MAX_GCD)
            a, b = g * rng.randint(2, self.SPREAD), g * rng.randint(1, self.SPREAD)
            a, b = max(a, b), min(a, b)
            if a == b:
                continue
            pairs, x, y = [], a, b
            while y:
                pairs.append((x, y))
                x, y = y, x % y
            if len(pairs) <= self.MAX_STEPS:
                break
        self._pairs = pairs
        self.__ANS__ = [p[0] % p[1] for p in pairs]
''',
    "subtractive": r'''
    def _make(self, rng):
        while True:
            g = rng.randint(1, self.MAX_GCD)
            a, b = g * rng.randint(2, self.SPREAD), g * rng.randint(1, self.SPREAD)
            if a == b:
                continue
            pairs, x, y = [], max(a, b), min(a, b)
            while x != y:
                pairs.append((x, y))
                x, y = max(x - y, y), min(x - y, y)
            if len(pairs) <= self.MAX_STEPS:
                break
        self._pairs = pairs
        self.__ANS__ = [p[0] - p[1] for p in pairs]
''',
    "gcd": r'''
    def _make(self, rng):
        g = rng.randint(2, self.MAX_GCD + 2)
        nums = [g * rng.randint(1, self.SPREAD) for _ in range(self.COUNT)]
        while len(set(nums)) < len(nums):
            nums = [g * rng.randint(1, self.SPREAD) for _ in range(self.COUNT)]
        self._nums = nums
        result = 0
        for v in nums:
            while v:
                result, v = v, result % v
        self.__ANS__ = [result]
''',
    "lcm": r'''
    def _make(self, rng):
        nums = rng.sample(range(2, 4 * self.SPREAD + 4), self.COUNT)
        self._nums = nums
        result = 1
        for v in nums:
            a, b = result, v
            while b:
                a, b = b, a % b
            result = result * v // a
        self.__ANS__ = [result]
''',
}

_GCD_OBS = {
    "remainders": (
        '"Euclid\'s algorithm, division form. Current pair: (" + str(self._pairs[self.__POS__][0]) + ", " + str(self._pairs[self.__POS__][1]) + "). Reply with the remainder of the first divided by the second as \\\\boxed{<integer>}."',
        '"Run Euclid with remainders. Current pair: (" + str(self._pairs[self.__POS__][0]) + ", " + str(self._pairs[self.__POS__][1]) + "). What is the remainder? \\\\boxed{<integer>}."',
    ),
    "subtractive": (
        '"Euclid\'s algorithm, subtraction form. Pair to subtract: (" + str(self._pairs[self.__POS__][0]) + ", " + str(self._pairs[self.__POS__][1]) + "). Reply with the difference larger minus smaller as \\\\boxed{<integer>}."',
        '"Subtractive Euclid. Pair to subtract: (" + str(self._pairs[self.__POS__][0]) + ", " + str(self._pairs[self.__POS__][1]) + "). Give the difference as \\\\boxed{<integer>}."',
    ),
    "gcd": (
        '"Find `gcd(" + ", ".join(str(v) for v in self._nums) + ")`, the greatest common divisor. Reply with \\\\boxed{<integer>}."',
        '"What is the largest integer dividing all of them: `gcd(" + ", ".join(str(v) for v in self._nums) + ")`? Answer \\\\boxed{<integer>}."',
    ),
    "lcm": (
        '"Find `lcm(" + ", ".join(str(v) for v in self._nums) + ")`, the least common multiple. Reply with \\\\boxed{<integer>}."',
        '"What is the smallest positive multiple of all of them: `lcm(" + ", ".join(str(v) for v in self._nums) + ")`? Answer \\\\boxed{<integer>}."',
    ),
}

_GCD_DESC = {
    "remainders": ("The agent runs Euclid's algorithm step by step, reporting each remainder until it reaches zero (at most {s} steps).",
                   "Division-form Euclid: every turn replaces the pair (a, b) by (b, a mod b); the agent names each remainder."),
    "subtractive": ("The subtractive form of Euclid's algorithm: the larger number is replaced by the difference, reported each turn.",
                    "Repeated subtraction until both numbers agree (at most {s} differences), reported one per turn."),
    "gcd": ("The agent computes the greatest common divisor of {c} multiples of a hidden common factor in one answer.",
            "One-shot gcd of {c} integers built from a shared divisor up to {g}."),
    "lcm": ("The agent computes the least common multiple of {c} small integers.",
            "One-shot lcm of {c} integers below {top}, via the gcd relation lcm(a, b) = a * b / gcd(a, b)."),
}


def _build_gcd(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variants = ["remainders", "gcd"] + (["subtractive"] if d < 0.7 else []) + (["lcm"] if d >= 0.3 else [])
    variant = pick(rng, variants)
    max_steps = max(1, min(spec.turn_limit, 2 + round(4 * d)))
    spread = 4 + int(12 * d)
    max_gcd = 3 + int(20 * d)
    count = 2 if d < 0.55 else 3
    constants = fill("\n    MAX_GCD = __G__\n    SPREAD = __S__\n" + (
        "    MAX_STEPS = __M__\n" if variant in ("remainders", "subtractive") else "    COUNT = __C__\n"),
        G=max_gcd, S=spread, M=max_steps, C=count)
    obs = "\n    def _obs(self):\n        return " + pick(rng, _GCD_OBS[variant]) + "\n"
    multi = variant in ("remainders", "subtractive")
    body, scheme, scheme_desc = _assemble(
        spec, constants=constants, make=_GCD_MAKE[variant], obs=obs, answer="int", multi=multi,
        max_turns=min(spec.turn_limit, max_steps + 1 if multi else 3),
    )
    desc = pick(rng, _GCD_DESC[variant]).format(s=max_steps, c=count, g=max_gcd, top=4 * spread + 4)
    return Built(body=body, doc=pick(rng, ("Greatest common divisors by Euclid's method.", "Divisibility: " + variant + ".",
                                           "Number theory drill (" + variant + ").")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}")


def _solve_gcd(obs: str) -> str | None:
    pair = list(re.finditer(r"(Current pair|Pair to subtract): \((\d+), (\d+)\)", obs))
    if pair:
        kind, a, b = pair[-1].group(1), int(pair[-1].group(2)), int(pair[-1].group(3))
        if b == 0:
            return None
        return str(a - b) if kind == "Pair to subtract" else str(a % b)
    for span in reversed(backticked(obs)):
        m = re.fullmatch(r"(gcd|lcm)\(([\d, ]+)\)", span.strip())
        if m:
            nums = [int(v) for v in m.group(2).split(",")]
            if m.group(1) == "gcd":
                return str(math.gcd(*nums))
            out = 1
            for v in nums:
                out = out * v // math.gcd(out, v)
            return str(out)
    return None


GCD_STEPS = Family(
    "gcd_steps", "math", "Euclid's algorithm", _build_gcd, _solve_gcd, lambda r, o, c: off_by(r, c),
    "Euclid: replace (a, b) by (b, a mod b) until the remainder is 0 (subtractive form: larger minus smaller); "
    "gcd divides every number, lcm(a, b) = a * b / gcd(a, b). Answer \\boxed{<integer>}.",
    0.05, ("Euclid", "Remainder", "Divisor", "CommonFactor", "Gcd"),
)


# ----------------------------------------------------------------------------------------------
# linear equations

_LIN_MAKE = {
    "one_step": r'''
    def _make(self, rng):
        x = rng.randint(-self.RANGE, self.RANGE)
        a = rng.choice([k for k in range(-self.COEF, self.COEF + 1) if k not in (0, 1)])
        b = rng.randint(-self.RANGE, self.RANGE)
        self._eqs = [self._term(a, "x") + self._const(b) + " = " + str(a * x + b)]
        self._ask = ["x"]
        self.__ANS__ = [x]
''',
    "both_sides": r'''
    def _make(self, rng):
        x = rng.randint(-self.RANGE, self.RANGE)
        a, c = rng.sample([k for k in range(-self.COEF, self.COEF + 1) if k != 0], 2)
        b = rng.randint(-self.RANGE, self.RANGE)
        d = a * x + b - c * x
        self._eqs = [self._term(a, "x") + self._const(b) + " = " + self._term(c, "x") + self._const(d)]
        self._ask = ["x"]
        self.__ANS__ = [x]
''',
    "bracket": r'''
    def _make(self, rng):
        x = rng.randint(-self.RANGE, self.RANGE)
        a = rng.choice([k for k in range(2, self.COEF + 2)])
        b = rng.randint(-self.RANGE, self.RANGE)
        inner = "x + " + str(b) if b >= 0 else "x - " + str(-b)
        self._eqs = [str(a) + "(" + inner + ") = " + str(a * (x + b))]
        self._ask = ["x"]
        self.__ANS__ = [x]
''',
    "system": r'''
    def _make(self, rng):
        while True:
            x, y = rng.randint(-self.RANGE, self.RANGE), rng.randint(-self.RANGE, self.RANGE)
            a, b, c, d = [rng.choice([k for k in range(-self.COEF, self.COEF + 1) if k != 0]) for _ in range(4)]
            if a * d - b * c != 0:
                break
        self._eqs = [self._term(a, "x") + self._term(b, "y", True) + " = " + str(a * x + b * y),
                     self._term(c, "x") + self._term(d, "y", True) + " = " + str(c * x + d * y)]
        self._ask = ["x", "y"]
        self.__ANS__ = [x, y]
''',
}

_LIN_HELPERS = r'''
    @staticmethod
    def _term(k, var, signed=False):
        """A coefficient and variable as written: 3x, -x, + 2y."""
        mag = "" if abs(k) == 1 else str(abs(k))
        if signed:
            return (" + " if k > 0 else " - ") + mag + var
        return ("-" if k < 0 else "") + mag + var

    @staticmethod
    def _const(b):
        return "" if b == 0 else (" + " + str(b) if b > 0 else " - " + str(-b))
'''

_LIN_OBS = (
    '"Solve " + " and ".join("`" + e + "`" for e in self._eqs) + " for integers. Reply with the value of " + self._ask[self.__POS__] + " as \\\\boxed{<integer>}."',
    '"Equations: " + "; ".join("`" + e + "`" for e in self._eqs) + ". Give the value of " + self._ask[self.__POS__] + " as \\\\boxed{<integer>}."',
    '"Balance the equation" + ("s " if len(self._eqs) > 1 else " ") + ", ".join("`" + e + "`" for e in self._eqs) + ": what is the value of " + self._ask[self.__POS__] + "? Answer \\\\boxed{<integer>}."',
)

_LIN_DESC = {
    "one_step": ("The agent isolates x in a two-step linear equation with coefficients up to {c} in size.",
                 "Undo an addition and a multiplication to solve a*x + b = c (|x| <= {r})."),
    "both_sides": ("x appears on both sides: collect the x terms, then divide (coefficients up to {c}).",
                   "A linear equation with unknowns on both sides and integer solution |x| <= {r}."),
    "bracket": ("The agent expands or divides out a bracket, a(x + b) = c, to find x.",
                "A bracketed linear equation: divide by the factor, then subtract (|x| <= {r})."),
    "system": ("A system of two linear equations: the agent reports x, then y, one per turn.",
               "Elimination or substitution on two equations in x and y (coefficients up to {c})."),
}


def _build_linear(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variants = ["one_step"] + (["bracket"] if d >= 0.2 else []) + (["both_sides"] if d >= 0.35 else []) + (
        ["system"] if d >= 0.55 and spec.turn_limit >= 2 else [])
    variant = pick(rng, variants)
    constants = fill("\n    RANGE = __R__\n    COEF = __C__\n", R=3 + int(12 * d), C=2 + int(6 * d))
    obs = "\n    def _obs(self):\n        return " + pick(rng, _LIN_OBS) + "\n"
    multi = variant == "system"
    body, scheme, scheme_desc = _assemble(
        spec, constants=constants, make=_LIN_MAKE[variant], obs=obs, answer="int", multi=multi,
        max_turns=min(spec.turn_limit, 4), extra=_LIN_HELPERS,
    )
    desc = pick(rng, _LIN_DESC[variant]).format(c=2 + int(6 * d), r=3 + int(12 * d))
    return Built(body=body, doc=pick(rng, ("Solve linear equations over the integers.", "Linear algebra basics: " + variant + ".",
                                           "Find the unknown (" + variant.replace("_", " ") + ").")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}")


def _linear_side(text: str) -> str:
    t = re.sub(r"(\d)\s*([xy(])", r"\1*\2", text.strip())
    return t


def _solve_linear(obs: str) -> str | None:
    eqs = [s for s in backticked(obs) if "=" in s]
    ask = re.findall(r"value of ([xy])\b", obs)
    if not eqs or not ask:
        return None
    try:
        fns = []
        for e in eqs:
            lhs, rhs = e.split("=", 1)
            expr = f"({_linear_side(lhs)}) - ({_linear_side(rhs)})"
            f0 = eval_expr(expr, {"x": 0, "y": 0})
            fx = eval_expr(expr, {"x": 1, "y": 0})
            fy = eval_expr(expr, {"x": 0, "y": 1})
            fns.append((float(fx) - float(f0), float(fy) - float(f0), -float(f0)))  # type: ignore[arg-type]
    except (EvalError, ValueError):
        return None
    if len(fns) == 1:
        a, _, c = fns[0]
        return None if a == 0 else str(round(c / a))
    (a, b, e), (c, d, f) = fns[:2]
    det = a * d - b * c
    if det == 0:
        return None
    x, y = (e * d - b * f) / det, (a * f - e * c) / det
    return str(round(x if ask[-1] == "x" else y))


LINEAR_EQUATION = Family(
    "linear_equation", "math", "Linear equations", _build_linear, _solve_linear, lambda r, o, c: off_by(r, c),
    "Do the same operation to both sides: move the x terms to one side and the constants to the other, "
    "then divide by the coefficient; for two equations eliminate one variable first. Answer \\boxed{<integer>}.",
    0.0, ("LinearEquation", "Balance", "Unknown", "Solver", "Elimination"),
)
