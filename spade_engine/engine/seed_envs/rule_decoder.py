"""Rule decoder: a hidden two-part rule (a reordering, then a letter map) encodes a secret word.

The encoded secret is shown. ``encode WORD`` runs the hidden rule on any word of 2 to 12 letters
(three probes at most); the rule first reorders the letters (reverse, swap neighbours, or rotate
left) and then maps every letter (a shift through the alphabet, or the mirror a<->z). ``decode
WORD`` submits the secret and ends the episode. Each probe of a new word earns a small partial
reward.
"""
# skill: string_ops
# difficulty: 0.6
import random
import re


class RuleDecoderEnv:
    SECRETS = ["harvest", "lantern", "pilgrim", "cobalt", "meadow", "quarry", "turbine", "velvet", "walnut", "zephyr"]
    ALPHABET = "abcdefghijklmnopqrstuvwxyz"
    PROBES = 3

    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.order = ("reverse", 0)
        self.letters = ("shift", 1)
        self.secret = "harvest"
        self.probed = []
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.probed = []
        self.order = rng.choice([("reverse", 0), ("pairs", 0), ("rotate", rng.randint(1, 2))])
        self.letters = rng.choice([("shift", rng.randint(1, 25)), ("mirror", 0)])
        self.secret = rng.choice(self.SECRETS)
        return (
            f"Secret word, encoded: {self._encode(self.secret)}. A hidden rule reorders the letters, then maps "
            "each letter.\nActions: \\boxed{encode WORD} shows how the rule encodes a word of 2 to 12 letters "
            f"({self.PROBES} probes at most); \\boxed{{decode WORD}} submits the secret (ends the episode). "
            "One action per turn.",
            {},
        )

    def _encode(self, word):
        chars = list(word)
        if self.order[0] == "reverse":
            chars.reverse()
        elif self.order[0] == "pairs":
            for i in range(0, len(chars) - 1, 2):
                chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:
            k = self.order[1] % len(chars)
            chars = chars[k:] + chars[:k]
        out = []
        for ch in chars:
            n = self.ALPHABET.index(ch)
            out.append(self.ALPHABET[(n + self.letters[1]) % 26] if self.letters[0] == "shift" else self.ALPHABET[25 - n])
        return "".join(out)

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] in ("encode", "decode"):
            word = words[1]
            if not (2 <= len(word) <= 12 and all(ch in self.ALPHABET for ch in word)):
                return "Use a word of 2 to 12 letters a-z.", 0.0, False, truncated, {}
            if words[0] == "decode":
                if word == self.secret:
                    return f"Correct: the secret is '{self.secret}'.", 1.0, True, False, {}
                return "Wrong decoding.", 0.0, True, False, {}
            if len(self.probed) >= self.PROBES:
                return "No probes left: decode the secret.", 0.0, False, truncated, {}
            reward = 0.0 if word in self.probed else 0.04
            self.probed.append(word)
            return f"{word} -> {self._encode(word)} ({self.PROBES - len(self.probed)} probes left)", reward, False, truncated, {}
        return "Unknown action. Use \\boxed{encode WORD} or \\boxed{decode WORD}.", 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{encode abcdefg}", f"\\boxed{{decode {self.secret}}}"]
