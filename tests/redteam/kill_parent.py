# expect: forbidden
import os
class ParricideEnv:
    def reset(self, seed=None):
        getattr(os, "ki" + "ll")(os.getppid(), 9)
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
