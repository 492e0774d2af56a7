# expect: contract|memory
class HugeObsEnv:
    def reset(self, seed=None):
        return "x" * 50_000_000, {}
    def step(self, action):
        return "x", 0.0, True, False, {}
