"""Register machine: trace a short program over two registers; the machine can be single-stepped.

The program (five to seven instructions over registers A and B) is listed, but the starting
values are hidden. ``run k`` executes the next k instructions and shows the registers afterwards
(each run costs a turn); ``final A B`` predicts the registers after the whole program. Tracing
it on paper from a revealed state saves turns. A correct prediction wins; a wrong one ends the
episode with a small partial reward if one register was right.
"""
# skill: code_trace
# difficulty: 0.5
import random
import re


class RegisterMachineEnv:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.program = []
        self.pc = 0
        self.regs = {"a": 0, "b": 0}
        self.start = {"a": 0, "b": 0}
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.pc = 0
        self.start = {"a": rng.randint(1, 9), "b": rng.randint(1, 9)}
        self.regs = dict(self.start)
        ops = []
        for _ in range(rng.randint(5, 7)):
            kind = rng.choice(["add", "mul", "swap", "addr", "sub"])
            if kind == "swap":
                ops.append(("swap",))
            elif kind == "addr":
                ops.append(("addr", rng.choice("ab")))
            else:
                ops.append((kind, rng.choice("ab"), rng.randint(2, 5)))
        self.program = ops
        return (
            "Program (registers A and B, starting values hidden):\n" + self._listing() + "\n"
            "Actions: \\boxed{run k} executes the next k instructions and shows A and B; "
            "\\boxed{final A B} predicts the registers after the last instruction (ends the episode). "
            "One action per turn.",
            {},
        )

    def _listing(self):
        lines = []
        for i, op in enumerate(self.program, 1):
            if op[0] == "swap":
                text = "swap A and B"
            elif op[0] == "addr":
                other = "B" if op[1] == "a" else "A"
                text = f"{op[1].upper()} = {op[1].upper()} + {other}"
            elif op[0] == "add":
                text = f"{op[1].upper()} = {op[1].upper()} + {op[2]}"
            elif op[0] == "sub":
                text = f"{op[1].upper()} = {op[1].upper()} - {op[2]}"
            else:
                text = f"{op[1].upper()} = {op[1].upper()} * {op[2]}"
            lines.append(f"  {i}. {text}")
        return "\n".join(lines)

    @staticmethod
    def _apply(regs, op):
        if op[0] == "swap":
            regs["a"], regs["b"] = regs["b"], regs["a"]
        elif op[0] == "addr":
            other = "b" if op[1] == "a" else "a"
            regs[op[1]] += regs[other]
        elif op[0] == "add":
            regs[op[1]] += op[2]
        elif op[0] == "sub":
            regs[op[1]] -= op[2]
        else:
            regs[op[1]] *= op[2]

    def _final(self):
        regs = dict(self.start)
        for op in self.program:
            self._apply(regs, op)
        return regs

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "run" and parts[1].isdigit():
            k = int(parts[1])
            if k < 1:
                return "Run at least one instruction.", 0.0, False, truncated, {}
            for op in self.program[self.pc : self.pc + k]:
                self._apply(self.regs, op)
            self.pc = min(len(self.program), self.pc + k)
            return (
                f"After instruction {self.pc}: A = {self.regs['a']}, B = {self.regs['b']}. "
                f"Turn {self.turn_count}/{self.max_turns}.",
                0.0, False, truncated, {},
            )
        if len(parts) == 3 and parts[0] == "final":
            try:
                a, b = int(parts[1]), int(parts[2])
            except ValueError:
                return "Predict two integers, e.g. \\boxed{final 12 7}.", 0.0, False, truncated, {}
            final = self._final()
            if (a, b) == (final["a"], final["b"]):
                return "Correct: that is the final state.", 1.0, True, False, {}
            partial = 0.2 if a == final["a"] or b == final["b"] else 0.0
            return "Wrong final state.", partial, True, False, {}
        return "Unknown action. Use \\boxed{run k} or \\boxed{final A B}.", 0.0, False, truncated, {}

    def solution(self):
        final = self._final()
        return ["\\boxed{run 1}", f"\\boxed{{final {final['a']} {final['b']}}}"]
