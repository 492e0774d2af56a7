"""Stack program: the instructions of a stack program are revealed one at a time; report the final top.

``next`` reveals the next instruction (push n, pop, add, mul, dup); when every instruction has
been seen, ``top N`` reports the value left on top of the stack. The agent has to keep the stack
in mind across turns. Each revealed instruction earns a small partial reward.
"""
# skill: code_trace
# difficulty: 0.55
import random
import re


class StackProgramEnv:
    def __init__(self, max_turns=14):
        self.max_turns = max_turns
        self.turn_count = 0
        self.program = []
        self.shown = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.shown = 0
        depth, ops = 0, []
        for _ in range(rng.randint(6, 9)):
            choices = ["push"] + (["dup"] if depth >= 1 else []) + (["add", "mul", "pop"] if depth >= 2 else [])
            op = rng.choice(choices)
            if op == "push":
                ops.append(("push", rng.randint(1, 9)))
                depth += 1
            elif op == "dup":
                ops.append(("dup",))
                depth += 1
            else:
                ops.append((op,))
                depth -= 1
        self.program = ops
        return (
            f"A stack program of {len(ops)} instructions starts with an empty stack. Instructions: push n, "
            "pop, dup (copy the top), add and mul (replace the top two values by their sum or product).\n"
            "Actions: \\boxed{next} reveals the next instruction; \\boxed{top N} reports the final top value "
            "(only after every instruction was revealed; ends the episode). One action per turn.",
            {},
        )

    def _run(self):
        stack = []
        for op in self.program:
            if op[0] == "push":
                stack.append(op[1])
            elif op[0] == "dup":
                stack.append(stack[-1])
            elif op[0] == "pop":
                stack.pop()
            elif op[0] == "add":
                b, a = stack.pop(), stack.pop()
                stack.append(a + b)
            else:
                b, a = stack.pop(), stack.pop()
                stack.append(a * b)
        return stack[-1]

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if parts == ["next"]:
            if self.shown >= len(self.program):
                return "Every instruction has been revealed: report the top.", 0.0, False, truncated, {}
            op = self.program[self.shown]
            self.shown += 1
            text = " ".join(str(x) for x in op)
            return f"Instruction {self.shown}/{len(self.program)}: {text}", 0.05, False, truncated, {}
        if len(parts) == 2 and parts[0] == "top":
            if self.shown < len(self.program):
                return f"Reveal all instructions first ({self.shown}/{len(self.program)} seen).", 0.0, False, truncated, {}
            try:
                value = int(parts[1])
            except ValueError:
                return "Report an integer, e.g. \\boxed{top 12}.", 0.0, False, truncated, {}
            if value == self._run():
                return "Correct top of the stack.", 1.0, True, False, {}
            return "Wrong top value.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{next} or \\boxed{top N}.", 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{next}"] * len(self.program) + [f"\\boxed{{top {self._run()}}}"]
