# expect: sandbox
# Lifts the limits on solution()'s reply: 300 actions of 10 000 characters each. The solution
# reply schema refuses them.
import __main__
import random

__main__._TaskRunner.op_solution = lambda self, cmd: {"kind": "actions", "actions": ["a" * 10_000] * 300}


class BigSolutionEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
