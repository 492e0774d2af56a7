# expect: valid
# Round 3: the hook and its fingerprint are out of reach of the environment's frames, so the
# walk below finds nothing, nothing is disarmed and the environment, which then behaves, is valid.
# Before round 3 (the verdict then: forbidden):
# Disarms the audit hook and then behaves: nothing forbidden is attempted, but the next reply
# carries a changed hook fingerprint, which the engine treats as an anomaly.
import random


def disarm():
    try:
        raise RuntimeError
    except RuntimeError as e:
        f = e.__traceback__.tb_frame
    while f is not None and "guard" not in f.f_locals:
        f = f.f_back
    if f is None:  # since round 3 no frame of this thread leads to the hook (it lives in the I/O thread)
        return
    hook = f.f_locals["guard"].hook
    for cell in hook.__closure__:
        if isinstance(cell.cell_contents, frozenset):
            cell.cell_contents = frozenset()


class QuietDisarmEnv:
    def reset(self, seed=None):
        disarm()
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
