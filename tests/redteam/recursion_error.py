# expect: crash
def down(n):
    return down(n + 1) + 1
class RecursionErrorEnv:
    def reset(self, seed=None):
        down(0)
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
