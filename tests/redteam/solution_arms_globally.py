# expect: unsolvable
# Round 3, LOW: like solution_arms_the_win, but the armed flag is a module global, so a new instance
# in the same process is armed too: only a new process is not.
import random

ARMED = [False]


class GlobalArmEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Guess the hidden number; answer as \\boxed{n}.", {}

    def step(self, action):
        won = ARMED[0] and action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if won else "no"), (1.0 if won else 0.0), True, False, {}

    def solution(self):
        ARMED[0] = True
        return ["\\boxed{%d}" % self.n]
