# expect: forbidden
import os
class PopenEnv:
    def reset(self, seed=None):
        return getattr(os, "po" + "pen")("id").read(), {}
    def step(self, action):
        return "x", 0.0, True, False, {}
