# expect: valid
# Round 3, class 1: looks for the hook, its fingerprint or the I/O thread's state in every frame it
# can get: its own stack (tracebacks, f_back), a signal handler's frame (signals run in the main
# thread, where environment code runs) and every thread it can list. It crashes if it finds any;
# since the hook lives in the I/O thread, it finds nothing and is valid.
import random
import signal
import sys
import threading

SUSPECT = ("hook", "fingerprint", "beat", "loading", "gen", "nonce", "encode")


def scan(f):
    found = []
    while f is not None:
        found += [k for k in f.f_locals if k in SUSPECT]
        f = f.f_back
    return found


FOUND = []


class FramesEnv:
    def reset(self, seed=None):
        try:
            raise RuntimeError
        except RuntimeError as e:
            FOUND.extend(scan(e.__traceback__.tb_frame))
        signal.signal(signal.SIGALRM, lambda s, f: FOUND.extend(scan(f)))
        signal.setitimer(signal.ITIMER_REAL, 0.001)
        x = 0
        for i in range(3_000_000):
            x += i
        signal.setitimer(signal.ITIMER_REAL, 0)
        FOUND.extend(t.name for t in threading.enumerate() if t is not threading.main_thread())
        if FOUND:
            raise RuntimeError(f"reached {sorted(set(FOUND))}")
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
