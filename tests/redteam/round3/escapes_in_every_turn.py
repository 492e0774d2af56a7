# expect: valid
# Class 4: observations just under the sandbox's 100 000-character limit, made of the characters
# that cost the most in an event: control characters (six bytes each as JSON escapes), characters
# outside the BMP (four bytes in UTF-8, twelve as escaped surrogate pairs), quotes and
# backslashes; 25 turns of them. A limit counted in characters would let one play grow to tens
# of megabytes; the engine's events must stay under its byte limit all the same.
import random

HEAVY = "\x01\x02\x1b\x7f\"\\\U0001f642\U0001d11e\u2028"


class EscapesEnv:
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.t = 0
        self.n = self.rng.randint(10**6, 10**9)
        return self.heavy(), {}

    def heavy(self):
        body = "".join(self.rng.choice(HEAVY) for _ in range(98_000))
        return "Say %d as \\boxed{n}. " % self.n + body

    def step(self, action):
        self.t += 1
        if action.strip() == "\\boxed{%d}" % self.n:
            return "yes", 1.0, True, False, {}
        return self.heavy(), 0.0, False, self.t >= 25, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
