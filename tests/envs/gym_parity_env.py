"""Valid example (gymnasium format): a gymnasium.Env with Text spaces asking for a parity."""
import string

import gymnasium as gym
from gymnasium.spaces import Text


class ParityEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self):
        self.observation_space = Text(max_length=256, charset=string.printable)
        self.action_space = Text(max_length=64, charset=string.printable)
        self.n = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.n = int(self.np_random.integers(10, 10_000))
        return f"Is {self.n} even or odd? Answer as \\boxed{{even}} or \\boxed{{odd}}.", {}

    def step(self, action):
        want = "even" if self.n % 2 == 0 else "odd"
        ok = action.strip() == "\\boxed{" + want + "}"
        return ("Correct." if ok else "Wrong."), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{" + ("even" if self.n % 2 == 0 else "odd") + "}"]
