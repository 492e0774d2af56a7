"""Coin jars: count the coins in three jars and report their total value (a TextGame game).

Each jar holds a hidden number of coins of one known value. ``count K`` reveals jar K's count (a
small reward the first time); ``answer N`` ends the episode: reward 1.0 when N is the total value
in cents, else 0.0.
"""
# skill: arithmetic
# difficulty: 0.3
import random
import re


class CoinJarsEnv(TextGame):
    """Count the coins in three jars and answer their total value in cents."""

    max_turns = 8
    VALUES = [5, 10, 25]

    def setup(self, rng):
        self.counts = [rng.randint(3, 30) for _ in self.VALUES]
        self.seen = set()
        return (
            "Three jars hold coins worth 5, 10 and 25 cents (jar 1, 2 and 3). Find the total value in cents.\n"
            "Commands: count K (K = 1, 2 or 3) shows how many coins jar K holds; answer N gives your total."
        )

    def act(self, command):
        words = command.split()
        if len(words) == 2 and words[0] == "count" and words[1] in ("1", "2", "3"):
            k = int(words[1]) - 1
            reward = 0.0 if k in self.seen else 0.05
            self.seen.add(k)
            return f"Jar {k + 1} holds {self.counts[k]} coins of {self.VALUES[k]} cents.", reward, False
        if len(words) == 2 and words[0] == "answer":
            if words[1] == str(self._total()):
                return "Correct: that is the total value.", 1.0, True
            return f"Wrong: {words[1]} is not the total.", 0.0, True
        return "Unknown command. Use count K (K = 1, 2, 3) or answer N.", 0.0, False

    def _total(self):
        return sum(c * v for c, v in zip(self.counts, self.VALUES))

    def plan(self):
        return ["count 1", "count 2", "count 3", f"answer {self._total()}"]
