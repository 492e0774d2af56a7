# expect: forbidden
# Class 2, hook off: clone(2) with a plain SIGCHLD (a new process sharing nothing): killed; only
# clone with CLONE_THREAD (a thread) is allowed in a task.
import ctypes


class CloneEnv:
    def reset(self, seed=None):
        ctypes.CDLL(None, use_errno=True).syscall(56, 17, 0, 0, 0, 0)  # clone(SIGCHLD)
        return "cloned", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
