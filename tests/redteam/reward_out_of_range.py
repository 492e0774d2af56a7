# expect: contract
class BigRewardEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "x", 5.0, True, False, {}
