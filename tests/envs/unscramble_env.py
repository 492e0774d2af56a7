"""Valid example (SPADE format): unscramble a word; the solution is given as text."""
import random
import re

WORDS = ["planet", "garden", "silver", "rocket", "butter", "castle", "forest", "pencil", "window", "marble"]


class UnscrambleEnv:
    def reset(self, seed=None):
        rng = random.Random(seed)
        self.word = rng.choice(WORDS)
        letters = list(self.word)
        while "".join(letters) == self.word:
            rng.shuffle(letters)
        self.tries = 0
        return f"Unscramble: {''.join(letters)}. Two tries. Answer as \\boxed{{word}}.", {}

    def step(self, action):
        self.tries += 1
        m = re.search(r"\\boxed\{([^{}]*)\}", action)
        ok = bool(m) and m.group(1).strip().lower() == self.word
        done = ok or self.tries >= 2
        return ("Yes!" if ok else "No."), (1.0 if ok else 0.0), done, False, {}

    def solution(self):
        return f"The word is \\boxed{{{self.word}}}"
