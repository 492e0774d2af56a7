# expect: sandbox
# Answers gymnasium's check with warnings that are not a list (len() of them used to raise in
# the engine) and an extra field: the check_env reply schema refuses both.
import __main__
import random

__main__._TaskRunner.op_check_env = lambda self, cmd: {"passed": True, "warnings": 5, "extra": {"x": 1}}


class PoisonCheckEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
