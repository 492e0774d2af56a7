# expect: contract
class ShortStepEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "x", 1.0, True
