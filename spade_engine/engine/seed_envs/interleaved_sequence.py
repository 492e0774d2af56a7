"""Interleaved sequence: odd and even positions follow two different hidden rules; predict the next two terms.

Odd positions grow by a fixed step, even positions are multiplied by a fixed factor. The first
six terms are shown one by one on request (``show i``). The agent answers with
``answer X Y`` for terms 7 and 8. Getting exactly one of them right ends with a partial reward
of 0.3; both right wins.
"""
# skill: sequence
# difficulty: 0.7
import random
import re


class InterleavedSequenceEnv:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.turn_count = 0
        self.terms = []
        self.seen = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.seen = set()
        a, step = rng.randint(1, 30), rng.randint(2, 9)
        b, factor = rng.randint(1, 5), rng.choice([2, 3])
        self.terms = []
        for n in range(8):
            k = n // 2
            self.terms.append(a + k * step if n % 2 == 0 else b * factor ** k)
        return (
            "A sequence interleaves two hidden rules: one for positions 1, 3, 5, ... and another for 2, 4, 6, ...\n"
            "Actions: \\boxed{show i} reveals term i (1 to 6); \\boxed{answer X Y} gives terms 7 and 8 "
            "(ends the episode). One action per turn.",
            {},
        )

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        known = ", ".join(f"#{i}={self.terms[i - 1]}" for i in sorted(self.seen)) or "none"
        status = f"Known: {known}. Turn {self.turn_count}/{self.max_turns}."
        if len(parts) == 2 and parts[0] == "show" and parts[1].isdigit():
            i = int(parts[1])
            if 1 <= i <= 6:
                self.seen.add(i)
                known = ", ".join(f"#{j}={self.terms[j - 1]}" for j in sorted(self.seen))
                return f"Term {i} is {self.terms[i - 1]}. Known: {known}. Turn {self.turn_count}/{self.max_turns}.", 0.0, False, truncated, {}
            return "Only terms 1 to 6 can be shown. " + status, 0.0, False, truncated, {}
        if len(parts) == 3 and parts[0] == "answer":
            try:
                x, y = int(parts[1]), int(parts[2])
            except ValueError:
                return "Answer two integers, e.g. \\boxed{answer 12 48}. " + status, 0.0, False, truncated, {}
            right = (x == self.terms[6]) + (y == self.terms[7])
            if right == 2:
                return "Both terms are right.", 1.0, True, False, {}
            if right == 1:
                return "One of the two terms is right.", 0.3, True, False, {}
            return "Neither term is right.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{show i} or \\boxed{answer X Y}. " + status, 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{show {i}}}" for i in range(1, 7)] + [f"\\boxed{{answer {self.terms[6]} {self.terms[7]}}}"]
