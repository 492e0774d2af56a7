# expect: sandbox
# Patches its own worker so that `new` answers an instance id the engine cannot use. The engine
# used to run int() on it, which raised out of the validator (a traceback in `validate`, a
# RunStopped(error) on every resume); the reply schema now refuses it as a `sandbox` verdict.
import __main__
import random

__main__._TaskRunner.op_new = lambda self, cmd: {"iid": "not-an-int"}


class PoisonNewEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
