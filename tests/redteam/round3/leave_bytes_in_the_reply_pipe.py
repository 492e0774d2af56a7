# expect: forbidden | sandbox | timeout
# Class 3: at its step, writes the start of a frame (a length header promising 4 kB, then a few
# bytes) into every descriptor it can write, the reply pipe among them, and returns: the bytes left
# in the pipe's buffer would be read before (or as part of) the next reply. The engine reads them
# as the start of a reply that never completes (a step timeout at the call's fixed deadline) or
# as a broken one, and ends the task; no worker carries them into the next task.
import os
import random
import stat
import struct


def leave_bytes():
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, struct.pack(">I", 4096) + b'{"op": "reply", "seq": 99')
        except OSError:
            pass


class LeaveBytesEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        leave_bytes()
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
