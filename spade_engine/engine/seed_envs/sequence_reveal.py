"""Sequence reveal: the terms of a hidden integer sequence are revealed on request; predict a later term.

The rule is one of: linear (a + n d), quadratic (a + b n + c n^2) or a doubling recurrence
(t(n+1) = 2 t(n) + k). Terms 1 to 5 can be revealed one at a time with ``term i``; the agent
then predicts term 8 with ``predict N``. One wrong prediction is allowed; the second ends the
episode. Every newly revealed term earns a small partial reward.
"""
# skill: sequence
# difficulty: 0.5
import random
import re


class SequenceRevealEnv:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.terms = []
        self.shown = set()
        self.misses = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.shown = set()
        self.misses = 0
        kind = rng.choice(["linear", "quadratic", "doubling"])
        if kind == "linear":
            a, d = rng.randint(-20, 20), rng.choice([x for x in range(-9, 10) if x])
            self.terms = [a + n * d for n in range(1, 9)]
        elif kind == "quadratic":
            a, b, c = rng.randint(-5, 5), rng.randint(-4, 4), rng.randint(1, 3)
            self.terms = [a + b * n + c * n * n for n in range(1, 9)]
        else:
            t, k = rng.randint(1, 6), rng.randint(-3, 3)
            self.terms = [t]
            for _ in range(7):
                self.terms.append(2 * self.terms[-1] + k)
        return (
            "A hidden integer sequence t(1), t(2), ... follows one simple rule. You may reveal terms 1 to 5.\n"
            "Actions: \\boxed{term i} (i from 1 to 5), \\boxed{predict N} to give t(8). One action per turn.",
            {},
        )

    def _status(self):
        known = ", ".join(f"t({i})={self.terms[i - 1]}" for i in sorted(self.shown)) or "none"
        return f"Known terms: {known}. Turn {self.turn_count}/{self.max_turns}."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "term" and parts[1].isdigit():
            i = int(parts[1])
            if 1 <= i <= 5:
                reward = 0.05 if i not in self.shown else 0.0
                self.shown.add(i)
                return f"t({i}) = {self.terms[i - 1]}. " + self._status(), reward, False, truncated, {}
            return "Only terms 1 to 5 can be revealed. " + self._status(), 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0] == "predict":
            try:
                guess = int(parts[1])
            except ValueError:
                return "Predict an integer, e.g. \\boxed{predict 42}. " + self._status(), 0.0, False, truncated, {}
            if guess == self.terms[7]:
                return "Correct: that is t(8).", 1.0, True, False, {}
            self.misses += 1
            if self.misses >= 2:
                return "Wrong again: the episode is over.", 0.0, True, False, {}
            return "Wrong prediction (one more try). " + self._status(), 0.0, False, truncated, {}
        return "Unknown action. Use \\boxed{term i} or \\boxed{predict N}. " + self._status(), 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{term {i}}}" for i in range(1, 6)] + [f"\\boxed{{predict {self.terms[7]}}}"]
