# expect: valid
# Class 4, benign: every observation is a 44 kB table and an episode lasts 25 turns (the issue's
# run: its play event was over Kafka's default 1 MiB, and every resume stopped at it). Through
# the engine every play is recorded, each event under the engine's limit, the tables whole in
# their blobs.
import random


class WideTurnsEnv:
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.t = 0
        self.n = self.rng.randint(10**6, 10**9)
        return self.table(), {}

    def table(self):
        rows = ["row %05d | %s" % (i, "".join(self.rng.choice("abcdef") for _ in range(30))) for i in range(1100)]
        return "Find the number %d.\n" % self.n + "\n".join(rows)

    def step(self, action):
        self.t += 1
        if action.strip() == "\\boxed{%d}" % self.n:
            return "yes", 1.0, True, False, {}
        return self.table(), 0.0, False, self.t >= 25, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
