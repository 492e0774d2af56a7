# expect: contract
class AlwaysEqual(float):
    def __eq__(self, other): return True
    def __ge__(self, other): return True
    def __float__(self): return 1.0
class Weird:
    def __eq__(self, other): return True
    __hash__ = object.__hash__
class EqRewardEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "x", Weird(), True, False, {}
