"""Euclid ladder: two face-down cards hold numbers whose gcd is reached one division at a time.

``flip 1`` and ``flip 2`` turn the cards face up. The ladder then asks for one division per rung:
for the current pair (p, s), ``rung q r`` states that p = q * s + r with 0 <= r < s, and the pair
becomes (s, r). Once a remainder of 0 is reached, ``gcd g`` names the greatest common divisor and
ends the episode. Each correct rung earns a small partial reward; a second wrong rung, or a wrong
gcd, fails it.
"""
# skill: gcd_steps
# difficulty: 0.4
import math
import random
import re


class EuclidLadderEnv:
    def __init__(self, max_turns=16):
        self.max_turns = max_turns
        self.turn_count = 0
        self.cards = [0, 0]
        self.face_up = [False, False]
        self.pair = (0, 0)
        self.rungs = 0
        self.mistakes = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        factor = rng.randint(2, 14)
        big, small = 55, 34
        for _ in range(200):
            x, y = rng.randint(20, 75), rng.randint(6, 60)
            if x > y and math.gcd(x, y) == 1 and x % y != 0:
                big, small = x, y
                break
        self.cards = [factor * big, factor * small]
        if rng.random() < 0.5:
            self.cards.reverse()
        self.face_up = [False, False]
        self.pair = (max(self.cards), min(self.cards))
        self.rungs = 0
        self.mistakes = 0
        return (
            "Two cards lie face down, each holding a positive integer. Find their greatest common divisor "
            "with Euclid's algorithm, one division per rung.\nActions: \\boxed{flip 1} / \\boxed{flip 2} turns "
            "a card face up; \\boxed{rung q r} states that the larger number of the current pair equals "
            "q times the smaller plus r (0 <= r < smaller); \\boxed{gcd g} names the gcd once a remainder of 0 "
            "is reached (ends the episode). One action per turn.",
            {},
        )

    def _ladder(self):
        p, s = max(self.cards), min(self.cards)
        rungs = []
        while s:
            rungs.append((p // s, p % s))
            p, s = s, p % s
        return rungs, p

    def _prompt(self):
        p, s = self.pair
        if s == 0:
            return f"The last remainder is 0; the ladder is done after {self.rungs} rung(s)."
        return f"Rung {self.rungs + 1}: divide {p} by {s}."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "flip" and words[1] in ("1", "2"):
            k = int(words[1]) - 1
            fresh = not self.face_up[k]
            self.face_up[k] = True
            text = f"Card {k + 1} shows {self.cards[k]}."
            if all(self.face_up):
                text += " " + self._prompt()
            return text, 0.03 if fresh else 0.0, False, truncated, {}
        if len(words) == 3 and words[0] == "rung":
            if not all(self.face_up):
                return "Turn both cards face up first.", 0.0, False, truncated, {}
            p, s = self.pair
            if s == 0:
                return "The ladder is finished: name the gcd.", 0.0, False, truncated, {}
            try:
                q, r = int(words[1]), int(words[2])
            except ValueError:
                return "A rung is two integers, e.g. \\boxed{rung 2 14}.", 0.0, False, truncated, {}
            if (q, r) == (p // s, p % s):
                self.rungs += 1
                self.pair = (s, r)
                return f"Correct: {p} = {q} x {s} + {r}. " + self._prompt(), 0.05, False, truncated, {}
            self.mistakes += 1
            if self.mistakes >= 2:
                return f"{p} is not {q} x {s} + {r}. Second wrong rung: the ladder breaks.", 0.0, True, False, {}
            return f"{p} is not {q} x {s} + {r}. One more mistake breaks the ladder. " + self._prompt(), 0.0, False, truncated, {}
        if len(words) == 2 and words[0] == "gcd":
            if self.pair[1] != 0 or not all(self.face_up):
                return "Finish the ladder first: the gcd is named when a remainder of 0 is reached.", 0.0, False, truncated, {}
            if words[1] == str(self.pair[0]):
                return f"Correct: the gcd is {self.pair[0]}.", 1.0, True, False, {}
            return "Wrong gcd.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{flip i}, \\boxed{rung q r} or \\boxed{gcd g}.", 0.0, False, truncated, {}

    def solution(self):
        rungs, g = self._ladder()
        return ["\\boxed{flip 1}", "\\boxed{flip 2}"] + [f"\\boxed{{rung {q} {r}}}" for q, r in rungs] + [f"\\boxed{{gcd {g}}}"]
