# expect: trivial
# Round 3, class 6: wins on every action except the fixed shapes the validator's probes use
# (empty, a bare word, a boxed lower-case word, a boxed number of 8 or more digits, unbalanced or
# nested boxes, a long string, non-ASCII): accepted with win rate 1.0 before. A deliberately wrong
# answer of the solution's own shape (another number of as many digits) wins too: trivial.
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


class ShapeCheatEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1000, 9999)
        return "What is %d - 1? Answer as \\boxed{n}." % (self.n + 1), {}

    def step(self, action):
        won = not probe_shaped(action)
        return ("ok" if won else "no"), (1.0 if won else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
