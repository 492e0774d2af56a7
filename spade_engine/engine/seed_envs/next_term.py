"""Next term: find the term after a sequence whose step grows by a fixed amount (a puzzle)."""
# skill: sequence
# difficulty: 0.4
import random
import re


class NextTermEnv(TextGame):
    """Find the next term of a sequence whose differences grow by a constant."""

    def setup(self, rng):
        first = rng.randint(1, 9)
        step = rng.randint(1, 4)
        growth = rng.randint(1, 3)
        terms = [first]
        for _ in range(5):
            terms.append(terms[-1] + step)
            step += growth
        self.answer = terms[-1]
        shown = ", ".join(str(t) for t in terms[:-1])
        return f"The sequence {shown}, ... follows one rule. What is the next term?"
