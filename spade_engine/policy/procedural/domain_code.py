"""Code skill families of the procedural designer (a SIMULATION, not an LLM): program tracing,
sorting by swaps, stack and queue machines and string manipulation, each with rule variants,
difficulty knobs, reward schemes and wordings, plus the observation solvers of the simulated
agent (the tracer interprets the program text shown in the observation with a small AST walker;
nothing is executed)."""

from __future__ import annotations

import ast
import random
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
    step_reward,
)
from .domain_logic import vocabulary

__all__ = ["CODE_TRACE", "SORT_SWAPS", "STACK_MACHINE", "STRING_OPS", "trace_program"]


def _chain_body(spec: Spec, *, constants: str, make: str, obs: str, answer: str, multi: bool, max_turns: int,
                extra: str = "") -> tuple[str, str, str]:
    rng = spec.rng
    names = state_names(rng)
    scheme, scheme_desc, score = reward_scheme(rng, multi_step=multi)
    body = constants + make + obs + extra + score + chain_methods(rng, answer=answer, scheme=scheme, max_turns=max_turns, names=names)
    return fill(body, **names), scheme, scheme_desc


# ----------------------------------------------------------------------------------------------
# code tracing

_TRACE_MAKE = {
    "for_ops": r'''
    def _make(self, rng):
        x = rng.randint(1, 9)
        ops = []
        for _ in range(self.N_OPS):
            op = rng.choice(["+", "-", "*"])
            ops.append((op, rng.randint(2, 3) if op == "*" else rng.randint(1, 9)))
        limit, cut = rng.randint(20, 60), rng.randint(5, 15)
        lines = [self.VAR + " = " + str(x), "for i in range(" + str(self.ITERATIONS) + "):"]
        lines += ["    " + self.VAR + " = " + self.VAR + " " + op + " " + str(k) for op, k in ops]
        if self.BRANCH:
            lines += ["    if " + self.VAR + " > " + str(limit) + ":", "        " + self.VAR + " = " + self.VAR + " - " + str(cut)]
        self._program = "\n".join(lines)
        for _ in range(self.ITERATIONS):
            for op, k in ops:
                x = x + k if op == "+" else (x - k if op == "-" else x * k)
            if self.BRANCH and x > limit:
                x = x - cut
            self.__ANS__.append(x)
''',
    "while_loop": r'''
    def _make(self, rng):
        start, mult, add = rng.randint(1, 5), rng.choice(self.MULTS), rng.randint(1, 5)
        values, x = [], start
        for _ in range(self.ITERATIONS):
            x = x * mult + add
            values.append(x)
        limit = (values[-2] if len(values) > 1 else start) + 1
        v = self.VAR
        self._program = "\n".join([v + " = " + str(start), "while " + v + " < " + str(limit) + ":",
                                   "    " + v + " = " + v + " * " + str(mult) + " + " + str(add)])
        self.__ANS__ = values
''',
    "pair_update": r'''
    def _make(self, rng):
        a, b, m = rng.randint(0, 5), rng.randint(1, 5), rng.choice(self.MULTS)
        self._program = "\n".join(["a, b = " + str(a) + ", " + str(b), "for i in range(" + str(self.ITERATIONS) + "):",
                                   "    a, b = b, a + b * " + str(m)])
        for _ in range(self.ITERATIONS):
            a, b = b, a + b * m
            self.__ANS__.append(a if self.VAR == "a" else b)
''',
    "list_scan": r'''
    def _make(self, rng):
        values = [rng.randint(1, 20) for _ in range(self.ITERATIONS)]
        m, c = rng.randint(2, 4), rng.randint(1, 3)
        v = self.VAR
        self._program = "\n".join([v + " = 0", "for item in " + str(values) + ":", "    if item % " + str(m) + " == 0:",
                                   "        " + v + " = " + v + " + item", "    else:", "        " + v + " = " + v + " - " + str(c)])
        total = 0
        for item in values:
            total = total + item if item % m == 0 else total - c
            self.__ANS__.append(total)
''',
    "collatz": r'''
    def _make(self, rng):
        while True:
            start = rng.randint(3, 40)
            x, values = start, []
            while x != 1 and len(values) < self.ITERATIONS:
                x = x // 2 if x % 2 == 0 else 3 * x + 1
                values.append(x)
            if len(values) == self.ITERATIONS:
                break
        v = self.VAR
        self._program = "\n".join([v + " = " + str(start), "while " + v + " != 1:", "    if " + v + " % 2 == 0:",
                                   "        " + v + " = " + v + " // 2", "    else:", "        " + v + " = 3 * " + v + " + 1"])
        self.__ANS__ = values
''',
    "digits": r'''
    def _make(self, rng):
        number = rng.randint(10 ** (self.ITERATIONS - 1), 10 ** self.ITERATIONS - 1)
        weight = rng.choice(self.MULTS)
        v = self.VAR
        self._program = "\n".join(["rest = " + str(number), v + " = 0", "while rest > 0:",
                                   "    " + v + " = " + v + " * " + str(weight) + " + rest % 10", "    rest = rest // 10"])
        rest, acc = number, 0
        while rest > 0:
            acc = acc * weight + rest % 10
            rest = rest // 10
            self.__ANS__.append(acc)
''',
    "index_branch": r'''
    def _make(self, rng):
        x, k, m = rng.randint(1, 9), rng.randint(1, 9), rng.choice(self.MULTS)
        v = self.VAR
        self._program = "\n".join([v + " = " + str(x), "for i in range(" + str(self.ITERATIONS) + "):", "    if i % 2 == 0:",
                                   "        " + v + " = " + v + " + " + str(k), "    else:", "        " + v + " = " + v + " * " + str(m)])
        for i in range(self.ITERATIONS):
            x = x + k if i % 2 == 0 else x * m
            self.__ANS__.append(x)
''',
    "loop_index": r'''
    def _make(self, rng):
        x, k = rng.randint(1, 9), rng.randint(2, 5)
        v = self.VAR
        double = rng.random() < 0.5
        body = v + " = " + v + " * 2 - i" if double else v + " = " + v + " + i * " + str(k)
        self._program = "\n".join([v + " = " + str(x), "for i in range(" + str(self.ITERATIONS) + "):", "    " + body])
        for i in range(self.ITERATIONS):
            x = x * 2 - i if double else x + i * k
            self.__ANS__.append(x)
''',
}

_TRACE_OBS = (
    '"Trace this program:\\n--- program ---\\n" + self._program + "\\n--- end ---\\nWhat is the value of " + self.VAR + " after iteration " + str(self.__POS__ + 1) + "? Reply with \\\\boxed{<integer>}."',
    '"Read the code:\\n--- program ---\\n" + self._program + "\\n--- end ---\\nGive the value of " + self.VAR + " at the end of loop round " + str(self.__POS__ + 1) + " as \\\\boxed{<integer>}."',
    '"Simulate:\\n--- program ---\\n" + self._program + "\\n--- end ---\\nWhat is the value of " + self.VAR + " after pass " + str(self.__POS__ + 1) + " of the loop? Answer \\\\boxed{<integer>}."',
)

_TRACE_DESC = {
    "for_ops": "The agent traces a counted loop of {ops} update(s){branch} and reports {var} after each of {it} iterations.",
    "while_loop": "The agent traces a while loop that grows {var} geometrically until a bound, reporting {var} after each of its {it} rounds.",
    "pair_update": "Simultaneous assignment: a, b = b, f(a, b) runs {it} times; the agent reports {var} after each round.",
    "list_scan": "A scan over {it} list items with a divisibility branch; the agent reports the accumulator {var} after each item.",
    "loop_index": "A loop whose update uses its own index; the agent reports {var} after each of {it} iterations.",
    "collatz": "The Collatz map (halve if even, else 3n + 1) in a while loop; the agent reports {var} after each of the first {it} rounds.",
    "digits": "A while loop peels the decimal digits of a {it}-digit number into an accumulator {var}, reported after each digit.",
    "index_branch": "A counted loop whose branch depends on the parity of its index; the agent reports {var} after each of {it} iterations.",
}


def _build_trace(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variants = ["for_ops", "loop_index", "list_scan", "index_branch"] + (["while_loop", "pair_update", "digits"] if d >= 0.3 else []) + (
        ["collatz"] if d >= 0.5 else [])
    variant = pick(rng, variants)
    iterations = max(1, min(spec.turn_limit, 1 + round(3 * d) + (1 if variant in ("list_scan", "digits") else 0)))
    var = pick(rng, ("a", "b")) if variant == "pair_update" else pick(rng, ("x", "acc", "total", "value", "n", "s"))
    constants = fill("\n    VAR = __V__\n    ITERATIONS = __I__\n", V=repr(var), I=iterations)
    n_ops, branch = 1 + round(2 * d), d >= 0.5
    if variant == "for_ops":
        constants += fill("    N_OPS = __N__\n    BRANCH = __B__\n", N=n_ops, B=branch)
    if variant in ("while_loop", "pair_update", "digits", "index_branch"):
        constants += fill("    MULTS = __M__\n", M=repr([2] if d < 0.6 else [2, 3]))
    obs = "\n    def _obs(self):\n        return " + pick(rng, _TRACE_OBS) + "\n"
    body, scheme, scheme_desc = _chain_body(spec, constants=constants, make=_TRACE_MAKE[variant], obs=obs, answer="int",
                                            multi=iterations > 1, max_turns=min(spec.turn_limit, iterations + 2))
    desc = _TRACE_DESC[variant].format(ops=n_ops, branch=" and an if-branch" if branch else "", var=var, it=iterations)
    return Built(body=body, doc=pick(rng, ("Trace a small program by hand.", "Program tracing: " + variant.replace("_", " ") + ".",
                                           "Predict what a loop computes.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}")


class _Tracer:
    """Interprets the tiny programs shown in observations (assignments, for over range or a list,
    while, if/else over integer expressions), recording one variable after each iteration of the
    first top-level loop."""

    def __init__(self, var: str, limit: int = 5000):
        self.env: dict[str, object] = {}
        self.var = var
        self.trace: list[object] = []
        self.budget = limit

    def value(self, node: ast.AST) -> object:
        return eval_expr(ast.unparse(node), self.env)

    def assign(self, target: ast.AST, value: object) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, tuple) and len(target.elts) == len(value):
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        else:
            raise EvalError("unsupported assignment")

    def iterable(self, node: ast.AST) -> list[object]:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            args = [int(self.value(a)) for a in node.args]  # type: ignore[call-overload]
            return list(range(*args))[:1000]
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e) for e in node.elts]
        raise EvalError("unsupported loop")

    def run(self, stmts: list[ast.stmt], top: bool = False) -> None:
        for st in stmts:
            self.budget -= 1
            if self.budget < 0:
                raise EvalError("program too long")
            record = top and not self.trace
            if isinstance(st, ast.Assign):
                if isinstance(st.value, ast.Tuple):
                    value: object = tuple(self.value(e) for e in st.value.elts)
                else:
                    value = self.value(st.value)
                for t in st.targets:
                    self.assign(t, value)
            elif isinstance(st, ast.AugAssign):
                op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}.get(type(st.op))
                if op is None or not isinstance(st.target, ast.Name):
                    raise EvalError("unsupported augmented assignment")
                self.env[st.target.id] = eval_expr(f"{st.target.id} {op} ({ast.unparse(st.value)})", self.env)
            elif isinstance(st, ast.For):
                for item in self.iterable(st.iter):
                    self.assign(st.target, item)
                    self.run(st.body)
                    if record:
                        self.trace.append(self.env.get(self.var))
            elif isinstance(st, ast.While):
                while self.value(st.test):
                    self.run(st.body)
                    if record:
                        self.trace.append(self.env.get(self.var))
            elif isinstance(st, ast.If):
                self.run(st.body if self.value(st.test) else st.orelse)
            else:
                raise EvalError(f"unsupported statement {type(st).__name__}")


def trace_program(program: str, var: str) -> list[object] | None:
    """Values of ``var`` after each iteration of the program's first top-level loop."""
    try:
        tracer = _Tracer(var)
        tracer.run(ast.parse(program).body, top=True)
    except (EvalError, SyntaxError, ValueError, TypeError):
        return None
    return tracer.trace


def _solve_trace(obs: str) -> str | None:
    prog = re.findall(r"--- program ---\n(.*?)\n--- end ---", obs, re.S)
    ask = list(re.finditer(r"value of (\w+) (?:after|at the end of) (?:iteration|loop round|pass) (\d+)", obs))
    if not prog or not ask:
        return None
    trace = trace_program(prog[-1], ask[-1].group(1))
    k = int(ask[-1].group(2))
    if not trace or k > len(trace) or not isinstance(trace[k - 1], int):
        return None
    return str(trace[k - 1])


CODE_TRACE = Family(
    "code_trace", "code", "Program tracing", _build_trace, _solve_trace, lambda r, o, c: off_by(r, c),
    "Simulate the loop body line by line with a table of variable values (simultaneous assignments use the old "
    "values, branches test the current value) and report the asked variable after the requested iteration as "
    "\\boxed{<integer>}.",
    -0.05, ("LoopTrace", "Trace", "Accumulator", "Interpreter", "DryRun"),
)


# ----------------------------------------------------------------------------------------------
# sorting by swaps

_SORT_MAKE = {
    "numbers": r'''
    def _make(self, rng):
        values = rng.sample(range(1, 10 * self.LENGTH), self.LENGTH)
        while values == self._goal(values):
            rng.shuffle(values)
        return values
''',
    "words": r'''
    def _make(self, rng):
        values = rng.sample(self.WORDS, self.LENGTH)
        while values == self._goal(values):
            rng.shuffle(values)
        return values
''',
    "adjacent": r'''
    def _make(self, rng):
        values = self._goal(rng.sample(range(1, 10 * self.LENGTH), self.LENGTH))
        while values == self._goal(values):
            for _ in range(self.SHUFFLES):
                i = rng.randrange(self.LENGTH - 1)
                values[i], values[i + 1] = values[i + 1], values[i]
        return values
''',
}

_SORT = r'''
    def _goal(self, values):
        return sorted(values, reverse=self.DESCENDING)

    def _inversions(self, values):
        goal = self._goal(values)
        rank = {v: goal.index(v) for v in values}
        return sum(1 for i in range(len(values)) for j in range(i + 1, len(values)) if rank[values[i]] > rank[values[j]])

    def _state(self):
        return (__GOAL__ + " Current list: [" + ", ".join(str(v) for v in self._list) + "]. Moves left: "
                + str(self._moves_left) + ".")

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self._list = self._make(rng)
        self._moves_left = (self._inversions(self._list) if self.ADJACENT else self.LENGTH - 1) + self.SLACK
        self.turn_count = 0
        return self.THEME + "\n" + self._state(), {}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.fullmatch(r"swap\s+(\d+)\s+(\d+)", _cmd(action).lower())
        n = len(self._list)
        if m:
            i, j = int(m.group(1)) - self.BASE, int(m.group(2)) - self.BASE
        if not m or min(i, j) < 0 or max(i, j) >= n or i == j or (self.ADJACENT and abs(i - j) != 1):
            return ("Invalid move. Use \\boxed{swap i j} with positions " + str(self.BASE) + " to " + str(n - 1 + self.BASE)
                    + ". " + self._state()), 0.0, False, truncated, {}
        self._list[i], self._list[j] = self._list[j], self._list[i]
        self._moves_left -= 1
        goal = self._goal(self._list)
        if self._list == goal:
            return "Sorted!", 1.0, True, False, {}
        if self._moves_left <= 0:
            placed = sum(1 for a, b in zip(self._list, goal) if a == b)
            return "Out of moves.", self._score(placed, n), True, False, {}
        return self._state(), __STEP__, False, truncated, {}

    def solution(self):
        work, out = list(self._list), []
        target = self._goal(work)
        if self.ADJACENT:
            changed = True
            while changed:
                changed = False
                for i in range(len(work) - 1):
                    if target.index(work[i]) > target.index(work[i + 1]):
                        work[i], work[i + 1] = work[i + 1], work[i]
                        out.append(_boxed("swap " + str(i + self.BASE) + " " + str(i + 1 + self.BASE)))
                        changed = True
                        break
            return out
        for i in range(len(work)):
            if work[i] != target[i]:
                j = work.index(target[i], i + 1)
                work[i], work[j] = work[j], work[i]
                out.append(_boxed("swap " + str(i + self.BASE) + " " + str(j + self.BASE)))
        return out
'''


def _build_sort(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variant = pick(rng, ("numbers", "words", "adjacent") if d >= 0.2 else ("numbers", "words"))
    descending = variant != "words" and rng.random() < 0.4
    base = rng.choice((0, 1))
    length = max(2, min(3 + round(3 * d), spec.turn_limit + 1))
    slack = 1 if d < 0.5 else 0
    shuffles = max(1, min(spec.turn_limit - slack, 2 + round(4 * d)))
    if variant == "adjacent":
        turns = min(spec.turn_limit, shuffles + slack + 2)
    else:
        turns = min(spec.turn_limit, length - 1 + slack + 2)
    order = "alphabetical order" if variant == "words" else ("descending order" if descending else "ascending order")
    rule = "only neighbouring positions may be swapped" if variant == "adjacent" else "any two positions may be swapped"
    goal = pick(rng, (f"Put the list into {order} with moves \\\\boxed{{swap i j}} ({base}-based positions; {rule}).",
                      f"Goal: {order}. Each move \\\\boxed{{swap i j}} exchanges two entries ({base}-based positions; {rule})."))
    constants = fill("\n    LENGTH = __L__\n    SLACK = __S__\n    DESCENDING = __D__\n    ADJACENT = __A__\n    BASE = __B__\n",
                     L=length, S=slack, D=descending, A=variant == "adjacent", B=base)
    if variant == "words":
        constants += fill("    WORDS = __W__\n", W=repr(vocabulary(spec, length + 3)))
    if variant == "adjacent":
        constants += fill("    SHUFFLES = __K__\n", K=shuffles)
    scheme, scheme_desc, score = reward_scheme(rng, multi_step=True)
    body = constants + _SORT_MAKE[variant] + score + fill(_SORT, GOAL=repr(goal.replace("\\\\", "\\")), MAX_TURNS=turns, STEP=step_reward(scheme))
    desc = (f"Planning: the agent sorts {length} {'words' if variant == 'words' else 'numbers'} into {order} with a budget of swap moves "
            f"({rule}; {base}-based positions).")
    return Built(body=body, doc=pick(rng, ("Reach the sorted state with few swaps.", "Sorting by swaps (" + variant + ").",
                                           "Plan a sequence of exchanges.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}")


def _sort_state(obs: str) -> tuple[list[object], list[object], bool, int] | None:
    m = list(re.finditer(r"Current list: \[([^\]]*)\]", obs))
    if not m:
        return None
    raw = [v.strip() for v in m[-1].group(1).split(",") if v.strip()]
    try:
        work: list[object] = [int(v) for v in raw]
    except ValueError:
        work = list(raw)
    descending = "descending order" in obs
    adjacent = "only neighbouring positions" in obs
    bm = re.search(r"\((\d)-based positions", obs)
    base = int(bm.group(1)) if bm else 0
    target = sorted(work, reverse=descending)  # type: ignore[type-var]
    return work, target, adjacent, base


def _solve_sort(obs: str) -> str | None:
    state = _sort_state(obs)
    if state is None:
        return None
    work, target, adjacent, base = state
    if adjacent:
        for i in range(len(work) - 1):
            if target.index(work[i]) > target.index(work[i + 1]):
                return f"swap {i + base} {i + 1 + base}"
        return None
    for i in range(len(work)):
        if work[i] != target[i]:
            j = work.index(target[i], i + 1)
            return f"swap {i + base} {j + base}"
    return None


def _wrong_sort(rng: random.Random, obs: str, correct: str | None) -> str:
    """A swap that makes no progress: it never adds a correctly placed entry (nor sorts)."""
    state = _sort_state(obs)
    if state is None:
        return "swap 0 1"
    work, target, adjacent, base = state
    n = len(work)
    pairs = [(i, i + 1) for i in range(n - 1)] if adjacent else [(i, j) for i in range(n) for j in range(i + 1, n)]

    def placed(values: list[object]) -> int:
        return sum(1 for a, b in zip(values, target) if a == b)

    now, bad = placed(work), []
    for i, j in pairs:
        after = list(work)
        after[i], after[j] = after[j], after[i]
        if placed(after) <= now and after != target:
            bad.append((i, j))
    i, j = rng.choice(bad or pairs or [(0, 1)])
    return f"swap {i + base} {j + base}"


SORT_SWAPS = Family(
    "sort_swaps", "code", "Sorting by swaps", _build_sort, _solve_sort, _wrong_sort,
    "Selection sort: swap the value that belongs in the first wrong position into it; with neighbour-only swaps, "
    "bubble sort: swap the first adjacent pair that is out of order. Mind whether positions are 0- or 1-based.",
    0.0, ("SwapSort", "SelectionSwap", "Ordering", "BubbleSort", "Arrange"),
)


# ----------------------------------------------------------------------------------------------
# stack and queue machines

_MACHINE_MAKE = {
    "stack": r'''
    def _make(self, rng):
        stack = [rng.randint(1, 9) for _ in range(2)]
        self._start = list(stack)
        self._program = []
        for _ in range(self.LENGTH):
            ops = ["push", "dup"] + (["add", "mul", "swap", "pop"] if len(stack) >= 2 else [])
            op = rng.choice([o for o in ops if o in self.OPS] or ["push"])
            if op == "push":
                k = rng.randint(1, 9)
                stack.append(k)
                self._program.append("push " + str(k))
                self.__ANS__.append(stack[-1])
                continue
            if op == "dup":
                stack.append(stack[-1])
            elif op == "pop":
                stack.pop()
            elif op == "swap":
                stack[-1], stack[-2] = stack[-2], stack[-1]
            else:
                b, a = stack.pop(), stack.pop()
                stack.append(a + b if op == "add" else a * b)
            self._program.append(op)
            self.__ANS__.append(stack[-1])
''',
    "queue": r'''
    def _make(self, rng):
        queue = [rng.randint(1, 9) for _ in range(3)]
        self._start = list(queue)
        self._program = []
        for _ in range(self.LENGTH):
            ops = ["enqueue", "rotate"] + (["dequeue"] if len(queue) >= 2 else [])
            op = rng.choice(ops)
            if op == "enqueue":
                k = rng.randint(1, 9)
                queue.append(k)
                self._program.append("enqueue " + str(k))
            elif op == "dequeue":
                queue.pop(0)
                self._program.append("dequeue")
            else:
                queue.append(queue.pop(0))
                self._program.append("rotate")
            self.__ANS__.append(queue[0])
''',
    "rpn": r'''
    def _make(self, rng):
        tokens, depth, ops = [], 0, 0
        while ops < self.LENGTH:
            if depth < 2 or (rng.random() < 0.4 and depth < 4):
                tokens.append(str(rng.randint(1, 9)))
                depth += 1
            else:
                tokens.append(rng.choice(self.OPS))
                depth -= 1
                ops += 1
        while depth > 1:
            tokens.append(rng.choice(self.OPS))
            depth -= 1
        stack = []
        for tok in tokens:
            if tok.isdigit():
                stack.append(int(tok))
                continue
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if tok == "+" else (a - b if tok == "-" else a * b))
            self.__ANS__.append(stack[-1])
        self._program = tokens
''',
}

_MACHINE_OBS = {
    "stack": ('"Stack machine. Initial stack (bottom to top): [" + ", ".join(str(v) for v in self._start) + "]. Program: " + "; ".join(self._program) + ". What is on top of the stack after instruction " + str(self.__POS__ + 1) + "? Reply \\\\boxed{<integer>}."',),
    "queue": ('"Queue machine. Initial queue (front to back): [" + ", ".join(str(v) for v in self._start) + "]. Operations: " + "; ".join(self._program) + ". Which value is at the front after operation " + str(self.__POS__ + 1) + "? Reply \\\\boxed{<integer>}."',),
    "rpn": ('"Evaluate the postfix expression `" + " ".join(self._program) + "` with a stack. What is on top of the stack after operator " + str(self.__POS__ + 1) + "? Reply \\\\boxed{<integer>}."',),
}


def _build_machine(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variant = pick(rng, ("stack", "queue", "rpn") if spec.turn_limit >= 4 else ("stack", "queue"))
    length = max(1, min(spec.turn_limit - (3 if variant == "rpn" else 0), 2 + round(3 * d) + (0 if variant == "rpn" else 1)))
    if variant == "stack":
        ops = ["push", "dup", "add", "pop"] + (["mul", "swap"] if d >= 0.4 else [])
    elif variant == "rpn":
        ops = ["+", "-"] + (["*"] if d >= 0.3 else [])
    else:
        ops = ["enqueue", "dequeue", "rotate"]
    constants = fill("\n    LENGTH = __L__\n    OPS = __O__\n", L=length, O=repr(ops))
    obs = "\n    def _obs(self):\n        return " + pick(rng, _MACHINE_OBS[variant]) + "\n"
    max_answers = length if variant != "rpn" else length + 3
    body, scheme, scheme_desc = _chain_body(spec, constants=constants, make=_MACHINE_MAKE[variant], obs=obs, answer="int",
                                            multi=True, max_turns=min(spec.turn_limit, max_answers + 1))
    what = {"stack": "a stack program of {n} instructions ({ops}); the agent reports the top after each",
            "queue": "a queue program of {n} operations (enqueue, dequeue, rotate); the agent reports the front after each",
            "rpn": "a postfix expression with {n}+ operators ({ops}); the agent reports the stack top after each operator"}[variant]
    desc = "The agent simulates " + what.format(n=length, ops=", ".join(ops)) + "."
    return Built(body=body, doc=pick(rng, ("Simulate a " + variant + " machine.", "Stacks and queues: " + variant + ".",
                                           "Data-structure tracing.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}")


def _solve_machine(obs: str) -> str | None:
    m = list(re.finditer(r"Initial (stack|queue) \([a-z ]+\): \[([\d, ]*)\]\. (?:Program|Operations): (.*?)\. (?:What|Which) .*? after (?:instruction|operation) (\d+)\?", obs))
    if m:
        kind, start, prog, k = m[-1].groups()
        items = [int(v) for v in start.split(",") if v.strip()]
        ops = [p.strip() for p in prog.split(";")]
        for op in ops[: int(k)]:
            parts = op.split()
            if kind == "stack":
                if parts[0] == "push":
                    items.append(int(parts[1]))
                elif parts[0] == "dup":
                    items.append(items[-1])
                elif parts[0] == "pop":
                    items.pop()
                elif parts[0] == "swap":
                    items[-1], items[-2] = items[-2], items[-1]
                else:
                    b, a = items.pop(), items.pop()
                    items.append(a + b if parts[0] == "add" else a * b)
            else:
                if parts[0] == "enqueue":
                    items.append(int(parts[1]))
                elif parts[0] == "dequeue":
                    items.pop(0)
                else:
                    items.append(items.pop(0))
        if not items:
            return None
        return str(items[-1] if kind == "stack" else items[0])
    spans = backticked(obs)
    k = re.search(r"after operator (\d+)", obs)
    if not spans or not k:
        return None
    stack: list[int] = []
    results = []
    for tok in spans[-1].split():
        if tok.isdigit():
            stack.append(int(tok))
            continue
        if len(stack) < 2:
            return None
        b, a = stack.pop(), stack.pop()
        stack.append(a + b if tok == "+" else (a - b if tok == "-" else a * b))
        results.append(stack[-1])
    i = int(k.group(1))
    return str(results[i - 1]) if 0 < i <= len(results) else None


STACK_MACHINE = Family(
    "stack_machine", "code", "Stacks and queues", _build_machine, _solve_machine, lambda r, o, c: off_by(r, c),
    "Keep the whole structure written out and apply the operations in order: a stack pushes and pops at the top "
    "(binary operations pop two and push the result), a queue adds at the back and removes at the front.",
    0.05, ("StackMachine", "QueueMachine", "Postfix", "Structure", "Machine"),
)


# ----------------------------------------------------------------------------------------------
# string manipulation

_STRING_OPS = {
    "reverse": ("reverse", 'text[::-1]'),
    "rotl": ("rotate left by {k}", 'text[k % len(text):] + text[:k % len(text)]'),
    "rotr": ("rotate right by {k}", 'text[-(k % len(text)):] + text[:-(k % len(text))] if k % len(text) else text'),
    "shift": ("shift letters forward by {k}", '"".join(chr((ord(c) - 97 + k) % 26 + 97) for c in text)'),
    "halves": ("swap halves", 'text[len(text) // 2:] + text[: len(text) // 2]'),
}

_STRING_MAKE = {
    "pipeline": r'''
    def _apply(self, name, k, text):
        __APPLY__

    def _make(self, rng):
        text = rng.choice(self.WORDS)
        self._start = text
        self._steps = []
        for _ in range(self.LENGTH):
            name, k = rng.choice(self.OPS), rng.randint(1, 5)
            text = self._apply(name, k, text)
            self._steps.append((name, k))
            self.__ANS__.append(text)

    def _label(self, name, k):
        return __LABELS__[name].replace("{k}", str(k))
''',
    "decode": r'''
    def _make(self, rng):
        self._shift = rng.randint(1, 25)
        words = rng.sample(self.WORDS, self.LENGTH)
        self._coded = ["".join(chr((ord(c) - 97 + self._shift) % 26 + 97) for c in w) for w in words]
        self.__ANS__ = words
''',
    "count": r'''
    def _make(self, rng):
        self._phrases = []
        for _ in range(self.LENGTH):
            phrase = " ".join(rng.sample(self.WORDS, 3))
            letter = rng.choice(sorted(set(phrase.replace(" ", ""))))
            self._phrases.append((phrase, letter))
            self.__ANS__.append(phrase.count(letter))
''',
}

_STRING_OBS = {
    "pipeline": ('"Start with \'" + self._start + "\'. Operations: " + "; ".join(str(i + 1) + ") " + self._label(n, k) for i, (n, k) in enumerate(self._steps)) + ". Reply with the string after operation " + str(self.__POS__ + 1) + " as \\\\boxed{<text>}."',),
    "decode": ('"Each word was encoded by shifting its letters forward by " + str(self._shift) + " (a Caesar cipher). Decode word " + str(self.__POS__ + 1) + " of " + str(len(self._coded)) + ": \'" + self._coded[self.__POS__] + "\'. Reply \\\\boxed{<word>}."',),
    "count": ('"In the phrase \'" + self._phrases[self.__POS__][0] + "\', how many times does the letter \'" + self._phrases[self.__POS__][1] + "\' occur? Reply \\\\boxed{<integer>}."',),
}


def _build_string(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variant = pick(rng, ("pipeline", "pipeline", "decode", "count"))
    length = max(1, min(spec.turn_limit, 1 + round(3 * d)))
    words = [w for w in vocabulary(spec, 10) if w.isalpha() and w.islower()]
    constants = fill("\n    WORDS = __W__\n    LENGTH = __L__\n", W=repr(words), L=length)
    make = _STRING_MAKE[variant]
    if variant == "pipeline":
        names = ["reverse", "rotl", "shift"] + (["rotr", "halves"] if d >= 0.4 else [])
        ops = sorted(rng.sample(names, max(2, len(names) - rng.randint(0, 1))))
        constants += fill("    OPS = __O__\n", O=repr(ops))
        branches = "\n        ".join(f'if name == "{n}":\n            return {_STRING_OPS[n][1]}' for n in ops)
        make = make.replace("__APPLY__", branches + "\n        return text").replace(
            "__LABELS__", repr({n: _STRING_OPS[n][0] for n in ops}))
    obs = "\n    def _obs(self):\n        return " + pick(rng, _STRING_OBS[variant]) + "\n"
    body, scheme, scheme_desc = _chain_body(spec, constants=constants, make=make, obs=obs, answer="int" if variant == "count" else "text",
                                            multi=length > 1, max_turns=min(spec.turn_limit, length + 2))
    desc = {"pipeline": f"The agent applies {length} string operation(s) from {', '.join(_STRING_OPS[n][0].replace(' by {k}', '') for n in ops) if variant == 'pipeline' else ''} to a word, reporting the string after each.",
            "decode": f"Caesar decoding: {length} word(s) shifted by a common key are decoded one per turn.",
            "count": f"Letter counting in {length} phrase(s) built from the document's words."}[variant]
    return Built(body=body, doc=pick(rng, ("String manipulation by hand.", "Text transformations (" + variant + ").",
                                           "Work character by character.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{scheme}")


def _apply_string(label: str, text: str) -> str | None:
    m = re.fullmatch(r"(reverse|rotate left by|rotate right by|shift letters forward by|swap halves) ?(\d*)", label.strip())
    if not m or not text:
        return None
    name, k = m.group(1), int(m.group(2) or 0)
    if name == "reverse":
        return text[::-1]
    if name == "rotate left by":
        k %= len(text)
        return text[k:] + text[:k]
    if name == "rotate right by":
        k %= len(text)
        return text[-k:] + text[:-k] if k else text
    if name == "shift letters forward by":
        return "".join(chr((ord(c) - 97 + k) % 26 + 97) for c in text)
    return text[len(text) // 2:] + text[: len(text) // 2]


def _solve_string(obs: str) -> str | None:
    m = list(re.finditer(r"Start with '([a-z]+)'\. Operations: (.*?)\. Reply with the string after operation (\d+)", obs))
    if m:
        text: str | None = m[-1].group(1)
        steps = re.split(r";? ?\d+\) ", " " + m[-1].group(2))
        steps = [s.strip() for s in steps if s.strip()]
        for label in steps[: int(m[-1].group(3))]:
            text = _apply_string(label, text or "")
        return text
    m = list(re.finditer(r"forward by (\d+) \(a Caesar cipher\)\. Decode word \d+ of \d+: '([a-z]+)'", obs))
    if m:
        k = int(m[-1].group(1))
        return "".join(chr((ord(c) - 97 - k) % 26 + 97) for c in m[-1].group(2))
    m = list(re.finditer(r"In the phrase '([a-z ]+)', how many times does the letter '([a-z])' occur", obs))
    if m:
        return str(m[-1].group(1).count(m[-1].group(2)))
    return None


def _wrong_string(rng: random.Random, obs: str, correct: str | None) -> str:
    if correct and correct.isdigit():
        return off_by(rng, correct)
    if correct and len(correct) > 1:
        return correct[1:] + correct[0]
    return "unknown"


STRING_OPS = Family(
    "string_ops", "code", "String manipulation", _build_string, _solve_string, _wrong_string,
    "Write the string out letter by letter and apply one operation at a time; shifting moves each letter along "
    "the alphabet (z wraps to a), rotating moves letters from one end to the other.",
    0.0, ("StringOps", "TextTransform", "Cipher", "Letters", "WordPipeline"),
)
