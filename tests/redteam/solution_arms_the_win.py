# expect: unsolvable
# Round 3, LOW: solution() itself arms the win: no action wins unless solution() was called on the
# instance first. It validated as solved (the replay followed the call), then scored 0 in every
# play. The replay now runs in a fresh task, where solution() never ran.
import random


class ArmedEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Guess the hidden number; answer as \\boxed{n}.", {}

    def step(self, action):
        won = getattr(self, "armed", False) and action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if won else "no"), (1.0 if won else 0.0), True, False, {}

    def solution(self):
        self.armed = True
        return ["\\boxed{%d}" % self.n]
