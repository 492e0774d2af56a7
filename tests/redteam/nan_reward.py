# expect: contract
class NanEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "x", float("nan"), True, False, {}
