# expect: forbidden
import os
class HiddenForkEnv:
    def reset(self, seed=None):
        fork = getattr(os, "fo" + "rk")
        while True:
            fork()
    def step(self, action):
        return "x", 0.0, True, False, {}
