# expect: sandbox
# Lifts the limits on gymnasium's check result: a 100 000-character failure message and 500
# warnings. The check_env reply schema refuses them.
import __main__
import random

__main__._TaskRunner.op_check_env = lambda self, cmd: {"passed": True, "message": "m" * 100_000, "warnings": ["w" * 5000] * 500}


class BigCheckEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
