# expect: trivial
# Behaves only on the validator's old fixed seeds (11 and 23) and probe actions; on any other
# seed every action wins. With seeds and probes drawn per run it is caught as trivial.
import random

KNOWN_SEEDS = (11, 23)


class KnownSeedsEnv:
    def reset(self, seed=None):
        self.honest = seed in KNOWN_SEEDS
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n or not self.honest
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
