"""Word untangle: undo a logged chain of rotations, reversals and swaps to restore a hidden word.

The word was scrambled by three or four operations; only the result is shown. ``log`` reveals
the operations one at a time, the most recent first. The agent edits the current word with the
same operations (``reverse``, ``rotate left k``, ``rotate right k``, ``swap i j`` with 1-based
positions) and wins when the original word is restored. Getting back to an earlier stage of the
scrambling than ever before earns a small partial reward.
"""
# skill: string_ops
# difficulty: 0.5
import random
import re


class WordUntangleEnv:
    WORDS = ["pathfinder", "lumberjack", "background", "importance", "flashpoint", "chipmunk", "vanquish", "jackpot", "dolphins", "blacksmith"]

    def __init__(self, max_turns=14):
        self.max_turns = max_turns
        self.turn_count = 0
        self.ops = []
        self.stages = []
        self.word = ""
        self.logged = 0
        self.best = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        original = rng.choice(self.WORDS)
        size = len(original)
        for _ in range(30):
            ops = []
            for _ in range(rng.choice([3, 4])):
                kind = rng.choice(["reverse", "rotate", "swap"])
                if kind == "reverse":
                    ops.append(("reverse",))
                elif kind == "rotate":
                    ops.append(("rotate", rng.choice(["left", "right"]), rng.randint(1, size - 1)))
                else:
                    i, j = sorted(rng.sample(range(1, size + 1), 2))
                    ops.append(("swap", i, j))
            stages = [original]
            for op in ops:
                stages.append(self._apply(stages[-1], op))
            if len(set(stages)) == len(stages):
                break
        self.ops, self.stages = ops, stages
        self.word = stages[-1]
        self.logged = 0
        self.best = len(ops)
        return (
            f"The word '{self.word}' is a scrambled English word: {len(ops)} operations were applied to it.\n"
            "Actions: \\boxed{log} reveals the applied operations, most recent first; \\boxed{reverse}, "
            "\\boxed{rotate left k}, \\boxed{rotate right k} and \\boxed{swap i j} (positions from 1) edit the "
            "current word. Restoring the original word wins. One action per turn.",
            {},
        )

    @staticmethod
    def _apply(word, op):
        if op[0] == "reverse":
            return word[::-1]
        if op[0] == "rotate":
            k = op[2] % len(word)
            return word[k:] + word[:k] if op[1] == "left" else word[len(word) - k:] + word[:len(word) - k]
        chars = list(word)
        chars[op[1] - 1], chars[op[2] - 1] = chars[op[2] - 1], chars[op[1] - 1]
        return "".join(chars)

    @staticmethod
    def _say(op):
        return " ".join(str(x) for x in op)

    def _parse(self, words):
        size = len(self.word)
        if words == ["reverse"]:
            return ("reverse",)
        if len(words) == 3 and words[0] == "rotate" and words[1] in ("left", "right") and words[2].isdigit():
            return ("rotate", words[1], int(words[2])) if 1 <= int(words[2]) < size else None
        if len(words) == 3 and words[0] == "swap" and words[1].isdigit() and words[2].isdigit():
            i, j = int(words[1]), int(words[2])
            return ("swap", i, j) if 1 <= i <= size and 1 <= j <= size and i != j else None
        return None

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if words == ["log"]:
            if self.logged >= len(self.ops):
                return f"The log is fully shown. Current word: {self.word}.", 0.0, False, truncated, {}
            self.logged += 1
            index = len(self.ops) - self.logged + 1
            return f"Operation {index} of {len(self.ops)}: {self._say(self.ops[index - 1])}.", 0.02, False, truncated, {}
        op = self._parse(words)
        if op is None:
            return (
                f"Unknown action. Use \\boxed{{log}}, \\boxed{{reverse}}, \\boxed{{rotate left k}}, \\boxed{{rotate right k}} "
                f"or \\boxed{{swap i j}}. Current word: {self.word}.",
                0.0, False, truncated, {},
            )
        self.word = self._apply(self.word, op)
        if self.word == self.stages[0]:
            return f"'{self.word}' is restored.", 1.0, True, False, {}
        reward = 0.0
        if self.word in self.stages[: self.best]:
            self.best = self.stages.index(self.word)
            reward = 0.05
        return f"Current word: {self.word}.", reward, False, truncated, {}

    def solution(self):
        undo = []
        for op in reversed(self.ops):
            if op[0] == "rotate":
                op = ("rotate", "right" if op[1] == "left" else "left", op[2])
            undo.append(f"\\boxed{{{self._say(op)}}}")
        return ["\\boxed{log}"] * len(self.ops) + undo
