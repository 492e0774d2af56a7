# expect: forbidden|crash
import sys
class HiddenCtypesEnv:
    def reset(self, seed=None):
        # a reference to ctypes kept by a module the worker loaded before the task started
        import numpy
        for mod in list(sys.modules.values()):
            ct = getattr(mod, "ctypes", None)
            if ct is not None and hasattr(ct, "CDLL"):
                ct.CDLL(None).system(b"touch /tmp/spade_redteam_ctypes2")
        __import__("ct" + "ypes").CDLL(None).system(b"touch /tmp/spade_redteam_ctypes2")
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
