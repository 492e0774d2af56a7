# expect: crash
import json
import sys
sys.setrecursionlimit(10**8)
class RecursionEnv:
    def reset(self, seed=None):
        json.loads("[" * 3_000_000)  # C-level recursion past the C stack: SIGSEGV
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
