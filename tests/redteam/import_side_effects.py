# expect: valid
import os, random, sys
with open("/tmp/spade_redteam_import", "w") as f:
    f.write("written at import time")
os.environ["SPADE_REDTEAM_INJECTED"] = "1"
print("hello from import time")
sys.stdout.flush()
class SideEffectEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}
    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return "ok", (1.0 if ok else 0.0), True, False, {}
    def solution(self):
        return ["\\boxed{%d}" % self.n]
