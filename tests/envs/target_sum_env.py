"""Valid example (SPADE format, multi-turn): reach a target sum exactly with steps of 1-3."""
import random
import re


class TargetSumEnv:
    max_turns = 6

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.target = rng.randint(5, 12)
        self.total = 0
        self.turns = 0
        return (f"Start at 0. Each turn add 1, 2 or 3 with \\boxed{{k}}. Reach exactly {self.target} "
                f"within {self.max_turns} turns; going over loses."), {}

    def step(self, action):
        self.turns += 1
        m = re.fullmatch(r"\s*\\boxed\{\s*([123])\s*\}\s*", action)
        if m:
            self.total += int(m.group(1))
        if self.total == self.target:
            return f"Total {self.total}. You hit the target!", 1.0, True, False, {"total": self.total}
        if self.total > self.target:
            return f"Total {self.total}. Over the target.", 0.0, True, False, {"total": self.total}
        note = "" if m else " (invalid move, turn lost)"
        truncated = self.turns >= self.max_turns
        return f"Total {self.total}{note}.", 0.0, False, truncated, {"total": self.total}

    def solution(self):
        left, out = self.target - self.total, []
        while left > 0:
            k = min(3, left)
            out.append(f"\\boxed{{{k}}}")
            left -= k
        return out
