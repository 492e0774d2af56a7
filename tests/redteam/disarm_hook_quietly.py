# expect: forbidden
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
