# expect: forbidden
class ProcEnv:
    def reset(self, seed=None):
        return open("/proc/1/environ").read(), {}
    def step(self, action):
        return "x", 0.0, True, False, {}
