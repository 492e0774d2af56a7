"""Fused circuit: find an unknown resistor with Ohm's law, reading currents without blowing the fuse.

An unknown resistor Rx sits in series with a known resistor and a 100 mA fuse. ``supply V`` sets
the supply to V volts (1 to 30) and reads the current in milliamps, rounded to 0.1 mA; a
current above the fuse rating blows it and ends the episode. Low currents are imprecise, so the
agent should raise the voltage carefully. ``resistance R`` names Rx in ohms (within 2%) and ends
the episode. The first reading precise enough to use (at least 20 mA) earns a small partial
reward.
"""
# skill: formula
# difficulty: 0.55
import random
import re


class FusedCircuitEnv:
    FUSE_MA = 100.0

    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.known = 100
        self.unknown = 100
        self.precise = False
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.known = rng.choice([47, 68, 100, 150, 220])
        self.unknown = rng.randint(20, 480)
        self.precise = False
        return (
            f"A circuit: supply -> {self.known} ohm resistor -> unknown resistor Rx -> {self.FUSE_MA:g} mA fuse -> back. "
            "Find Rx.\nActions: \\boxed{supply V} sets the supply to V volts (whole volts, 1 to 30) and reads the "
            "current in mA; \\boxed{resistance R} names Rx in ohms (within 2%; ends the episode). A current above "
            f"{self.FUSE_MA:g} mA blows the fuse. One action per turn.",
            {},
        )

    def _milliamps(self, volts):
        return 1000.0 * volts / (self.known + self.unknown)

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "supply":
            if not words[1].isdigit() or not 1 <= int(words[1]) <= 30:
                return "The supply takes whole volts from 1 to 30.", 0.0, False, truncated, {}
            current = self._milliamps(int(words[1]))
            if current > self.FUSE_MA:
                return f"{current:.1f} mA flows: the fuse blows and the circuit is dead.", 0.0, True, False, {}
            reward = 0.05 if current >= 20 and not self.precise else 0.0
            self.precise = self.precise or current >= 20
            return f"At {words[1]} V the ammeter reads {current:.1f} mA.", reward, False, truncated, {}
        if len(words) == 2 and words[0] == "resistance":
            try:
                value = float(words[1])
            except ValueError:
                return "Name Rx as a number of ohms, e.g. \\boxed{resistance 180}.", 0.0, False, truncated, {}
            if abs(value - self.unknown) <= 0.02 * self.unknown:
                return f"Correct: Rx is {self.unknown} ohms.", 1.0, True, False, {}
            return "Wrong resistance.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{supply V} or \\boxed{resistance R}.", 0.0, False, truncated, {}

    def solution(self):
        volts = max(1, min(30, int(0.09 * (self.known + self.unknown))))
        return [f"\\boxed{{supply {volts}}}", f"\\boxed{{resistance {self.unknown}}}"]
