# expect: contract
class InfEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "x", float("inf"), True, False, {}
