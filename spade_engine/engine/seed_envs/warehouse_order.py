"""Warehouse order: fill a customer order from three warehouses with as few shipments as possible.

The order (two or three products with quantities) is shown; each warehouse's stock is hidden
until ``check W`` lists it. ``ship W PRODUCT N`` sends N units from warehouse W. The courier takes
only the fewest shipments that can fill the order, so the agent must check before shipping:
running out of shipments, or shipping more of a product than was ordered, ends the episode.
Checking a warehouse for the first time and each useful shipment earn a small partial reward;
a complete order wins.
"""
# skill: inventory
# difficulty: 0.65
import random
import re


class WarehouseOrderEnv:
    WAREHOUSES = ["north", "south", "east"]
    GOODS = ["chairs", "desks", "lamps", "rugs", "shelves", "mirrors"]

    def __init__(self, max_turns=16):
        self.max_turns = max_turns
        self.turn_count = 0
        self.order = {}
        self.stock = {}
        self.checked = set()
        self.shipments = 0
        self.allowed = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        goods = rng.sample(self.GOODS, rng.choice([2, 3]))
        self.order = {g: rng.randint(6, 15) for g in goods}
        self.stock = {w: {} for w in self.WAREHOUSES}
        for g, qty in self.order.items():
            parts = [rng.randint(0, qty - 1) for _ in self.WAREHOUSES]
            while sum(parts) < qty:
                parts[rng.randrange(len(parts))] += rng.randint(1, 4)
            for w, units in zip(self.WAREHOUSES, parts):
                self.stock[w][g] = units
        self.allowed = len(self._plan())
        self.checked = set()
        self.shipments = 0
        wanted = ", ".join(f"{q} {g}" for g, q in self.order.items())
        return (
            f"Customer order: {wanted}. Warehouses: {', '.join(self.WAREHOUSES)}; the courier takes "
            f"{self.allowed} shipments, no more.\nActions: \\boxed{{check W}} lists warehouse W's stock; "
            "\\boxed{ship W PRODUCT N} sends N units. Shipping more than ordered ends the episode. One action per turn.",
            {},
        )

    def _plan(self):
        moves = []
        for g, qty in self.order.items():
            for w in sorted(self.WAREHOUSES, key=lambda name: (-self.stock[name][g], name)):
                if qty <= 0:
                    break
                units = min(qty, self.stock[w][g])
                moves.append((w, g, units))
                qty -= units
        return moves

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) >= 2 and words[0] in ("check", "ship") and words[1] not in self.stock:
            return f"No warehouse '{words[1]}'. Warehouses: {', '.join(self.WAREHOUSES)}.", 0.0, False, truncated, {}
        if len(words) == 2 and words[0] == "check":
            reward = 0.0 if words[1] in self.checked else 0.02
            self.checked.add(words[1])
            listing = ", ".join(f"{g} {n}" for g, n in self.stock[words[1]].items())
            return f"{words[1]} holds: {listing}.", reward, False, truncated, {}
        if len(words) == 4 and words[0] == "ship":
            w, g = words[1], words[2]
            if g not in self.order:
                return f"The order has no '{g}'.", 0.0, False, truncated, {}
            if not words[3].isdigit() or int(words[3]) < 1:
                return "Ship a whole number of units, e.g. \\boxed{ship north lamps 4}.", 0.0, False, truncated, {}
            units = int(words[3])
            if units > self.stock[w][g]:
                return f"{w} has only {self.stock[w][g]} {g}.", 0.0, False, truncated, {}
            if units > self.order[g]:
                return f"That is more {g} than the customer still wants: the order is refused.", 0.0, True, False, {}
            self.stock[w][g] -= units
            self.order[g] -= units
            self.shipments += 1
            if not any(self.order.values()):
                return "The order is complete. The customer is happy.", 1.0, True, False, {}
            if self.shipments >= self.allowed:
                return "The courier's last shipment left, and the order is still incomplete.", 0.0, True, False, {}
            missing = ", ".join(f"{q} {p}" for p, q in self.order.items() if q)
            return f"Shipped. Still missing: {missing}. Shipments left: {self.allowed - self.shipments}.", 0.05, False, truncated, {}
        return "Unknown action. Use \\boxed{check W} or \\boxed{ship W PRODUCT N}.", 0.0, False, truncated, {}

    def solution(self):
        checks = [f"\\boxed{{check {w}}}" for w in self.WAREHOUSES]
        return checks + [f"\\boxed{{ship {w} {g} {n}}}" for w, g, n in self._plan()]
