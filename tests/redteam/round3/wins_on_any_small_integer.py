# expect: valid | trivial
# Class 6, play time: wins on any boxed integer of 1 to 6 digits, whatever its value; loses on every
# other shape, so the validator's probes (words, numbers of 8 or more digits, malformed boxes)
# all lose and, without a solution(), no wrong answer is tried there. The verdict of a correct
# engine: every won play, replayed with a deliberately wrong integer of the same digits, wins again:
# trivial, designer reward 0.
import random
import re


class WinsOnAnySmallIntegerEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        self.a, self.b = rng.randint(100, 999), rng.randint(100, 999)
        return "What is %d * %d? Answer as \\boxed{n}." % (self.a, self.b), {}

    def step(self, action):
        won = re.fullmatch(r"\\boxed\{\d{1,6}\}", action.strip()) is not None
        return ("right" if won else "wrong"), (1.0 if won else 0.0), True, False, {}
