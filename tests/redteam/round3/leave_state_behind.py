# expect: valid
# Class 3: leaves what it can on everything it inherited or can reach: every descriptor made
# non-blocking, given a signal owner (pid 1, the zygote), a signal (F_SETSIG), O_ASYNC and the
# smallest pipe size; the zygote re-niced, pinned to one CPU and given low I/O priority. One such
# environment made the next one fail with "the sandbox worker died". Then it behaves.
import fcntl
import os
import random

F_SETSIG, F_SETPIPE_SZ = 10, 1031


def leave():
    for fd in range(0, 64):
        for op in (
            lambda: fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK | os.O_ASYNC),
            lambda: fcntl.fcntl(fd, fcntl.F_SETOWN, 1),
            lambda: fcntl.fcntl(fd, F_SETSIG, 9),
            lambda: fcntl.fcntl(fd, F_SETPIPE_SZ, 4096),
        ):
            try:
                op()
            except OSError:
                pass
    for op in (
        lambda: os.setpriority(os.PRIO_PROCESS, 1, 19),
        lambda: os.setpriority(os.PRIO_USER, 0, 19),
        lambda: os.sched_setaffinity(1, {0}),
    ):
        try:
            op()
        except OSError:
            pass


class LeaveStateEnv:
    def reset(self, seed=None):
        leave()
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
