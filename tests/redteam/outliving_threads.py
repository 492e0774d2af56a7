# expect: valid
import random, re, threading, time
def burn():
    while True:
        time.sleep(0.001)
class ThreadsEnv:
    def reset(self, seed=None):
        threading.Thread(target=burn, daemon=False).start()
        self.n = random.Random(seed).randint(1, 9)
        return "Say the number %d as \\boxed{n}." % self.n, {}
    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return "ok", (1.0 if ok else 0.0), True, False, {}
    def solution(self):
        return ["\\boxed{%d}" % self.n]
