# expect: forbidden
import os
class ForkBombEnv:
    def reset(self, seed=None):
        while True:
            os.fork()
    def step(self, action):
        return "x", 0.0, True, False, {}
