"""Valid example (SPADE format): continue an arithmetic or geometric sequence."""
import random
import re


class SequenceEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        start = rng.randint(1, 9)
        if rng.random() < 0.5:
            d = rng.randint(2, 7)
            seq = [start + i * d for i in range(5)]
        else:
            r = rng.randint(2, 3)
            seq = [start * r**i for i in range(5)]
        self.answer = seq[-1]
        return "Next number: " + ", ".join(map(str, seq[:-1])) + ", ? Answer as \\boxed{n}.", {}

    def step(self, action):
        m = re.search(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        ok = bool(m) and int(m.group(1)) == self.answer
        return ("Right." if ok else "Wrong."), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return [f"\\boxed{{{self.answer}}}"]
