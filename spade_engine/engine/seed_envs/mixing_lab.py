"""Mixing lab: measure two stock solutions, then mix volumes that hit a target concentration and volume.

The concentrations of stocks A and B (percent) are hidden until measured (``measure A``);
``mix vA vB`` pours the two volumes (millilitres) together. The mix must have the target volume
exactly and a concentration within 0.5 percentage points. A mix of the right volume but the wrong
concentration ends with a small partial reward.
"""
# skill: unit_convert
# difficulty: 0.55
import random
import re


class MixingLabEnv:
    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.conc = {"a": 10, "b": 40}
        self.volume = 100
        self.target = 20.0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        lo, hi = rng.randint(5, 30), rng.randint(45, 90)
        self.conc = {"a": lo, "b": hi}
        self.volume = rng.choice([100, 200, 250, 500])
        share = rng.choice([0.2, 0.25, 0.4, 0.5, 0.6, 0.75])
        self.target = round(lo * (1 - share) + hi * share, 2)
        return (
            f"Prepare {self.volume} mL of a {self.target}% solution from stocks A and B, whose "
            "concentrations are unknown until measured.\n"
            "Actions: \\boxed{measure A}, \\boxed{measure B}, \\boxed{mix vA vB} (millilitres of A and B; "
            "ends the episode). One action per turn.",
            {},
        )

    def _plan(self):
        a, b = self.conc["a"], self.conc["b"]
        vb = self.volume * (self.target - a) / (b - a)
        return round(self.volume - vb, 2), round(vb, 2)

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "measure" and parts[1] in self.conc:
            return f"Stock {parts[1].upper()} is {self.conc[parts[1]]}%.", 0.05, False, truncated, {}
        if len(parts) == 3 and parts[0] == "mix":
            try:
                va, vb = float(parts[1]), float(parts[2])
            except ValueError:
                return "Volumes are numbers, e.g. \\boxed{mix 60 40}.", 0.0, False, truncated, {}
            if va < 0 or vb < 0 or va + vb <= 0:
                return "Volumes must be positive.", 0.0, False, truncated, {}
            conc = (va * self.conc["a"] + vb * self.conc["b"]) / (va + vb)
            right_volume = abs(va + vb - self.volume) <= 0.5
            if right_volume and abs(conc - self.target) <= 0.5:
                return f"The mix is {conc:.2f}%: on target.", 1.0, True, False, {}
            if right_volume:
                return f"The mix is {conc:.2f}%, not {self.target}%.", 0.2, True, False, {}
            return f"The mix has {va + vb:g} mL, not {self.volume} mL.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{measure A}, \\boxed{measure B} or \\boxed{mix vA vB}.", 0.0, False, truncated, {}

    def solution(self):
        va, vb = self._plan()
        return ["\\boxed{measure A}", "\\boxed{measure B}", f"\\boxed{{mix {va} {vb}}}"]
