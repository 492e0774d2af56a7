# expect: crash
import os
class HardExitEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        os._exit(0)
