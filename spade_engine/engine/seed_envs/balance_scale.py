"""Balance scale: one of several coins is heavier; find it with few weighings on a two-pan balance.

``weigh a,b vs c,d`` compares the total weight of two groups of coins and says which pan is
heavier (or that they balance); ``pick n`` names the heavy coin. Weighings are limited, so the
agent has to split the coins cleverly. An informative weighing earns a small partial reward.
"""
# skill: number_search
# difficulty: 0.6
import random
import re


class BalanceScaleEnv:
    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.coins = 9
        self.heavy = 1
        self.weighings = 0
        self.limit = 3
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.coins = rng.choice([6, 8, 9])
        self.heavy = rng.randint(1, self.coins)
        self.weighings = 0
        self.limit = 2 if self.coins == 9 else 3
        return (
            f"Coins 1 to {self.coins} look alike; exactly one is heavier. You may use the balance "
            f"{self.limit} times.\nActions: \\boxed{{weigh 1,2 vs 3,4}} compares two groups; "
            "\\boxed{pick n} names the heavy coin (ends the episode). One action per turn.",
            {},
        )

    def _group(self, text):
        items = [x for x in text.replace(" ", "").split(",") if x]
        if not items or not all(x.isdigit() and 1 <= int(x) <= self.coins for x in items):
            return None
        return {int(x) for x in items}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        cmd = m.group(1).strip().lower() if m else ""
        if cmd.startswith("weigh ") and " vs " in cmd:
            left_text, right_text = cmd[6:].split(" vs ", 1)
            left, right = self._group(left_text), self._group(right_text)
            if left is None or right is None or left & right:
                return f"Name two disjoint groups of coins 1 to {self.coins}, e.g. \\boxed{{weigh 1,2 vs 3,4}}.", 0.0, False, truncated, {}
            if self.weighings >= self.limit:
                return "The balance is gone: pick a coin.", 0.0, False, truncated, {}
            self.weighings += 1
            if len(left) != len(right):
                result = "the pan with more coins is heavier (groups of different sizes tell you little)"
                reward = 0.0
            elif self.heavy in left:
                result, reward = "the left pan is heavier", 0.05
            elif self.heavy in right:
                result, reward = "the right pan is heavier", 0.05
            else:
                result, reward = "the pans balance", 0.05
            return f"Weighing {self.weighings}/{self.limit}: {result}.", reward, False, truncated, {}
        parts = cmd.split()
        if len(parts) == 2 and parts[0] == "pick" and parts[1].isdigit():
            if int(parts[1]) == self.heavy:
                return "Right: that coin is the heavy one.", 1.0, True, False, {}
            return "Wrong coin.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{weigh a,b vs c,d} or \\boxed{pick n}.", 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{pick {self.heavy}}}"]
