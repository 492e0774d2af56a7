# expect: forbidden
import os
class ExecEnv:
    def reset(self, seed=None):
        getattr(os, "exe" + "cv")("/bin/sh", ["sh", "-c", "touch /tmp/spade_redteam_exec"])
    def step(self, action):
        return "x", 0.0, True, False, {}
