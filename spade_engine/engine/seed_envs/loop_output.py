"""Loop output: predict what a short loop prints (a puzzle: setup only)."""
# skill: code_trace
# difficulty: 0.5
import random
import re


class LoopOutputEnv(TextGame):
    """Trace a short Python loop and give the final value of x."""

    def setup(self, rng):
        x = rng.randint(1, 5)
        n = rng.randint(3, 5)
        add = rng.randint(1, 4)
        program = [f"x = {x}", f"for i in range({n}):", "    if i % 2 == 0:", f"        x = x + {add}", "    else:", "        x = x * 2"]
        for i in range(n):
            if i % 2 == 0:
                x = x + add
            else:
                x = x * 2
        self.answer = x
        return "What is the value of x after this program runs?\n" + "\n".join(program)
