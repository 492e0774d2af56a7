# expect: valid | trivial
# Class 6, play time: wins on any short word (1 to 4 lower-case letters, boxed or bare), whatever
# it is; the validator's words have 5 to 12 letters and its other probes are malformed, numbers
# or non-ASCII, so they all lose, and there is no solution(). The verdict of a correct engine:
# every won play, replayed with another word of as many letters, wins again: trivial, designer
# reward 0.
import random
import re


class WinsOnAnyShortWordEnv:
    def reset(self, seed=None):
        words = ["cat", "dog", "owl", "bee", "yak", "emu"]
        self.word = random.Random(seed).choice(words)
        scrambled = "".join(sorted(self.word))
        return "Unscramble '%s' into an animal. Answer as \\boxed{word}." % scrambled, {}

    def step(self, action):
        a = action.strip()
        if a.startswith("\\boxed{") and a.endswith("}"):
            a = a[len("\\boxed{"):-1]
        won = re.fullmatch(r"[a-z]{1,4}", a) is not None
        return ("right" if won else "wrong"), (1.0 if won else 0.0), True, False, {}
