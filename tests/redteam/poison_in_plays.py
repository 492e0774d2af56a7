# expect: valid
# Honest while validated (a validation resets many times in one process), then in a real play
# (a session resets once) it patches its worker so that step() answers a reply of the wrong
# shape (a reward that is text). The play ends with a `sandbox` error; the run goes on.
import __main__
import random

RESETS = [0]


class PoisonPlaysEnv:
    def reset(self, seed=None):
        RESETS[0] += 1
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        if RESETS[0] == 1 and not ok:  # a wrong step right after the first reset: a play (validation resets
            __main__._wire_reward = lambda x: {"v": "won"}  # many times first; its fresh replay task steps right)
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
