# expect: valid
# Fills /tmp to the last byte so that the environments after it on the same worker would crash;
# fails loudly if its own /tmp did not start empty (it would, were /tmp shared across tasks).
import os
import random

FILLED = [False]


def fill():
    if os.listdir("/tmp"):  # (statvfs, which showed the free blocks, fails in the sandbox since round 3)
        raise RuntimeError(f"LEAK: /tmp is not fresh ({os.listdir('/tmp')[:5]})")
    chunk = b"\0" * (1 << 20)
    with open("/tmp/spade_fill", "wb") as f:
        try:
            while True:
                f.write(chunk)
        except OSError:  # ENOSPC or the file-size limit
            pass
    i = 0
    try:  # then the inodes
        while True:
            open(f"/tmp/spade_fill_{i}", "w").close()
            i += 1
    except OSError:
        pass
    FILLED[0] = True


class FillEnv:
    def reset(self, seed=None):
        if not FILLED[0]:
            fill()
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
