# expect: valid | trivial
# Round 3, class 6: a seeded coin flip decides the outcome, whatever the action, and there is no
# solution() to replay. The validator may pass it (its probes lose wherever the coin says tails);
# at play time the garbage probes at the plays' own seeds win exactly where the agent "won", so
# the environment is trivial and earns no designer reward (tests/test_designer_reward_gaming.py).
import random


class CoinFlipNoSolutionEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        self.n = rng.randint(10**6, 10**9)
        self.coin = rng.random() < 0.5
        return "Repeat %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        return ("heads" if self.coin else "tails"), (1.0 if self.coin else 0.0), True, False, {}
