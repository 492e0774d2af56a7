"""Loan interest: look up a loan's terms and compute the simple interest owed (a TextGame game).

The principal, the yearly rate and the years are hidden until asked for with ``ask principal``,
``ask rate`` and ``ask years`` (a small reward for each new term). ``answer N`` ends the episode:
reward 1.0 when N is principal * rate / 100 * years, else 0.0.
"""
# skill: formula
# difficulty: 0.4
import random
import re


class LoanInterestEnv(TextGame):
    """Ask for a loan's terms and answer the simple interest owed."""

    max_turns = 8
    TERMS = ["principal", "rate", "years"]

    def setup(self, rng):
        self.terms = {"principal": rng.randint(2, 40) * 100, "rate": rng.randint(2, 12), "years": rng.randint(1, 6)}
        self.asked = set()
        return (
            "A loan charges simple interest. Find the total interest owed, in dollars.\n"
            "Commands: ask principal, ask rate (percent per year), ask years; answer N gives your result."
        )

    def _interest(self):
        return self.terms["principal"] * self.terms["rate"] * self.terms["years"] // 100

    def act(self, command):
        words = command.split()
        if len(words) == 2 and words[0] == "ask" and words[1] in self.TERMS:
            reward = 0.0 if words[1] in self.asked else 0.04
            self.asked.add(words[1])
            return f"The {words[1]} is {self.terms[words[1]]}.", reward, False
        if len(words) == 2 and words[0] == "answer":
            if words[1] == str(self._interest()):
                return "Correct: that is the interest owed.", 1.0, True
            return f"Wrong: the interest is not {words[1]}.", 0.0, True
        return "Unknown command. Use ask principal, ask rate, ask years or answer N.", 0.0, False

    def plan(self):
        return ["ask principal", "ask rate", "ask years", f"answer {self._interest()}"]
