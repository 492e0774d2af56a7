# expect: forbidden
import os
class SystemEnv:
    def reset(self, seed=None):
        os.system("touch /tmp/spade_redteam_system")
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
