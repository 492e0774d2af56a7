"""Energy meter: compute a kinetic energy in joules from a mass in grams and a speed in km/h.

The object's mass and speed are hidden until measured; the instruments report grams and
kilometres per hour, so the agent must convert to SI units before applying E = m v^2 / 2.
``answer E`` (joules, within 1%) ends the episode. Each first measurement earns a small partial
reward.
"""
# skill: unit_convert
# difficulty: 0.5
import random
import re


class KineticEnergyEnv:
    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.grams = 100
        self.kmh = 36
        self.measured = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.measured = set()
        self.grams = rng.choice([50, 120, 250, 400, 750, 1500, 2200])
        self.kmh = rng.choice([18, 36, 54, 72, 90, 108])
        objects = ["a cart", "a ball", "a drone", "a sled", "a puck"]
        return (
            f"Find the kinetic energy of {rng.choice(objects)} in joules. The mass scale reads grams and the "
            "speed gun reads km/h.\nActions: \\boxed{measure mass}, \\boxed{measure speed}, "
            "\\boxed{answer E} (joules, 1% tolerance, ends the episode). One action per turn.",
            {},
        )

    def _energy(self):
        m = self.grams / 1000
        v = self.kmh / 3.6
        return 0.5 * m * v * v

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if parts == ["measure", "mass"]:
            reward = 0.05 if "mass" not in self.measured else 0.0
            self.measured.add("mass")
            return f"Mass: {self.grams} g.", reward, False, truncated, {}
        if parts == ["measure", "speed"]:
            reward = 0.05 if "speed" not in self.measured else 0.0
            self.measured.add("speed")
            return f"Speed: {self.kmh} km/h.", reward, False, truncated, {}
        if len(parts) == 2 and parts[0] == "answer":
            try:
                value = float(parts[1])
            except ValueError:
                return "Answer a number of joules, e.g. \\boxed{answer 12.5}.", 0.0, False, truncated, {}
            target = self._energy()
            if abs(value - target) <= 0.01 * target:
                return "Correct energy.", 1.0, True, False, {}
            return "Wrong energy.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{measure mass}, \\boxed{measure speed} or \\boxed{answer E}.", 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{measure mass}", "\\boxed{measure speed}", f"\\boxed{{answer {self._energy():.4f}}}"]
