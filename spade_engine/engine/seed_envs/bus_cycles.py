"""Bus cycles: when do buses on different loops next leave together (a puzzle: lcm)."""
# skill: gcd_steps
# difficulty: 0.5
import math
import random
import re


class BusCyclesEnv(TextGame):
    """Find after how many minutes the buses of three loops next leave the depot together."""

    def setup(self, rng):
        loops = rng.sample([4, 6, 8, 9, 10, 12, 15], 3)
        together = 1
        for minutes in loops:
            together = together * minutes // math.gcd(together, minutes)
        self.answer = together
        listed = ", ".join(f"{m} minutes" for m in loops)
        return (
            f"Three bus loops take {listed}. All buses leave the depot at 8:00. "
            "After how many minutes do all three next leave together?"
        )
