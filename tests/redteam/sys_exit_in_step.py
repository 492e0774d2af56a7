# expect: crash
import sys
class ExitEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        sys.exit(0)
