"""Bell towers: every bell rings on its own hidden period; find the first minute they all ring together.

All bells ring at minute 0. ``listen NAME`` reports the minutes at which that bell rang during a
twenty-minute window of the first hour (each bell is heard through its own window), from which
its period follows; ``together T`` names the first minute after 0 at which every bell rings at
once, the lcm of the periods, and ends the episode. Hearing a bell for the first time earns a
small partial reward.
"""
# skill: gcd_steps
# difficulty: 0.5
import math
import random
import re


class BellTowersEnv:
    TOWERS = ["abbey", "castle", "harbour", "market", "chapel", "school"]

    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.periods = {}
        self.windows = {}
        self.heard = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        names = sorted(rng.sample(self.TOWERS, rng.choice([3, 4])))
        chosen = rng.sample(range(2, 11), len(names))
        self.periods = dict(zip(names, chosen))
        self.windows = {n: rng.randint(1, 40) for n in names}
        self.heard = set()
        return (
            f"The bells of {', '.join(names)} all rang at minute 0; each rings again and again on its own "
            "fixed period (whole minutes).\nActions: \\boxed{listen NAME} tells when that bell rang during a "
            "twenty-minute window; \\boxed{together T} names the first minute after 0 when all bells ring "
            "at once (ends the episode). One action per turn.",
            {},
        )

    def _lcm(self):
        out = 1
        for p in self.periods.values():
            out = out * p // math.gcd(out, p)
        return out

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "listen":
            name = words[1]
            if name not in self.periods:
                return f"There is no bell at '{name}'. Bells: {', '.join(self.periods)}.", 0.0, False, truncated, {}
            lo = self.windows[name]
            hi = lo + 19
            rings = [t for t in range(lo, hi + 1) if t % self.periods[name] == 0]
            reward = 0.0 if name in self.heard else 0.04
            self.heard.add(name)
            times = ", ".join(str(t) for t in rings)
            return f"Between minutes {lo} and {hi} the {name} bell rang at: {times}.", reward, False, truncated, {}
        if len(words) == 2 and words[0] == "together":
            if not words[1].isdigit():
                return "Name a whole minute, e.g. \\boxed{together 60}.", 0.0, False, truncated, {}
            if int(words[1]) == self._lcm():
                return "Correct: every bell rings at that minute, and not before.", 1.0, True, False, {}
            return "Wrong: the bells do not first meet then.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{listen NAME} or \\boxed{together T}.", 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{listen {n}}}" for n in self.periods] + [f"\\boxed{{together {self._lcm()}}}"]
