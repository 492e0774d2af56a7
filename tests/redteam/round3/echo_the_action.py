# expect: valid
# Class 4: every observation echoes the agent's action as often as the observation limit allows,
# with the turn's full history of actions; 25 turns. Whatever the agent answers comes back a
# hundredfold: the engine's events stay under its limit and the run goes on.
import random


class EchoTheActionEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(10**6, 10**9)
        self.t = 0
        self.history = []
        return "Say %d as \\boxed{n}, then keep talking." % self.n, {}

    def step(self, action):
        self.t += 1
        self.history.append(action)
        if action.strip() == "\\boxed{%d}" % self.n and self.t > 20:
            return "yes", 1.0, True, False, {}
        echo = " | ".join(self.history)
        body = (echo + "\n") * max(1, 95_000 // (len(echo) + 1))
        return body[:95_000], 0.0, False, self.t >= 25, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n] * 21
