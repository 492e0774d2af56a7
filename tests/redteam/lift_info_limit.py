# expect: contract
# Lifts its worker's info limits and returns an info dict of 300 keys with long strings (it fits
# in a frame): the engine re-checks info against the limits (a contract error).
import __main__

__main__._wire_info = lambda x: {"v": x}


class BigInfoEnv:
    def reset(self, seed=None):
        return "hi", {f"k{i}": "v" * 2000 for i in range(300)}

    def step(self, action):
        return "x", 0.0, True, False, {}
