"""Science skill families of the procedural designer (a SIMULATION, not an LLM): unit conversion
and physical formulas, each with variants, difficulty knobs, reward schemes and wordings, plus
the observation solvers of the simulated agent."""

from __future__ import annotations

import math
import random
from . import bounded_re as re

from .kit import Built, EvalError, Family, Spec, backticked, chain_methods, eval_expr, fill, pick, reward_scheme, state_names

__all__ = ["UNIT_TABLE", "UNIT_CONVERT", "FORMULA", "LAWS"]

UNIT_TABLE: dict[str, dict[str, float]] = {
    "length": {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048, "mi": 1609.344},
    "time": {"s": 1.0, "min": 60.0, "h": 3600.0, "day": 86400.0},
    "mass": {"g": 0.001, "kg": 1.0, "lb": 0.45359237, "t": 1000.0},
    "volume": {"mL": 0.001, "L": 1.0, "m3": 1000.0, "gal": 3.785411784},
    "speed": {"mps": 1.0, "kmph": 1 / 3.6, "mph": 0.44704, "knot": 0.514444},
}

TEMPERATURE = ("C", "F", "K")


def _chain_body(spec: Spec, *, constants: str, make: str, obs: str, answer: str, multi: bool, max_turns: int,
                extra: str = "") -> tuple[str, str, str]:
    rng = spec.rng
    names = state_names(rng)
    scheme, scheme_desc, score = reward_scheme(rng, multi_step=multi)
    body = constants + make + obs + extra + score + chain_methods(rng, answer=answer, scheme=scheme, max_turns=max_turns, names=names)
    return fill(body, **names), scheme, scheme_desc


# ----------------------------------------------------------------------------------------------
# unit conversion

_UNIT_MAKE = r'''
    def _convert(self, value, src, dst):
        if src in self.TEMPERATURE:
            celsius = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[src]
            return {"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[dst]
        for table in self.TABLE.values():
            if src in table and dst in table:
                return value * table[src] / table[dst]
        raise KeyError(src + " to " + dst)

    def _make(self, rng):
        self._tasks = []
        for _ in range(self.TASKS):
            kind = rng.choice(self.KINDS)
            units = list(self.TEMPERATURE) if kind == "temperature" else sorted(self.TABLE[kind])
            src, dst = rng.sample(units, 2)
            value = round(rng.uniform(self.LOW, self.HIGH), 1)
            self._tasks.append((value, src, dst))
            self.__ANS__.append(round(self._convert(value, src, dst), self.PLACES))
'''

_UNIT_OBS = (
    '"Convert " + str(t[0]) + " " + t[1] + " to " + t[2] + ". Reply with \\\\boxed{<number>} rounded to " + str(self.PLACES) + " decimal places. (Task " + str(self.__POS__ + 1) + " of " + str(len(self._tasks)) + ")"',
    '"How many " + t[2] + " are in " + str(t[0]) + " " + t[1] + "? Round to " + str(self.PLACES) + " decimal places and reply \\\\boxed{<number>}. (Task " + str(self.__POS__ + 1) + " of " + str(len(self._tasks)) + ")"',
    '"Express " + str(t[0]) + " " + t[1] + " in " + t[2] + " (" + str(self.PLACES) + " decimal places) as \\\\boxed{<number>}. (Task " + str(self.__POS__ + 1) + " of " + str(len(self._tasks)) + ")"',
)


def _build_units(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    pool = ["length", "time", "mass", "volume", "speed", "temperature"]
    n_kinds = 1 + round(3 * d)
    kinds = sorted(rng.sample(pool[:3] if d < 0.3 else pool, n_kinds))
    table = {k: UNIT_TABLE[k] for k in kinds if k in UNIT_TABLE}
    tasks = max(1, min(spec.turn_limit, 1 + round(2 * d) + rng.randint(0, 1)))
    places = 3 if d >= 0.5 or rng.random() < 0.5 else 2
    low, high = (1, 100) if d < 0.4 else (1, 500)
    constants = fill("\n    TABLE = __T__\n    TEMPERATURE = __C__\n    KINDS = __K__\n    TASKS = __N__\n    PLACES = __P__\n"
                     "    TOLERANCE = __TOL__\n    LOW, HIGH = __L__, __H__\n",
                     T=repr(table), C=repr(TEMPERATURE if "temperature" in kinds else ()), K=repr(kinds), N=tasks, P=places,
                     TOL=repr(1.5 * 10 ** -places), L=low, H=high)
    obs = "\n    def _obs(self):\n        t = self._tasks[self.__POS__]\n        return " + pick(rng, _UNIT_OBS) + "\n"
    body, scheme, scheme_desc = _chain_body(spec, constants=constants, make=_UNIT_MAKE, obs=obs, answer="float", multi=tasks > 1,
                                            max_turns=min(spec.turn_limit, tasks + 2))
    desc = pick(rng, (
        "The agent converts {n} quantities between units of {k}, rounding to {p} decimal places.",
        "Scientific quantities: {n} conversion task(s) over {k} (through the base unit; temperatures are affine), {p} decimals.",
    )).format(n=tasks, k=", ".join(kinds), p=places)
    return Built(body=body, doc=pick(rng, ("Convert physical quantities between units.", "Unit conversion: " + ", ".join(kinds) + ".",
                                           "Dimensional bookkeeping.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{'+'.join(kinds)}/{scheme}")


def _convert(value: float, src: str, dst: str) -> float | None:
    if src in TEMPERATURE and dst in TEMPERATURE:
        c = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[src]
        return {"C": c, "F": c * 9 / 5 + 32, "K": c + 273.15}[dst]
    for table in UNIT_TABLE.values():
        if src in table and dst in table:
            return value * table[src] / table[dst]
    return None


def _solve_units(obs: str) -> str | None:
    m = re.search(r"Convert (-?[\d.]+) (\w+) to (\w+)\.", obs)
    if m:
        value, src, dst = float(m.group(1)), m.group(2), m.group(3)
    else:
        m = re.search(r"How many (\w+) are in (-?[\d.]+) (\w+)\?", obs) or re.search(r"Express (-?[\d.]+) (\w+) in (\w+) \(", obs)
        if not m:
            return None
        if m.group(0).startswith("How"):
            dst, value, src = m.group(1), float(m.group(2)), m.group(3)
        else:
            value, src, dst = float(m.group(1)), m.group(2), m.group(3)
    places = re.search(r"(\d) decimal places", obs)
    out = _convert(value, src, dst)
    return None if out is None else str(round(out, int(places.group(1)) if places else 3))


def _wrong_unit(rng: random.Random, obs: str, correct: str | None) -> str:
    try:
        return str(round(float(correct or 1.0) * rng.choice([10.0, 0.1, 1.1]) + 1, 3))
    except ValueError:
        return "1.0"


UNIT_CONVERT = Family(
    "unit_convert", "science", "Unit conversion", _build_units, _solve_units, _wrong_unit,
    "Convert through the base unit (metre, second, kilogram, litre, metre per second): multiply by the source "
    "factor, divide by the target factor; temperatures: go through Celsius (F = C * 9/5 + 32, K = C + 273.15). "
    "Round as asked and reply \\boxed{<number>}.",
    0.0, ("UnitConversion", "Convert", "Quantity", "Measure", "Dimension"),
)


# ----------------------------------------------------------------------------------------------
# physical formulas

#: law -> (name, formula, {variable: (unit, low, high)} of the independent inputs, dependent
#: variable, {variable: expression giving it from the others})
LAWS: dict[str, tuple[str, str, dict[str, tuple[str, float, float]], str, dict[str, str]]] = {
    "ohm": ("Ohm's law", "V = I * R", {"I": ("A", 0.1, 5.0), "R": ("ohm", 1.0, 100.0)}, "V",
            {"V": "I * R", "I": "V / R", "R": "V / I"}),
    "power": ("Electric power", "P = V * I", {"V": ("V", 1.0, 240.0), "I": ("A", 0.1, 10.0)}, "P",
              {"P": "V * I", "V": "P / I", "I": "P / V"}),
    "density": ("Density", "rho = m / V", {"m": ("kg", 0.1, 50.0), "V": ("m3", 0.01, 2.0)}, "rho",
                {"rho": "m / V", "m": "rho * V", "V": "m / rho"}),
    "velocity": ("Uniform acceleration", "v = u + a * t", {"u": ("m/s", 0.5, 20.0), "a": ("m/s2", 0.5, 5.0), "t": ("s", 1.0, 20.0)},
                 "v", {"v": "u + a * t", "u": "v - a * t", "a": "(v - u) / t", "t": "(v - u) / a"}),
    "distance": ("Distance under acceleration", "s = u * t + 0.5 * a * t ** 2",
                 {"u": ("m/s", 0.5, 10.0), "a": ("m/s2", 0.5, 4.0), "t": ("s", 1.0, 10.0)}, "s",
                 {"s": "u * t + 0.5 * a * t ** 2", "u": "(s - 0.5 * a * t ** 2) / t", "a": "2 * (s - u * t) / t ** 2",
                  "t": "((u ** 2 + 2 * a * s) ** 0.5 - u) / a"}),
    "work": ("Work", "W = F * d", {"F": ("N", 1.0, 200.0), "d": ("m", 0.5, 50.0)}, "W", {"W": "F * d", "F": "W / d", "d": "W / F"}),
    "kinetic": ("Kinetic energy", "E = 0.5 * m * v ** 2", {"m": ("kg", 0.5, 100.0), "v": ("m/s", 0.5, 30.0)}, "E",
                {"E": "0.5 * m * v ** 2", "m": "2 * E / v ** 2", "v": "(2 * E / m) ** 0.5"}),
    "moles": ("Moles", "n = m / M", {"m": ("g", 1.0, 500.0), "M": ("g/mol", 1.0, 300.0)}, "n", {"n": "m / M", "m": "n * M", "M": "m / n"}),
    "speed": ("Average speed", "v = d / t", {"d": ("m", 10.0, 5000.0), "t": ("s", 2.0, 600.0)}, "v", {"v": "d / t", "d": "v * t", "t": "d / v"}),
}

_UNITS_OF = {"V": "V", "I": "A", "R": "ohm", "P": "W", "rho": "kg/m3", "m": "kg", "v": "m/s", "u": "m/s", "a": "m/s2", "t": "s",
             "s": "m", "W": "J", "F": "N", "d": "m", "E": "J", "n": "mol", "M": "g/mol"}

def law_units(law: str) -> dict[str, str]:
    """The unit of every variable of ``law``."""
    inputs = LAWS[law][2]
    return {v: inputs[v][0] if v in inputs else _UNITS_OF[v] for v in LAWS[law][4]}


_FORMULA_HEAD = r'''
    def _make(self, rng):
        self._tasks = []
        for _ in range(self.TASKS):
            law = rng.choice(sorted(self.LAWS))
            name, formula, inputs, dependent = self.LAWS[law]
            values = {k: round(rng.uniform(lo, hi), 2) for k, (unit, lo, hi) in sorted(inputs.items())}
            values[dependent] = round(self._solve(law, dependent, values), 3)
            unknown = rng.choice(sorted(values)) if self.INVERSE else dependent
            known = {k: v for k, v in values.items() if k != unknown}
            self._tasks.append((name, formula, known, unknown, law))
            self.__ANS__.append(round(self._solve(law, unknown, known), self.PLACES))
'''


def _solve_method(laws: list[str]) -> str:
    lines = ["\n    @staticmethod\n    def _solve(law, unknown, v):"]
    for law in laws:
        exprs = LAWS[law][4]
        lines.append(f'        if law == "{law}":')
        for var, expr in exprs.items():
            py = re.sub(r"\b([A-Za-z]\w*)\b", lambda m: f'v["{m.group(1)}"]', expr)
            lines.append(f'            if unknown == "{var}":\n                return {py}')
    lines.append('        raise KeyError(law + " " + unknown)\n')
    return "\n".join(lines)


_FORMULA_OBS = (
    '"Law: " + t[0] + " (`" + t[1] + "`). Known: " + ", ".join(k + " = " + str(v) + " " + self.UNITS[t[4]][k] for k, v in sorted(t[2].items())) + ". Find " + t[3] + " in " + self.UNITS[t[4]][t[3]] + ", rounded to " + str(self.PLACES) + " decimal places: \\\\boxed{<number>}."',
    '"Using " + t[0] + ", `" + t[1] + "`, with " + ", ".join(k + " = " + str(v) + " " + self.UNITS[t[4]][k] for k, v in sorted(t[2].items())) + ": compute " + t[3] + " (" + self.UNITS[t[4]][t[3]] + ") to " + str(self.PLACES) + " decimal places. Reply \\\\boxed{<number>}."',
)


def _build_formula(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    n_laws = 1 + round(2 * d) + rng.randint(0, 1)
    laws = sorted(rng.sample(sorted(LAWS), n_laws))
    inverse = d >= 0.35 and rng.random() < 0.8
    tasks = max(1, min(spec.turn_limit, 1 + round(2 * d)))
    places = 2 if rng.random() < 0.6 else 3
    table = {k: LAWS[k][:4] for k in laws}
    units = {k: law_units(k) for k in laws}
    constants = fill("\n    LAWS = __L__\n    UNITS = __U__\n    INVERSE = __I__\n    TASKS = __N__\n    PLACES = __P__\n    TOLERANCE = __T__\n",
                     L=repr(table), U=repr(units), I=inverse, N=tasks, P=places, T=repr(1.5 * 10 ** -places + 1e-6))
    obs = "\n    def _obs(self):\n        t = self._tasks[self.__POS__]\n        return " + pick(rng, _FORMULA_OBS) + "\n"
    body, scheme, scheme_desc = _chain_body(spec, constants=constants, make=_FORMULA_HEAD, obs=obs, answer="float", multi=tasks > 1,
                                            max_turns=min(spec.turn_limit, tasks + 2), extra=_solve_method(laws))
    names = ", ".join(LAWS[k][0] for k in laws)
    desc = (f"The agent applies {names} to {tasks} numeric task(s), "
            + ("solving for any variable (rearranging the formula)" if inverse else "computing the dependent quantity")
            + f", to {places} decimal places.")
    return Built(body=body, doc=pick(rng, ("Compute with physical laws.", "Formulas: " + names + ".", "Quantitative physics and chemistry.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{'+'.join(laws)}/{'inverse' if inverse else 'forward'}/{scheme}")


def _root(f, lo: float = 1e-6, hi: float = 1e7) -> float | None:
    """A root of ``f`` on the positive reals (log-spaced scan for a sign change, then bisection)."""
    pts = [lo * (hi / lo) ** (i / 160) for i in range(161)]
    vals = []
    for p in pts:
        try:
            vals.append(f(p))
        except (EvalError, ZeroDivisionError, OverflowError, ValueError):
            vals.append(None)
    for (a, fa), (b, fb) in zip(zip(pts, vals), zip(pts[1:], vals[1:])):
        if fa is None or fb is None:
            continue
        if fa == 0:
            return a
        if (fa < 0) != (fb < 0):
            for _ in range(90):
                mid = (a + b) / 2
                fm = f(mid)
                if (fm < 0) == (fa < 0):
                    a, fa = mid, fm
                else:
                    b = mid
            return (a + b) / 2
    return None


def _solve_formula(obs: str) -> str | None:
    spans = [s for s in backticked(obs) if "=" in s]
    m = re.search(r"(?:Known:|with) ((?:[A-Za-z]\w* = -?[\d.]+ [\w/]+(?:, )?)+)[.:] (?:Find|compute) ([A-Za-z]\w*)", obs)
    places = re.search(r"(\d) decimal places", obs)
    if not spans or not m:
        return None
    known = {k: float(v) for k, v in re.findall(r"([A-Za-z]\w*) = (-?[\d.]+)", m.group(1))}
    unknown = m.group(2)
    lhs, rhs = spans[-1].split("=", 1)

    def f(x: float) -> float:
        env = dict(known, **{unknown: x})
        return float(eval_expr(lhs, env)) - float(eval_expr(rhs, env))  # type: ignore[arg-type]

    x = _root(f)
    if x is None or not math.isfinite(x):
        return None
    return str(round(x, int(places.group(1)) if places else 2))


FORMULA = Family(
    "formula", "science", "Physical formulas", _build_formula, _solve_formula, _wrong_unit,
    "Write the law, substitute the known values with their units, rearrange for the unknown (divide out products, "
    "take square roots last) and round only the final result, as \\boxed{<number>}.",
    0.0, ("Formula", "PhysicsLaw", "Quantities", "Equation", "LabCalc"),
)
