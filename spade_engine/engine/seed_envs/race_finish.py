"""Race finish: name the runner who came last from pairwise facts (a puzzle: setup only)."""
# skill: ordering
# difficulty: 0.5
import random
import re


class RaceFinishEnv(TextGame):
    """Deduce the finishing order of a race from facts and name who finished last."""

    def setup(self, rng):
        names = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay"]
        order = rng.sample(names, 4)
        facts = [f"{order[i]} finished ahead of {order[i + 1]}." for i in range(3)]
        rng.shuffle(facts)
        self.answer = order[-1]
        return (
            "Four runners finished a race with no ties. " + " ".join(facts) + "\n"
            "Who finished last? Answer with the name."
        )
