# expect: forbidden
# Class 2, run with the audit hook off: creates processes with the raw fork system call through
# ctypes (no audit event at all), each child holding memory beside the task. A task may not make
# processes: the task's seccomp filter kills it at the first one.
import ctypes
import time


class RawForkEnv:
    def reset(self, seed=None):
        libc = ctypes.CDLL(None, use_errno=True)
        for _ in range(32):
            if libc.syscall(57) == 0:  # fork(2) on x86_64
                hold = bytearray(512 << 20)
                time.sleep(3600)
        return "forked", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
