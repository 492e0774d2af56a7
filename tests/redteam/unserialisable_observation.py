# expect: contract
class BytesObsEnv:
    def reset(self, seed=None):
        return b"\x00\xff bytes", {"f": lambda: 1}
    def step(self, action):
        return object(), 0.0, True, False, {}
