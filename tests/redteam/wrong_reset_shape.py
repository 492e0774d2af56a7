# expect: contract
class BareResetEnv:
    def reset(self, seed=None):
        return "just a string"
    def step(self, action):
        return "x", 0.0, True, False, {}
