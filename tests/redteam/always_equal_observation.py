# expect: contract
class Weird:
    def __eq__(self, other): return True
    def __str__(self): return "looks fine"
    __hash__ = object.__hash__
class EqObsEnv:
    def reset(self, seed=None):
        return Weird(), {}
    def step(self, action):
        return Weird(), 1.0, True, False, {}
