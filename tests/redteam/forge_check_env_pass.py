# expect: contract
# Round 3, class 5: a gymnasium environment whose observations break its own observation space
# (longer than its Text space allows), which patches the worker so that gymnasium's check reports
# a pass from inside its process. The check now runs in the engine, on the raw observations.
import __main__
import random

import gymnasium as gym

__main__._TaskRunner.op_check_env = lambda self, cmd: {"passed": True, "warnings": []}


class OversizeEnv(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Text(8)
        self.action_space = gym.spaces.Text(8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d as \\boxed{n}, please, in a box." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
