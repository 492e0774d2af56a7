"""Recipe scaler: hidden ingredient amounts for a base number of servings are scaled to a target.

The recipe's ingredients are listed without quantities; ``ask <ingredient>`` reveals the amount
for the base servings. ``scale <ingredient> <amount>`` submits the amount for the target servings
(exact, rounded to one decimal). Each correct ingredient earns partial reward; all of them
correct completes the task. Three wrong submissions spoil the dish.
"""
# skill: arithmetic
# difficulty: 0.45
import random
import re


class RecipeScaleEnv:
    INGREDIENTS = ["flour", "sugar", "butter", "milk", "cocoa", "oats", "honey", "rice"]

    def __init__(self, max_turns=14):
        self.max_turns = max_turns
        self.turn_count = 0
        self.base = 0
        self.target = 0
        self.amounts = {}
        self.done_items = set()
        self.mistakes = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.base = rng.choice([2, 4, 5, 8])
        self.target = rng.choice([t for t in (3, 6, 10, 12, 20) if t != self.base])
        names = rng.sample(self.INGREDIENTS, 3)
        self.amounts = {n: rng.randint(2, 40) * 10 for n in names}
        self.done_items = set()
        self.mistakes = 0
        listed = ", ".join(names)
        return (
            f"A recipe serves {self.base}; you must scale it to {self.target} servings. "
            f"Ingredients (grams, hidden): {listed}.\n"
            "Actions: \\boxed{ask <ingredient>} reveals the amount for the base servings; "
            "\\boxed{scale <ingredient> <grams>} submits the scaled amount (one decimal). One action per turn.",
            {},
        )

    def _scaled(self, name):
        return round(self.amounts[name] * self.target / self.base, 1)

    def _status(self):
        left = [n for n in self.amounts if n not in self.done_items]
        return f"Still to scale: {', '.join(left) or 'nothing'}. Mistakes: {self.mistakes}/3. Turn {self.turn_count}/{self.max_turns}."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "ask":
            name = parts[1]
            if name in self.amounts:
                return f"For {self.base} servings: {self.amounts[name]} g of {name}. " + self._status(), 0.0, False, truncated, {}
            return f"{name} is not in this recipe. " + self._status(), 0.0, False, truncated, {}
        if len(parts) == 3 and parts[0] == "scale" and parts[1] in self.amounts:
            try:
                value = float(parts[2])
            except ValueError:
                return "Amounts are numbers, e.g. \\boxed{scale flour 150}. " + self._status(), 0.0, False, truncated, {}
            name = parts[1]
            if abs(value - self._scaled(name)) < 0.051:
                self.done_items.add(name)
                if len(self.done_items) == len(self.amounts):
                    return "Every ingredient is scaled correctly. The dish is ready!", 1.0, True, False, {}
                return f"Correct amount of {name}. " + self._status(), 0.2, False, truncated, {}
            self.mistakes += 1
            if self.mistakes >= 3:
                return "Too many wrong amounts: the dish is spoiled.", 0.0, True, False, {}
            return f"That amount of {name} is wrong. " + self._status(), 0.0, False, truncated, {}
        return (
            "Unknown action. Use \\boxed{ask <ingredient>} or \\boxed{scale <ingredient> <grams>}. " + self._status(),
            0.0, False, truncated, {},
        )

    def solution(self):
        actions = []
        for name in self.amounts:
            actions.append(f"\\boxed{{ask {name}}}")
            actions.append(f"\\boxed{{scale {name} {self._scaled(name)}}}")
        return actions
