# expect: valid | trivial
# Class 6, play time: the outcome is a seeded coin flip, but only for an answer shaped like a small
# non-negative integer (1 to 6 digits, boxed); every other shape loses. No solution() to replay.
# None of the validator's probes has that shape (its numbers have 8 or more digits), and before
# the garbage probes drew small integers none of them had it either: it sat at win rate 0.5, in the
# band, earning designer reward for noise. The verdict of a correct engine: where an agent won,
# the same episode with a deliberately wrong small integer wins as well (the same coin): trivial,
# designer reward 0.
import random
import re


class CoinFlipSmallIntegersEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        self.a, self.b = rng.randint(2, 40), rng.randint(2, 40)
        self.coin = rng.random() < 0.5
        return "What is %d + %d? Answer as \\boxed{n}." % (self.a, self.b), {}

    def step(self, action):
        won = self.coin and re.fullmatch(r"\\boxed\{\d{1,6}\}", action.strip()) is not None
        return ("right" if won else "wrong"), (1.0 if won else 0.0), True, False, {}
