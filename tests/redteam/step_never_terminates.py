# expect: contract
class EndlessEnv:
    def reset(self, seed=None):
        return "keep going", {}
    def step(self, action):
        return "again", 0.0, False, False, {}
