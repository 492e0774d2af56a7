"""Ledger audit: the agent reveals hidden transactions one at a time and reports the final balance.

The opening balance is shown; the five transactions are hidden until the agent asks for them with
``show i``. Each newly revealed entry earns a small partial reward. ``total N`` ends the audit:
the exact final balance wins, anything else fails it.
"""
# skill: arithmetic
# difficulty: 0.35
import random
import re


class LedgerAuditEnv:
    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.turn_count = 0
        self.opening = 0
        self.entries = []
        self.revealed = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.opening = rng.randint(100, 900)
        self.entries = [rng.choice([-1, 1]) * rng.randint(5, 250) for _ in range(5)]
        self.revealed = set()
        return self._intro(), {}

    def _intro(self):
        return (
            f"Audit the account. Opening balance: {self.opening}. There are {len(self.entries)} hidden "
            "transactions, numbered 1 to 5 (positive = deposit, negative = withdrawal).\n"
            "Actions: \\boxed{show i} reveals transaction i; \\boxed{total N} reports the final balance "
            "(this ends the audit). Reply with one action per turn."
        )

    def _status(self):
        known = ", ".join(f"#{i}: {self.entries[i - 1]:+d}" for i in sorted(self.revealed)) or "none"
        return f"Revealed so far: {known}. Turn {self.turn_count}/{self.max_turns}."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        cmd = m.group(1).strip().lower() if m else ""
        parts = cmd.split()
        if len(parts) == 2 and parts[0] == "show" and parts[1].isdigit():
            i = int(parts[1])
            if 1 <= i <= len(self.entries):
                new = i not in self.revealed
                self.revealed.add(i)
                reward = 0.05 if new else 0.0
                return f"Transaction #{i}: {self.entries[i - 1]:+d}. " + self._status(), reward, False, truncated, {}
            return f"There is no transaction #{i}. " + self._status(), 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0] == "total":
            try:
                value = int(parts[1])
            except ValueError:
                return "The total must be an integer, e.g. \\boxed{total 512}. " + self._status(), 0.0, False, truncated, {}
            if value == self.opening + sum(self.entries):
                return "The audit balances. Well done.", 1.0, True, False, {}
            return "The reported balance is wrong: the audit failed.", 0.0, True, False, {}
        return (
            "Unknown action. Use \\boxed{show i} or \\boxed{total N}. " + self._status(),
            0.0, False, truncated, {},
        )

    def solution(self):
        actions = [f"\\boxed{{show {i}}}" for i in range(1, len(self.entries) + 1)]
        return actions + [f"\\boxed{{total {self.opening + sum(self.entries)}}}"]
