# expect: forbidden
import ctypes
class CtypesEnv:
    def reset(self, seed=None):
        ctypes.CDLL(None).system(b"touch /tmp/spade_redteam_ctypes")
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
