"""Gas tank: heat a sealed rigid tank until its gauge shows a target pressure (Gay-Lussac's law).

The tank's pressure (kPa) and temperature (degrees Celsius) are hidden until read with ``read
pressure`` and ``read temperature``. ``set T`` sets the thermostat to T degrees Celsius; at
constant volume the pressure is proportional to the absolute temperature, so the agent must work
in kelvin (T + 273.15). A setting that brings the pressure within 0.5% of the target wins; three
settings that miss end the episode. Each first reading, and each setting closer to the target
than any before, earns a small partial reward.
"""
# skill: formula
# difficulty: 0.6
import random
import re


class GasTankEnv:
    KELVIN = 273.15
    SETTINGS = 3

    def __init__(self, max_turns=9):
        self.max_turns = max_turns
        self.turn_count = 0
        self.p0 = 100.0
        self.t0 = 20
        self.temp = 20.0
        self.target = 120.0
        self.misses = 0
        self.gap = 1.0
        self.read = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.p0 = rng.randint(800, 2500) / 10
        self.t0 = rng.randint(5, 40)
        self.temp = float(self.t0)
        goal_temp = rng.randint(60, 250)
        self.target = round(self._pressure(goal_temp), 1)
        self.misses = 0
        self.gap = abs(self.p0 - self.target)
        self.read = set()
        return (
            f"A sealed rigid tank of gas must reach a pressure of {self.target:.1f} kPa.\nActions: "
            "\\boxed{read pressure} and \\boxed{read temperature} read the gauges; \\boxed{set T} heats or cools "
            f"the tank to T degrees Celsius (-50 to 400). {self.SETTINGS} settings that miss the target by more "
            "than 0.5% end the episode. One action per turn.",
            {},
        )

    def _pressure(self, celsius):
        return self.p0 * (celsius + self.KELVIN) / (self.t0 + self.KELVIN)

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "read" and words[1] in ("pressure", "temperature"):
            reward = 0.0 if words[1] in self.read else 0.03
            self.read.add(words[1])
            if words[1] == "pressure":
                return f"The pressure gauge reads {self._pressure(self.temp):.1f} kPa.", reward, False, truncated, {}
            return f"The thermometer reads {self.temp:.1f} degrees C.", reward, False, truncated, {}
        if len(words) == 2 and words[0] == "set":
            try:
                celsius = float(words[1])
            except ValueError:
                return "Set a temperature in degrees Celsius, e.g. \\boxed{set 85.5}.", 0.0, False, truncated, {}
            if not -50 <= celsius <= 400:
                return "The thermostat takes -50 to 400 degrees C.", 0.0, False, truncated, {}
            self.temp = celsius
            pressure = self._pressure(celsius)
            gap = abs(pressure - self.target)
            if gap <= 0.005 * self.target:
                return f"The gauge settles at {pressure:.1f} kPa: target reached.", 1.0, True, False, {}
            self.misses += 1
            reward = 0.05 if gap < self.gap else 0.0
            self.gap = min(self.gap, gap)
            if self.misses >= self.SETTINGS:
                return f"The gauge settles at {pressure:.1f} kPa. No settings left.", 0.0, True, False, {}
            return f"The gauge settles at {pressure:.1f} kPa, not the target.", reward, False, truncated, {}
        return "Unknown action. Use \\boxed{read pressure}, \\boxed{read temperature} or \\boxed{set T}.", 0.0, False, truncated, {}

    def solution(self):
        kelvin = (self.t0 + self.KELVIN) * self.target / self.p0
        return ["\\boxed{read pressure}", "\\boxed{read temperature}", f"\\boxed{{set {kelvin - self.KELVIN:.1f}}}"]
