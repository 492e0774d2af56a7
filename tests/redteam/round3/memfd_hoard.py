# expect: valid
# Class 2: holds memory in memfds, which sit outside the address-space limit (928 MiB per task
# last round). memfd_create fails now (EPERM from the task's filter); the program then behaves and
# reports what it held, so the test can read that nothing was.
import os
import random

HELD = []


def hoard():
    try:
        fd = os.memfd_create("spade_hoard")
    except OSError as exc:
        return f"memfd refused: {exc.errno}"
    chunk = b"\1" * (1 << 20)
    for _ in range(900):
        os.write(fd, chunk)
    HELD.append(fd)
    return "held 900 MiB"


class MemfdEnv:
    def reset(self, seed=None):
        got = hoard()
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "%s. Say %d as \\boxed{n}." % (got, self.n), {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
