"""Function machine: a hidden linear rule y = a x + b; find the input that makes it print the target.

``feed x`` puts a whole number into the machine and shows what comes out (three feeds at most).
Two feeds pin the rule down; the agent then solves a x + b = target and names that input with
``solve x``, which ends the episode. Each of the first two feeds of a new input earns a small
partial reward.
"""
# skill: linear_equation
# difficulty: 0.45
import random
import re


class FunctionMachineEnv:
    FEEDS = 3

    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.slope = 3
        self.offset = 0
        self.answer = 0
        self.target = 0
        self.fed = []
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.slope = rng.choice([-1, 1]) * rng.randint(2, 9)
        self.offset = rng.randint(-40, 40)
        self.answer = rng.choice([n for n in range(-25, 26) if n not in (0, 1)])
        self.target = self.slope * self.answer + self.offset
        self.fed = []
        return (
            f"A machine applies a hidden rule y = a*x + b (a and b whole numbers). Which input x makes it "
            f"print {self.target}?\nActions: \\boxed{{feed x}} shows the output for a whole number x "
            f"({self.FEEDS} feeds at most); \\boxed{{solve x}} names the input (ends the episode). "
            "One action per turn.",
            {},
        )

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] in ("feed", "solve"):
            try:
                x = int(words[1])
            except ValueError:
                return f"Give a whole number, e.g. \\boxed{{{words[0]} 4}}.", 0.0, False, truncated, {}
            if words[0] == "solve":
                if x == self.answer:
                    return f"Correct: the machine prints {self.target} for x = {x}.", 1.0, True, False, {}
                return f"Wrong: x = {x} does not give {self.target}.", 0.0, True, False, {}
            if abs(x) > 1000:
                return "The machine only takes inputs between -1000 and 1000.", 0.0, False, truncated, {}
            if len(self.fed) >= self.FEEDS:
                return "The machine is out of tokens: solve for x.", 0.0, False, truncated, {}
            reward = 0.05 if x not in self.fed and len(set(self.fed)) < 2 else 0.0
            self.fed.append(x)
            y = self.slope * x + self.offset
            left = self.FEEDS - len(self.fed)
            return f"In: {x}  Out: {y}  ({left} feed(s) left)", reward, False, truncated, {}
        return "Unknown action. Use \\boxed{feed x} or \\boxed{solve x}.", 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{feed 0}", "\\boxed{feed 1}", f"\\boxed{{solve {self.answer}}}"]
