# expect: unsolvable
# LOW: a puzzle whose answer is drawn from a generator of its own, seeded with the values the
# question shows (a hidden pseudo-random function of them): deterministic, undiscoverable.
import random


class HiddenRngPuzzle(TextGame):
    """Guess the code."""

    def setup(self, rng):
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        self.answer = random.Random(a * 100 + b).randint(1, 1000)
        return f"The lock shows {a} and {b}. What is its code?"
