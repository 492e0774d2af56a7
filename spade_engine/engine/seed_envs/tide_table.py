"""Tide table: predict a later reading of a tide gauge that rises by a hidden step (a TextGame game).

Readings follow an arithmetic sequence with a hidden start and step. ``read K`` shows reading K
(1-5, a small reward for each new one); ``predict N`` ends the episode: reward 1.0 when N is
reading 12, else 0.0.
"""
# skill: sequence
# difficulty: 0.4
import random
import re


class TideTableEnv(TextGame):
    """Read a few tide-gauge readings and predict reading 12."""

    max_turns = 8
    TARGET = 12

    def setup(self, rng):
        self.start = rng.randint(-20, 40)
        self.rise = rng.choice([-7, -5, -3, -2, 2, 3, 4, 6, 9])
        self.seen = set()
        return (
            "A tide gauge changes by the same amount between readings. Predict reading 12.\n"
            "Commands: read K shows reading K (K from 1 to 5); predict N gives your prediction (one try)."
        )

    def _reading(self, k):
        return self.start + (k - 1) * self.rise

    def act(self, command):
        words = command.split()
        if len(words) == 2 and words[0] == "read" and words[1] in ("1", "2", "3", "4", "5"):
            k = int(words[1])
            reward = 0.0 if k in self.seen else 0.03
            self.seen.add(k)
            return f"Reading {k}: {self._reading(k)} cm.", reward, False
        if len(words) == 2 and words[0] == "predict":
            if words[1] == str(self._reading(self.TARGET)):
                return "Correct prediction.", 1.0, True
            return f"Wrong: reading {self.TARGET} is not {words[1]}.", 0.0, True
        return "Unknown command. Use read K (1-5) or predict N.", 0.0, False

    def plan(self):
        return ["read 1", "read 2", f"predict {self._reading(self.TARGET)}"]
