# expect: valid
# Starts threads until the kernel refuses (RLIMIT_NPROC counts them per uid) and keeps them all:
# with uids shared between pools this exhausted the process limit of another pool's tasks.
import random
import threading
import time

HELD = []


def hog():
    while True:
        t = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
        try:
            t.start()
        except RuntimeError:  # can't start new thread
            return
        HELD.append(t)
        if len(HELD) >= 4096:
            return


class HogEnv:
    def reset(self, seed=None):
        if not HELD:
            hog()
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {"threads": len(HELD)}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
