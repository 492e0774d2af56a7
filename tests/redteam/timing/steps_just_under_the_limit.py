# expect: timeout
# Every call stays just under the step limit (1 s in the timing test), so no single call times
# out: only the validation's own absolute deadline can stop it.
import random, time


class SlowEnv:
    def reset(self, seed=None):
        time.sleep(0.8)
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        time.sleep(0.8)
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
