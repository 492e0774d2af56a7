"""Loop tracer: predict the value a loop leaves in x when the starting value is found by inspection.

The program ``x = ?; for i in range(n): x = (x * a + b) % m`` is shown with a, b, m and n, but not
the start. ``inspect k`` shows x after k iterations (only for k < n - 1, twice at most);
``answer N`` gives x after the loop. The agent must continue the trace by hand. A correct
answer wins.
"""
# skill: code_trace
# difficulty: 0.6
import random
import re


class LoopTraceEnv:
    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.x0 = 0
        self.a = 2
        self.b = 1
        self.m = 97
        self.n = 5
        self.inspections = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.inspections = 0
        self.x0 = rng.randint(0, 50)
        self.a, self.b = rng.randint(2, 7), rng.randint(1, 20)
        self.m = rng.choice([31, 53, 97, 101])
        self.n = rng.randint(4, 7)
        return (
            f"x = ?\nfor i in range({self.n}):\n    x = (x * {self.a} + {self.b}) % {self.m}\n"
            f"The starting value is hidden. Actions: \\boxed{{inspect k}} shows x after k iterations "
            f"(0 <= k < {self.n - 1}, twice at most); \\boxed{{answer N}} gives x after the loop (ends the episode).",
            {},
        )

    def _x_after(self, k):
        x = self.x0
        for _ in range(k):
            x = (x * self.a + self.b) % self.m
        return x

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "inspect" and parts[1].isdigit():
            k = int(parts[1])
            if not 0 <= k < self.n - 1:
                return f"k must be between 0 and {self.n - 2}.", 0.0, False, truncated, {}
            if self.inspections >= 2:
                return "No inspections left: answer.", 0.0, False, truncated, {}
            self.inspections += 1
            return f"After {k} iteration(s), x = {self._x_after(k)}. Inspections left: {2 - self.inspections}.", 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0] == "answer":
            try:
                value = int(parts[1])
            except ValueError:
                return "Answer an integer, e.g. \\boxed{answer 17}.", 0.0, False, truncated, {}
            if value == self._x_after(self.n):
                return "Correct.", 1.0, True, False, {}
            return "Wrong value of x.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{inspect k} or \\boxed{answer N}.", 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{inspect {self.n - 2}}}", f"\\boxed{{answer {self._x_after(self.n)}}}"]
