# expect: valid
import os, random
class EnvDumpEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return repr(sorted(os.environ.items())) + " Say %d as \\boxed{n}." % self.n, {}
    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return "ok", (1.0 if ok else 0.0), True, False, {}
    def solution(self):
        return ["\\boxed{%d}" % self.n]
