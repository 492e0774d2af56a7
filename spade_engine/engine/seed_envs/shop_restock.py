"""Shop restock: bring every shelf up to its minimum level from a supplier, within a tight budget.

The minimum level of each product is posted; what is on the shelf and what the supplier
charges are hidden. ``count ITEM`` counts the shelf, ``quote ITEM`` asks the supplier's unit
price and ``buy ITEM N`` orders N units, paid from the budget (an order the money cannot cover
is refused). The budget barely covers the shortfalls, so units bought beyond a minimum can make
the job impossible, which ends the episode. Each order that reduces the total shortfall earns a
small partial reward; every shelf at its minimum wins.
"""
# skill: inventory
# difficulty: 0.55
import random
import re


class ShopRestockEnv:
    PRODUCTS = ["batteries", "candles", "matches", "soap", "string", "tape", "nails", "glue"]

    def __init__(self, max_turns=18):
        self.max_turns = max_turns
        self.turn_count = 0
        self.minimum = {}
        self.shelf = {}
        self.cost = {}
        self.funds = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        names = rng.sample(self.PRODUCTS, 4)
        self.minimum = {n: rng.randint(6, 12) for n in names}
        short = set(rng.sample(names, rng.choice([2, 3])))
        self.shelf = {n: rng.randint(0, self.minimum[n] - 1) if n in short else self.minimum[n] + rng.randint(0, 4) for n in names}
        self.cost = {n: rng.randint(2, 15) for n in names}
        self.funds = self._needed() + rng.randint(0, 4)
        return (
            "Restock the shop. Minimum shelf levels: "
            + ", ".join(f"{n} {self.minimum[n]}" for n in names)
            + f". Budget: {self.funds} coins.\nActions: \\boxed{{count ITEM}} counts a shelf; \\boxed{{quote ITEM}} "
            "asks the supplier's unit price; \\boxed{buy ITEM N} orders N units. Every shelf at its minimum wins. "
            "One action per turn.",
            {},
        )

    def _shortfall(self):
        return {n: max(0, self.minimum[n] - self.shelf[n]) for n in self.minimum}

    def _needed(self):
        return sum(units * self.cost[n] for n, units in self._shortfall().items())

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) >= 2 and words[0] in ("count", "quote", "buy") and words[1] not in self.minimum:
            return f"The shop has no '{words[1]}'. Products: {', '.join(self.minimum)}.", 0.0, False, truncated, {}
        if len(words) == 2 and words[0] == "count":
            return f"The {words[1]} shelf holds {self.shelf[words[1]]} units.", 0.0, False, truncated, {}
        if len(words) == 2 and words[0] == "quote":
            return f"The supplier charges {self.cost[words[1]]} coins per unit of {words[1]}.", 0.0, False, truncated, {}
        if len(words) == 3 and words[0] == "buy":
            if not words[2].isdigit() or int(words[2]) < 1:
                return "Order a whole number of units, e.g. \\boxed{buy soap 3}.", 0.0, False, truncated, {}
            item, units = words[1], int(words[2])
            bill = units * self.cost[item]
            if bill > self.funds:
                return f"{units} {item} cost {bill} coins; only {self.funds} are left. Order refused.", 0.0, False, truncated, {}
            before = sum(self._shortfall().values())
            self.funds -= bill
            self.shelf[item] += units
            after = sum(self._shortfall().values())
            if after == 0:
                return f"Bought {units} {item}. Every shelf is at its minimum: the shop is restocked.", 1.0, True, False, {}
            if self._needed() > self.funds:
                return f"Bought {units} {item}, but {self.funds} coins can no longer cover the other shelves.", 0.0, True, False, {}
            reward = 0.05 if after < before else 0.0
            return f"Bought {units} {item} for {bill} coins; {self.funds} coins left.", reward, False, truncated, {}
        return "Unknown action. Use \\boxed{count ITEM}, \\boxed{quote ITEM} or \\boxed{buy ITEM N}.", 0.0, False, truncated, {}

    def solution(self):
        actions = [f"\\boxed{{count {n}}}" for n in self.minimum]
        for n, units in self._shortfall().items():
            if units:
                actions += [f"\\boxed{{quote {n}}}", f"\\boxed{{buy {n} {units}}}"]
        return actions
