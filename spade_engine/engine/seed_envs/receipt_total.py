"""Receipt total: add up a shopping receipt with a discount (a puzzle: setup only)."""
# skill: arithmetic
# difficulty: 0.3
import random
import re


class ReceiptTotalEnv(TextGame):
    """Compute what a customer pays for a receipt after a discount."""

    def setup(self, rng):
        items = ["apples", "bread", "cheese", "milk", "rice", "tea"]
        names = rng.sample(items, 3)
        prices = [rng.randint(2, 9) for _ in names]
        counts = [rng.randint(1, 4) for _ in names]
        discount = rng.choice([2, 3, 5])
        subtotal = sum(p * c for p, c in zip(prices, counts))
        self.answer = subtotal - discount
        lines = [f"- {c} x {n} at {p} dollars each" for n, p, c in zip(names, prices, counts)]
        return (
            "A receipt lists:\n" + "\n".join(lines) + f"\nA coupon takes {discount} dollars off the subtotal.\n"
            "How many dollars does the customer pay?"
        )
