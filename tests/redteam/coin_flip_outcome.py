# expect: unsolvable | trivial
# Round 3, class 6: the outcome is a seeded coin flip, whatever the action: it sat at win rate 0.5,
# in the band, and earned designer reward 0.6 for pure noise. Its solution wins only where the coin
# says so (unsolvable), and where it does, a deliberately wrong answer wins as well (trivial).
import random


class CoinFlipEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        self.n = rng.randint(10**6, 10**9)
        self.coin = rng.random() < 0.5
        return "Repeat %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        return ("heads" if self.coin else "tails"), (1.0 if self.coin else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
