"""Ticket prices: solve two linear equations for an unknown price (a puzzle: setup only)."""
# skill: linear_equation
# difficulty: 0.6
import random
import re


class TicketPricesEnv(TextGame):
    """Solve a two-equation system for the price of a child's ticket."""

    def setup(self, rng):
        adult = rng.randint(6, 15)
        child = rng.randint(2, adult - 1)
        a1, c1 = rng.randint(1, 4), rng.randint(1, 4)
        a2, c2 = a1 + rng.randint(1, 3), c1
        total1 = a1 * adult + c1 * child
        total2 = a2 * adult + c2 * child
        self.answer = child
        return (
            f"{a1} adult and {c1} child tickets cost {total1} dollars. "
            f"{a2} adult and {c2} child tickets cost {total2} dollars. "
            "What does one child ticket cost, in dollars?"
        )
