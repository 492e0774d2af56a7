"""Valid example (SPADE format): decode a Caesar-shifted word; a wrong answer costs a turn."""
import random
import re
import string

WORDS = ["python", "sandbox", "regret", "curriculum", "agent", "designer", "reward", "episode"]


class CaesarEnv:
    def __init__(self, max_turns=3):
        self.max_turns = max_turns

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.word = rng.choice(WORDS)
        self.shift = rng.randint(1, 25)
        abc = string.ascii_lowercase
        enc = "".join(abc[(abc.index(ch) + self.shift) % 26] for ch in self.word)
        self.turns = 0
        return f"Decode the Caesar cipher '{enc}' (shift {self.shift}). Answer as \\boxed{{word}}.", {"shift": self.shift}

    def step(self, action):
        self.turns += 1
        m = re.search(r"\\boxed\{([^{}]*)\}", action)
        ok = bool(m) and m.group(1).strip().lower() == self.word
        done = ok or self.turns >= self.max_turns
        return ("Decoded." if ok else "Not it."), (1.0 if ok else 0.0), done, False, {"turns": self.turns}

    def solution(self):
        return [f"\\boxed{{{self.word}}}"]
