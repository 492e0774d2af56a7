# expect: timeout
import time
class SleepEnv:
    def reset(self, seed=None):
        time.sleep(10**6)
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
