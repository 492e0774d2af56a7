"""Unit chain: convert a quantity through a chain of units whose conversion rates are looked up one at a time.

Only the start and target units are given. ``rate X Y`` looks up the factor between two
neighbouring units of the chain (unknown pairs are refused); ``answer V`` gives the converted
value, accepted within 1%. Each new useful rate earns a small partial reward.
"""
# skill: unit_convert
# difficulty: 0.45
import random
import re


class UnitChainEnv:
    CHAINS = [
        (["mile", "furlong", "chain", "yard"], [8, 10, 22]),
        (["day", "hour", "minute", "second"], [24, 60, 60]),
        (["gallon", "quart", "pint", "cup"], [4, 2, 2]),
        (["tonne", "kilogram", "gram", "milligram"], [1000, 1000, 1000]),
        (["league", "mile", "furlong", "rod"], [3, 8, 40]),
    ]

    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.units = []
        self.factors = []
        self.amount = 1.0
        self.found = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.found = set()
        self.units, self.factors = rng.choice(self.CHAINS)
        self.amount = rng.choice([1.5, 2, 2.5, 3, 4.25, 7])
        return (
            f"Convert {self.amount} {self.units[0]} to {self.units[-1]}. The chain of units in between is "
            f"{' -> '.join(self.units)}; the conversion rates are hidden.\n"
            "Actions: \\boxed{rate X Y} looks up how many Y make one X (neighbouring units only); "
            "\\boxed{answer V} gives the result (1% tolerance, ends the episode). One action per turn.",
            {},
        )

    def _target(self):
        value = float(self.amount)
        for f in self.factors:
            value *= f
        return value

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 3 and parts[0] == "rate":
            x, y = parts[1], parts[2]
            for i in range(len(self.factors)):
                if (x, y) == (self.units[i], self.units[i + 1]):
                    reward = 0.05 if i not in self.found else 0.0
                    self.found.add(i)
                    return f"1 {x} = {self.factors[i]} {y}.", reward, False, truncated, {}
            return f"No rate between {x} and {y} (use neighbouring units in order).", 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0] == "answer":
            try:
                value = float(parts[1])
            except ValueError:
                return "Answer a number, e.g. \\boxed{answer 12.5}.", 0.0, False, truncated, {}
            target = self._target()
            if abs(value - target) <= 0.01 * abs(target):
                return "Correct conversion.", 1.0, True, False, {}
            return "Wrong conversion.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{rate X Y} or \\boxed{answer V}.", 0.0, False, truncated, {}

    def solution(self):
        rates = [f"\\boxed{{rate {self.units[i]} {self.units[i + 1]}}}" for i in range(len(self.factors))]
        return rates + [f"\\boxed{{answer {self._target():g}}}"]
