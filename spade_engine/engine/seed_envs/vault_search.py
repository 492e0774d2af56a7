"""Vault search: a hidden vault number is found by guesses answered with 'higher' or 'lower'.

The range and the guess budget are shown; the budget is just enough for a binary search
(ceil(log2(range)) + 1 guesses). Each guess that narrows the remaining interval earns a small
partial reward; guessing the number opens the vault.
"""
# skill: number_search
# difficulty: 0.4
import math
import random
import re


class VaultSearchEnv:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.turn_count = 0
        self.upper = 100
        self.secret = 1
        self.lo = 1
        self.hi = 100
        self.budget = 8
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.upper = rng.choice([64, 100, 200, 500])
        self.secret = rng.randint(1, self.upper)
        self.lo, self.hi = 1, self.upper
        self.budget = math.ceil(math.log2(self.upper)) + 1
        return (
            f"A vault number lies between 1 and {self.upper}. You have {self.budget} guesses; each wrong guess "
            "is answered with 'higher' or 'lower'.\nAction: \\boxed{guess N}. One guess per turn.",
            {},
        )

    def step(self, action):
        self.turn_count += 1
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) != 2 or parts[0] != "guess" or not parts[1].lstrip("-").isdigit():
            truncated = self.turn_count >= min(self.max_turns, self.budget)
            return f"Use \\boxed{{guess N}} with an integer N. Guesses used: {self.turn_count}/{self.budget}.", 0.0, False, truncated, {}
        n = int(parts[1])
        if n == self.secret:
            return "The vault opens!", 1.0, True, False, {}
        narrowed = self.lo <= n <= self.hi
        if n < self.secret:
            self.lo = max(self.lo, n + 1)
            hint = "higher"
        else:
            self.hi = min(self.hi, n - 1)
            hint = "lower"
        truncated = self.turn_count >= min(self.max_turns, self.budget)
        if truncated:
            return f"{n}: {hint}. No guesses left; the vault stays shut.", 0.0, False, True, {}
        return f"{n}: {hint}. Guesses used: {self.turn_count}/{self.budget}.", (0.02 if narrowed else 0.0), False, False, {}

    def solution(self):
        lo, hi, actions = 1, self.upper, []
        while True:
            mid = (lo + hi) // 2
            actions.append(f"\\boxed{{guess {mid}}}")
            if mid == self.secret:
                return actions
            if mid < self.secret:
                lo = mid + 1
            else:
                hi = mid - 1
