"""Grid treasure: a treasure hides in one cell of a square grid; probes answer with the Manhattan distance.

``probe r c`` reports the distance from (r, c) to the treasure; ``dig r c`` digs there. Three
wrong digs end the hunt. A probe that comes closer than every earlier probe earns a small
partial reward.
"""
# skill: number_search
# difficulty: 0.55
import random
import re


class GridTreasureEnv:
    def __init__(self, max_turns=14):
        self.max_turns = max_turns
        self.turn_count = 0
        self.size = 6
        self.treasure = (0, 0)
        self.best = None
        self.wrong_digs = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.size = rng.choice([5, 6, 7, 8])
        self.treasure = (rng.randrange(self.size), rng.randrange(self.size))
        self.best = None
        self.wrong_digs = 0
        return (
            f"A treasure is buried in a {self.size}x{self.size} grid (rows and columns 0 to {self.size - 1}).\n"
            "Actions: \\boxed{probe r c} tells the Manhattan distance from (r, c) to the treasure; "
            "\\boxed{dig r c} digs (three wrong digs end the hunt). One action per turn.",
            {},
        )

    def _cell(self, parts):
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        r, c = int(parts[1]), int(parts[2])
        return (r, c) if 0 <= r < self.size and 0 <= c < self.size else None

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        cell = self._cell(parts)
        turn = f"Turn {self.turn_count}/{self.max_turns}."
        if parts and parts[0] == "probe" and cell is not None:
            d = abs(cell[0] - self.treasure[0]) + abs(cell[1] - self.treasure[1])
            reward = 0.03 if self.best is None or d < self.best else 0.0
            self.best = d if self.best is None else min(self.best, d)
            return f"Distance from {cell} to the treasure: {d}. " + turn, reward, False, truncated, {}
        if parts and parts[0] == "dig" and cell is not None:
            if cell == self.treasure:
                return "You found the treasure!", 1.0, True, False, {}
            self.wrong_digs += 1
            if self.wrong_digs >= 3:
                return "Nothing there, and your shovel breaks. The hunt is over.", 0.0, True, False, {}
            return f"Nothing at {cell}. Wrong digs: {self.wrong_digs}/3. " + turn, 0.0, False, truncated, {}
        return (
            f"Unknown action. Use \\boxed{{probe r c}} or \\boxed{{dig r c}} with 0 <= r, c < {self.size}. " + turn,
            0.0, False, truncated, {},
        )

    def solution(self):
        r, c = self.treasure
        return ["\\boxed{probe 0 0}", f"\\boxed{{probe 0 {self.size - 1}}}", f"\\boxed{{dig {r} {c}}}"]
