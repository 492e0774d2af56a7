# expect: crash
# Round 3, LOW: raises an exception whose message holds a lone surrogate (not encodable as UTF-8).
# It was reported as a sandbox fault (the reply did not decode); it is the environment's crash.
import random


class SurrogateEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        raise ValueError("bad \ud800 value \udfff")

    def step(self, action):
        return "x", 0.0, True, False, {}
