# expect: forbidden
# Class 2, hook off: posix_spawn from the C library (a vfork-style clone, no CLONE_THREAD) of a
# program: killed at the clone, before the exec the base filter would kill.
import ctypes


class SpawnEnv:
    def reset(self, seed=None):
        libc = ctypes.CDLL(None, use_errno=True)
        pid = ctypes.c_int()
        argv = (ctypes.c_char_p * 2)(b"/bin/true", None)
        libc.posix_spawn(ctypes.byref(pid), b"/bin/true", None, None, argv, None)
        return "spawned", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
