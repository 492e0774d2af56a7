"""Inventory query: use catalogue tools to total the value of the stock of one category.

Tools: ``list CATEGORY`` names the items of a category, ``price ITEM`` and ``stock ITEM`` look up
one item each. The question asks for the total value (price times units in stock, summed over
the category). ``answer N`` submits it. Each first lookup of an item of the asked category earns
a small partial reward.
"""
# skill: tool_use
# difficulty: 0.6
import random
import re


class InventoryEnv:
    CATALOGUE = {
        "tools": ["hammer", "wrench", "pliers", "saw", "drill"],
        "garden": ["rake", "hose", "shovel", "seeds", "gloves"],
        "kitchen": ["kettle", "whisk", "ladle", "grater", "sieve"],
    }

    def __init__(self, max_turns=16):
        self.max_turns = max_turns
        self.turn_count = 0
        self.category = "tools"
        self.items = {}
        self.looked = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.looked = set()
        self.category = rng.choice(sorted(self.CATALOGUE))
        self.items = {}
        for cat, names in self.CATALOGUE.items():
            for name in rng.sample(names, 3):
                self.items[name] = {"category": cat, "price": rng.randint(2, 40), "stock": rng.randint(0, 12)}
        return (
            f"What is the total value (price x units in stock) of everything in the '{self.category}' category?\n"
            "Tools: \\boxed{list CATEGORY}, \\boxed{price ITEM}, \\boxed{stock ITEM}; \\boxed{answer N} submits "
            f"the total (ends the episode). Categories: {', '.join(sorted(self.CATALOGUE))}. One action per turn.",
            {},
        )

    def _total(self):
        return sum(v["price"] * v["stock"] for v in self.items.values() if v["category"] == self.category)

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "list":
            names = [n for n, v in self.items.items() if v["category"] == parts[1]]
            if not names:
                return f"No category '{parts[1]}'.", 0.0, False, truncated, {}
            return f"{parts[1]}: {', '.join(names)}.", 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0] in ("price", "stock"):
            item = self.items.get(parts[1])
            if item is None:
                return f"No item '{parts[1]}'.", 0.0, False, truncated, {}
            key = (parts[0], parts[1])
            reward = 0.03 if item["category"] == self.category and key not in self.looked else 0.0
            self.looked.add(key)
            unit = "per unit" if parts[0] == "price" else "units in stock"
            return f"{parts[1]}: {item[parts[0]]} {unit}.", reward, False, truncated, {}
        if len(parts) == 2 and parts[0] == "answer":
            try:
                value = int(parts[1])
            except ValueError:
                return "Answer an integer, e.g. \\boxed{answer 120}.", 0.0, False, truncated, {}
            if value == self._total():
                return "Correct total.", 1.0, True, False, {}
            return "Wrong total.", 0.0, True, False, {}
        return "Unknown action. Use list, price, stock or answer.", 0.0, False, truncated, {}

    def solution(self):
        names = [n for n, v in self.items.items() if v["category"] == self.category]
        actions = [f"\\boxed{{list {self.category}}}"]
        for n in names:
            actions += [f"\\boxed{{price {n}}}", f"\\boxed{{stock {n}}}"]
        return actions + [f"\\boxed{{answer {self._total()}}}"]
