"""Valid example (SPADE format): evaluate a small arithmetic expression in one turn."""
import random
import re


class ArithmeticEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        self.a, self.b, self.c = rng.randint(2, 20), rng.randint(2, 9), rng.randint(2, 9)
        self.answer = self.a + self.b * self.c
        self.done = False
        return f"Compute {self.a} + {self.b} * {self.c}. Answer as \\boxed{{number}}.", {"task": "arithmetic"}

    def step(self, action):
        m = re.search(r"\\boxed\{([^{}]*)\}", action)
        correct = bool(m) and m.group(1).strip() == str(self.answer)
        self.done = True
        return ("Correct." if correct else "Wrong."), (1.0 if correct else 0.0), True, False, {"correct": correct}

    def solution(self):
        return [f"\\boxed{{{self.answer}}}"]
