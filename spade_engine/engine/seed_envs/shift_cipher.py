"""Shift cipher: a secret Caesar shift encodes a word; probe the cipher with single letters, then decode.

The encoded word is shown. ``encode <letter>`` shows how the hidden shift encodes one letter
(three probes at most); ``decode <word>`` submits the plain word. A correct probe that reveals
the shift earns a small partial reward; a wrong decoding ends the episode.
"""
# skill: sequence
# difficulty: 0.4
import random
import re
import string


class ShiftCipherEnv:
    WORDS = ["planet", "garden", "bridge", "candle", "forest", "silver", "winter", "rocket", "puzzle", "harbor"]

    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.shift = 1
        self.word = ""
        self.probes = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.probes = 0
        self.shift = rng.randint(1, 25)
        self.word = rng.choice(self.WORDS)
        return (
            f"The word '{self._encode(self.word)}' was encoded with a secret letter shift (a Caesar cipher).\n"
            "Actions: \\boxed{encode x} shows the encoding of the letter x (3 probes at most); "
            "\\boxed{decode word} submits the original word. One action per turn.",
            {},
        )

    def _encode(self, text):
        letters = string.ascii_lowercase
        return "".join(letters[(letters.index(c) + self.shift) % 26] if c in letters else c for c in text)

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        left = f"Probes left: {3 - self.probes}. Turn {self.turn_count}/{self.max_turns}."
        if len(parts) == 2 and parts[0] == "encode":
            letter = parts[1]
            if len(letter) != 1 or letter not in string.ascii_lowercase:
                return "Probe one lowercase letter, e.g. \\boxed{encode a}. " + left, 0.0, False, truncated, {}
            if self.probes >= 3:
                return "No probes left: decode the word. " + left, 0.0, False, truncated, {}
            self.probes += 1
            left = f"Probes left: {3 - self.probes}. Turn {self.turn_count}/{self.max_turns}."
            reward = 0.1 if self.probes == 1 else 0.0
            return f"'{letter}' encodes to '{self._encode(letter)}'. " + left, reward, False, truncated, {}
        if len(parts) == 2 and parts[0] == "decode":
            if parts[1] == self.word:
                return "Decoded correctly.", 1.0, True, False, {}
            return "That is not the original word.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{encode x} or \\boxed{decode word}. " + left, 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{encode a}", f"\\boxed{{decode {self.word}}}"]
