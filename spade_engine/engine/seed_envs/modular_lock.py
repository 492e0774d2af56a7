"""Modular lock: a hidden combination below 105 is found from its remainders (Chinese remainder theorem).

The agent may ask for the combination's remainder modulo any divisor between 2 and 12
(``mod d``), at most four times, then opens the lock with ``open N``. A wrong combination jams
the lock and ends the episode. Each informative remainder earns a small partial reward.
"""
# skill: arithmetic
# difficulty: 0.6
import random
import re


class ModularLockEnv:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.secret = 0
        self.queries = []
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.secret = rng.randint(0, 104)
        self.queries = []
        return (
            "A lock opens with a hidden combination N, 0 <= N < 105. You may ask for N mod d for any d "
            "from 2 to 12, four times at most, then open the lock.\n"
            "Actions: \\boxed{mod d}, \\boxed{open N}. One action per turn.",
            {},
        )

    def _status(self):
        asked = ", ".join(f"N mod {d} = {r}" for d, r in self.queries) or "nothing yet"
        return f"Known: {asked}. Queries left: {4 - len(self.queries)}. Turn {self.turn_count}/{self.max_turns}."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "mod" and parts[1].isdigit():
            d = int(parts[1])
            if not 2 <= d <= 12:
                return "The divisor must be between 2 and 12. " + self._status(), 0.0, False, truncated, {}
            if len(self.queries) >= 4:
                return "No queries left: open the lock. " + self._status(), 0.0, False, truncated, {}
            new = all(q != d for q, _ in self.queries)
            self.queries.append((d, self.secret % d))
            return f"N mod {d} = {self.secret % d}. " + self._status(), (0.05 if new else 0.0), False, truncated, {}
        if len(parts) == 2 and parts[0] == "open" and parts[1].lstrip("-").isdigit():
            if int(parts[1]) == self.secret:
                return "Click. The lock opens.", 1.0, True, False, {}
            return "Wrong combination: the lock jams.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{mod d} or \\boxed{open N}. " + self._status(), 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{mod 3}", "\\boxed{mod 5}", "\\boxed{mod 7}", f"\\boxed{{open {self.secret}}}"]
