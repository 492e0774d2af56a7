# expect: valid
# Class 7: observations written to make the engine's own parsers backtrack: the formula pattern
# of the procedural agent (18 repetitions took 50 s with the standard library, 22 about 15
# minutes), thousands of unclosed \boxed{ and <answer> tags (the answer extraction was
# quadratic), a code fence followed by a long run of blanks (the hint's and the designer's fence
# patterns were quadratic); its source carries the same in a comment, for the hint writer that
# reads it. Through validation, the hint and the plays, the engine answers within its bounds.
# ``` \boxed{ <answer>
import random

HOSTILE = ("Solve `v = d / t`. Known: " + "ab = 1.5 m/s" * 400 + " \\boxed{" * 3000 + " <answer>" * 3000
           + " ```" + " \t" * 20000)


class StallTheParsersEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(10**6, 10**9)
        self.t = 0
        return HOSTILE + " Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        self.t += 1
        ok = action.strip() == "\\boxed{%d}" % self.n
        if ok or self.t >= 2:
            return ("yes" if ok else "no"), (1.0 if ok else 0.0), True, False, {}
        return HOSTILE, 0.0, False, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
