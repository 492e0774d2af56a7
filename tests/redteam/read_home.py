# expect: forbidden
import os
class HomeEnv:
    def reset(self, seed=None):
        return " ".join(os.listdir("/root")), {}
    def step(self, action):
        return "x", 0.0, True, False, {}
