"""Clause fixer: find a true/false assignment that satisfies every clause of a hidden formula.

The formula is an AND of ten or so OR-clauses over variables x1..xn, but the clauses are hidden.
``try BITS`` (one bit per variable, e.g. 101100) evaluates an assignment: it says how many clauses
hold and shows the first clause that fails, so the formula is uncovered by trying. An assignment
that satisfies every clause wins; six failed tries end the episode. A try that satisfies more
clauses than any before earns a small partial reward.
"""
# skill: truth_table
# difficulty: 0.6
import random
import re


class ClauseFixerEnv:
    TRIES = 6

    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.n = 5
        self.planted = []
        self.clauses = []
        self.tries = 0
        self.best = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.tries = 0
        self.best = 0
        self.n = rng.choice([5, 6])
        self.planted = [rng.randint(0, 1) for _ in range(self.n)]
        self.planted[rng.randrange(self.n)] = 1
        zeros = [i for i in range(self.n) if i != self.planted.index(1)]
        self.planted[rng.choice(zeros)] = 0
        ones = [i for i, v in enumerate(self.planted) if v]
        offs = [i for i, v in enumerate(self.planted) if not v]
        # one all-positive and one all-negative clause rule out the all-false and all-true guesses
        clauses = [
            [(rng.choice(ones), True)] + [(i, True) for i in rng.sample(offs, min(1, len(offs)))],
            [(rng.choice(offs), False)] + [(i, False) for i in rng.sample(ones, min(1, len(ones)))],
        ]
        for _ in range(self.n + 3):
            chosen = rng.sample(range(self.n), rng.choice([2, 3]))
            clause = [(i, rng.random() < 0.5) for i in chosen]
            if not any(self.planted[i] == int(pos) for i, pos in clause):
                k = rng.randrange(len(clause))
                clause[k] = (clause[k][0], not clause[k][1])
            clauses.append(clause)
        rng.shuffle(clauses)
        self.clauses = [sorted(set(c)) for c in clauses]
        return (
            f"A hidden formula over x1..x{self.n} is an AND of {len(self.clauses)} OR-clauses. Find an "
            "assignment that makes every clause true.\nActions: \\boxed{try BITS} with one bit per "
            f"variable (x1 first, e.g. {'10' * (self.n // 2)}{'1' * (self.n % 2)}) evaluates it; {self.TRIES} "
            "failed tries end the episode. One action per turn.",
            {},
        )

    def _text(self, clause):
        return "(" + " or ".join(("" if pos else "not ") + f"x{i + 1}" for i, pos in clause) + ")"

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "try":
            bits = words[1]
            if len(bits) != self.n or set(bits) - {"0", "1"}:
                return f"Give exactly {self.n} bits of 0 and 1, x1 first.", 0.0, False, truncated, {}
            values = [int(ch) for ch in bits]
            failing = [c for c in self.clauses if not any(values[i] == int(pos) for i, pos in c)]
            held = len(self.clauses) - len(failing)
            if not failing:
                return f"All {held} clauses hold: the formula is satisfied.", 1.0, True, False, {}
            self.tries += 1
            reward = 0.05 if held > self.best else 0.0
            self.best = max(self.best, held)
            text = f"{held}/{len(self.clauses)} clauses hold; this one fails: {self._text(failing[0])}."
            if self.tries >= self.TRIES:
                return text + " No tries left.", 0.0, True, False, {}
            return text + f" {self.TRIES - self.tries} tries left.", reward, False, truncated, {}
        return "Unknown action. Use \\boxed{try BITS}.", 0.0, False, truncated, {}

    def solution(self):
        probe = [1 - (i % 2) for i in range(self.n)]
        wins = all(any(probe[i] == int(pos) for i, pos in c) for c in self.clauses)
        actions = [] if wins else ["\\boxed{try " + "".join(str(v) for v in probe) + "}"]
        return actions + ["\\boxed{try " + "".join(str(v) for v in self.planted) + "}"]
