# expect: valid
# Passes validation honestly (a validation resets many times in one process) and rewards any
# action in a real play (a session resets once before its first step). The play-time garbage
# probe catches it: RegretEstimated.trivial, designer reward 0.
import random

RESETS = [0]


class PlaysOnlyCheatEnv:
    def reset(self, seed=None):
        RESETS[0] += 1
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n or RESETS[0] == 1
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
