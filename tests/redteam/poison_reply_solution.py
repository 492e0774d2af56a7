# expect: sandbox
# Answers solution() with actions that are not a list and an extra field (gymnasium's check used to
# be answered the same way; it now runs in the engine): the solution reply schema refuses both.
import __main__
import random

__main__._TaskRunner.op_solution = lambda self, cmd: {"kind": "actions", "actions": 5, "extra": {"x": 1}}


class PoisonSolutionEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
