"""Code breaker: a hidden three-digit code (distinct digits 0-5) is cracked from match counts.

Each ``try abc`` is answered with how many digits are right and in place, and how many are right
but misplaced (Mastermind feedback). Ten tries at most. A try with more digits in place than any
earlier try earns a small partial reward.
"""
# skill: number_search
# difficulty: 0.65
import random
import re


class CodeBreakerEnv:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.code = "012"
        self.best = 0
        self.history = []
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.code = "".join(rng.sample("012345", 3))
        self.best = 0
        self.history = []
        return (
            "Crack a hidden code of three distinct digits, each from 0 to 5. Every try is answered with "
            "'placed' (right digit, right place) and 'misplaced' (right digit, wrong place).\n"
            "Action: \\boxed{try abc}, e.g. \\boxed{try 014}. One try per turn.",
            {},
        )

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        guess = parts[1] if len(parts) == 2 and parts[0] == "try" else ""
        if len(guess) != 3 or any(ch not in "012345" for ch in guess) or len(set(guess)) != 3:
            return "Use \\boxed{try abc} with three distinct digits from 0 to 5.", 0.0, False, truncated, {}
        if guess == self.code:
            return f"{guess}: cracked!", 1.0, True, False, {}
        placed = sum(a == b for a, b in zip(guess, self.code))
        misplaced = len(set(guess) & set(self.code)) - placed
        reward = 0.05 if placed > self.best else 0.0
        self.best = max(self.best, placed)
        self.history.append(f"{guess}: {placed} placed, {misplaced} misplaced")
        return "; ".join(self.history[-6:]) + f". Turn {self.turn_count}/{self.max_turns}.", reward, False, truncated, {}

    def solution(self):
        first = "012" if "012" != self.code else "345"
        return [f"\\boxed{{try {first}}}", f"\\boxed{{try {self.code}}}"]
