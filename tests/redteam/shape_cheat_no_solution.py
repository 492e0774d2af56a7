# expect: valid | trivial
# Round 3, class 6: wins on every action except the shapes of the validator's fixed probes, and
# gives no solution() (so no wrong answer can be tried): the play-time garbage, whose shapes vary,
# wins, and the environment is trivial.
import random
import re


def probe_shaped(action):
    a = action.strip()
    return (
        not a
        or not a.startswith("\\boxed{")
        or re.fullmatch(r"\\boxed\{[a-z]*\}", a) is not None
        or re.fullmatch(r"\\boxed\{\d{8,}\}", a) is not None
        or a.count("{") != a.count("}")
        or "\\boxed{\\boxed" in a
        or len(a) > 100
        or not a.isascii()
    )


class ShapeCheatNoSolutionEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1000, 9999)
        return "What is %d - 1? Answer as \\boxed{n}." % (self.n + 1), {}

    def step(self, action):
        won = not probe_shaped(action)
        return ("ok" if won else "no"), (1.0 if won else 0.0), True, False, {}
