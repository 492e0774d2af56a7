"""True rows: count the assignments that make a formula true (a puzzle: setup only)."""
# skill: truth_table
# difficulty: 0.6
import random
import re


class TrueRowsEnv(TextGame):
    """Count the rows of a truth table on which a formula is true."""

    def setup(self, rng):
        ops = ["and", "or"]
        op1, op2 = rng.choice(ops), rng.choice(ops)
        negate = rng.choice([True, False])
        count = 0
        for p in (False, True):
            for q in (False, True):
                for r in (False, True):
                    left = (not p) if negate else p
                    inner = (q and r) if op2 == "and" else (q or r)
                    value = (left and inner) if op1 == "and" else (left or inner)
                    count += int(value)
        self.answer = count
        left_text = "(not P)" if negate else "P"
        return (
            f"For the formula {left_text} {op1} (Q {op2} R), over all 8 assignments of True/False to P, Q and R, "
            "on how many is the formula true?"
        )
