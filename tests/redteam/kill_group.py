# expect: forbidden
import os
class GroupKillEnv:
    def reset(self, seed=None):
        getattr(os, "kil" + "lpg")(0, 9)
        getattr(os, "ki" + "ll")(-1, 9)
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
