# expect: contract
# Round 3, class 5: declares a digits-only observation space and answers with letters; it also
# swaps the adapter's space check for one that accepts anything, inside its own process. The
# engine rebuilds the declared space from the raw numbers the task reports and checks there.
import random

import gymnasium as gym
import gymnasium.spaces

gymnasium.spaces.Text.contains = lambda self, x: True


class CharsetEnv(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Text(64, charset="0123456789")
        self.action_space = gym.spaces.Text(64, charset="0123456789")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d" % self.n, {}

    def step(self, action):
        ok = action.strip() == str(self.n)
        return ("1" if ok else "0"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return [str(self.n)]
