"""Price receipts: the unit prices of three goods are hidden; receipts of mixed purchases reveal them.

``receipt i`` shows receipt i (1 to 4): how many of each good were bought and the total paid.
Three independent receipts give a system of three linear equations; ``price N`` answers the
unit price of the good the question asks about and ends the episode. Each receipt read for
the first time earns a small partial reward.
"""
# skill: linear_equation
# difficulty: 0.55
import random
import re


class PriceReceiptsEnv:
    GOODS = ["apple", "bread", "cheese", "dates", "eggs", "flour", "grapes"]

    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.goods = []
        self.prices = {}
        self.receipts = []
        self.asked = ""
        self.read = set()
        self.reset()

    @staticmethod
    def _det(rows):
        (a, b, c), (d, e, f), (g, h, i) = rows
        return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.read = set()
        self.goods = rng.sample(self.GOODS, 3)
        self.prices = {g: rng.randint(2, 20) for g in self.goods}
        rows = [[1, 1, 0], [0, 1, 1], [1, 0, 1]]
        for _ in range(300):
            trial = [[rng.randint(0, 3) for _ in range(3)] for _ in range(3)]
            if all(sum(1 for c in row if c) >= 2 for row in trial) and self._det(trial) != 0:
                rows = trial
                break
        rows.append([rng.randint(1, 3) for _ in range(3)])
        self.receipts = rows
        self.asked = rng.choice(self.goods)
        return (
            f"A shop sells {', '.join(self.goods)} at fixed whole-number unit prices you cannot see. "
            f"Four receipts of mixed purchases are on file. What is the unit price of {self.asked}?\n"
            "Actions: \\boxed{receipt i} shows receipt i (1 to 4); \\boxed{price N} answers the unit price "
            f"of {self.asked} (ends the episode). One action per turn.",
            {},
        )

    def _total(self, row):
        return sum(n * self.prices[g] for n, g in zip(row, self.goods))

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "receipt" and words[1] in ("1", "2", "3", "4"):
            i = int(words[1])
            row = self.receipts[i - 1]
            bought = " + ".join(f"{n} {g}" for n, g in zip(row, self.goods) if n)
            reward = 0.0 if i in self.read else 0.05
            self.read.add(i)
            return f"Receipt {i}: {bought} = {self._total(row)} in total.", reward, False, truncated, {}
        if len(words) == 2 and words[0] == "price":
            try:
                value = int(words[1])
            except ValueError:
                return "Answer a whole number, e.g. \\boxed{price 7}.", 0.0, False, truncated, {}
            if value == self.prices[self.asked]:
                return f"Correct: {self.asked} costs {value} per unit.", 1.0, True, False, {}
            return f"Wrong unit price for {self.asked}.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{receipt i} or \\boxed{price N}.", 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{receipt 1}", "\\boxed{receipt 2}", "\\boxed{receipt 3}", f"\\boxed{{price {self.prices[self.asked]}}}"]
