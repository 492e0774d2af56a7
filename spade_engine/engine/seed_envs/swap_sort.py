"""Swap sort: sort a list in ascending order with a tight budget of swaps.

``swap i j`` exchanges the values at positions i and j (0-based). The budget is the minimum
number of swaps needed plus one, so careless swaps run out. Reaching a new best number of
values in their final place earns a small partial reward; a sorted list wins.
"""
# skill: sort_swaps
# difficulty: 0.5
import random
import re


class SwapSortEnv:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.turn_count = 0
        self.values = []
        self.budget = 0
        self.used = 0
        self.best = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.used = 0
        n = rng.randint(5, 7)
        self.values = rng.sample(range(1, 60), n)
        while self.values == sorted(self.values):
            rng.shuffle(self.values)
        self.budget = self._min_swaps(self.values) + 1
        self.best = self._placed()
        return (
            f"Sort the list {self.values} in ascending order using at most {self.budget} swaps.\n"
            "Action: \\boxed{swap i j} exchanges positions i and j (0-based). One swap per turn.",
            {},
        )

    @staticmethod
    def _min_swaps(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        seen, swaps = set(), 0
        for i in range(len(values)):
            j, length = i, 0
            while j not in seen:
                seen.add(j)
                j = order[j]
                length += 1
            swaps += max(0, length - 1)
        return swaps

    def _placed(self):
        return sum(a == b for a, b in zip(self.values, sorted(self.values)))

    def step(self, action):
        self.turn_count += 1
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        truncated = self.turn_count >= self.max_turns
        if len(parts) != 3 or parts[0] != "swap" or not parts[1].isdigit() or not parts[2].isdigit():
            return f"Use \\boxed{{swap i j}}. List: {self.values}.", 0.0, False, truncated, {}
        i, j = int(parts[1]), int(parts[2])
        if not (0 <= i < len(self.values) and 0 <= j < len(self.values)) or i == j:
            return f"Positions must be two different indices from 0 to {len(self.values) - 1}. List: {self.values}.", 0.0, False, truncated, {}
        self.values[i], self.values[j] = self.values[j], self.values[i]
        self.used += 1
        if self.values == sorted(self.values):
            return f"Sorted: {self.values}.", 1.0, True, False, {}
        placed = self._placed()
        reward = 0.05 if placed > self.best else 0.0
        self.best = max(self.best, placed)
        if self.used >= self.budget:
            return f"Out of swaps with {self.values}.", 0.0, True, False, {}
        return f"List: {self.values}. Swaps used: {self.used}/{self.budget}.", reward, False, truncated, {}

    def solution(self):
        values, actions = list(self.values), []
        target = sorted(values)
        for i in range(len(values)):
            if values[i] != target[i]:
                j = values.index(target[i])
                values[i], values[j] = values[j], values[i]
                actions.append(f"\\boxed{{swap {i} {j}}}")
        return actions
