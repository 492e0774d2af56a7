# --- TextGame: the engine-provided base class of a scaffolded environment (spade-engine) ---
import random as _tg_random
import re as _tg_re


class TextGame:
    """The reset/step/solution contract, turn counting and \\boxed{} parsing for a game that
    defines setup(rng) -> str, act(command) -> (text, reward, done) and plan() -> [command].
    A puzzle defines only setup(rng), which sets self.answer: each reply is an answer (its last
    \\boxed{}, else its last <answer></answer>), scored 1.0 when it equals self.answer; after
    `tries` wrong answers the episode ends with 0.0."""

    max_turns = 20
    tries = 1

    class _Fork(_tg_random.Random):
        """The validator's probe of a puzzle (a reset seed of 2**62 or more): the first `after`
        draws of Random(base), then those of Random(base + 1)."""

        def __init__(self, base, after):
            super().__init__(base)
            self._tg_other = _tg_random.Random(base + 1)
            self._tg_left = after

        def random(self):
            self._tg_left -= 1
            return super().random() if self._tg_left >= 0 else self._tg_other.random()

        def getrandbits(self, k):
            self._tg_left -= 1
            return super().getrandbits(k) if self._tg_left >= 0 else self._tg_other.getrandbits(k)

    def __init__(self, max_turns=None):
        if max_turns is not None:
            self.max_turns = int(max_turns)
        self.turn_count = 0
        self.rng = _tg_random.Random(0)
        self.reset()

    def reset(self, seed=None):
        self.turn_count = 0
        self._tg_wrong = 0
        if isinstance(seed, int) and seed >= 1 << 62:
            self.rng = TextGame._Fork(seed & 0xFFFFFFFF, (seed >> 32) & 0xFF)
        else:
            self.rng = _tg_random.Random(seed)
        intro = TextGame._seeded_setup(self)
        if self._is_puzzle():
            if not hasattr(self, "answer"):
                raise AttributeError("setup(rng) must set self.answer: the answer to the question it returns")
            return str(intro) + "\nPlease reason step by step, and put your final answer within \\boxed{}.", {}
        return str(intro) + "\nEach turn, think briefly, then put your one action within \\boxed{}.", {}

    #: the random module's functions that, during setup(), draw from the episode's rng
    _TG_DRAWS = ("random", "uniform", "triangular", "randint", "choice", "choices", "randrange", "sample",
                 "shuffle", "getrandbits", "gauss", "normalvariate", "expovariate", "betavariate")

    def _seeded_setup(self):
        """setup(self.rng), with random.randint, random.choice, ... drawing from self.rng meanwhile,
        so a setup() that uses the global random module is as reproducible as one that uses rng."""
        saved = {name: getattr(_tg_random, name) for name in TextGame._TG_DRAWS if hasattr(_tg_random, name)}
        try:
            for name in saved:
                setattr(_tg_random, name, getattr(self.rng, name))
            return self.setup(self.rng)
        finally:
            for name, fn in saved.items():
                setattr(_tg_random, name, fn)

    def step(self, action):
        self.turn_count += 1
        found = _tg_re.findall(r"\\boxed\{([^{}]*)\}", str(action))
        if not found and self._is_puzzle():  # reasoning-gym's convention, as the engine's own scorer reads it
            found = _tg_re.findall(r"<answer>\s*([^<>]*?)\s*</answer>", str(action))
        command = " ".join(found[-1].split()) if found else ""
        if command:
            text, reward, done = TextGame._outcome(self.act(command))
        elif self._is_puzzle():
            text, reward, done = self._wrong("No answer found: put your final answer within \\boxed{}.")
        else:
            text, reward, done = "No action found: put your one action within \\boxed{}.", 0.0, False
        truncated = not done and self.turn_count >= self.max_turns
        return text, reward, done, truncated, {}

    def solution(self):
        out = []
        for command in self.plan():
            command = str(command)
            out.append(command if command.startswith("\\boxed{") else "\\boxed{" + command + "}")
        return out

    def act(self, command):
        if TextGame._same(command, self.answer):
            return "Correct.", 1.0, True
        return self._wrong("Wrong answer.")

    def plan(self):
        return [str(self.answer)]

    def _is_puzzle(self):
        return type(self).act is TextGame.act

    def _wrong(self, text):
        self._tg_wrong += 1
        left = int(self.tries) - self._tg_wrong
        return (text + " " + str(left) + " tries left." if left > 0 else text), 0.0, left <= 0

    @staticmethod
    def _same(reply, answer):
        a = " ".join(str(reply).split()).lower().rstrip(".")
        b = " ".join(str(answer).split()).lower().rstrip(".")
        if a == b:
            return True
        try:
            x, y = float(a), float(b)
        except ValueError:
            return False
        return abs(x - y) <= 1e-6 * max(1.0, abs(y))

    @staticmethod
    def _outcome(result):
        if isinstance(result, str):
            return result, 0.0, False
        if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
            raise TypeError("act() must return (text, reward, done), got " + type(result).__name__)
        reward = float(result[1])
        done = bool(result[2]) if len(result) == 3 else reward >= 1.0
        return str(result[0]), reward, done
# --- end of TextGame ---
