"""Lamp logic: find which gate joins two switches to a lamp by testing inputs (a TextGame game).

A hidden gate (and, or, xor or nand) drives the lamp from switches A and B. ``test A B`` (each 0
or 1) shows the lamp; a new input pair earns a small reward. ``gate NAME`` ends the episode:
reward 1.0 for the hidden gate, else 0.0.
"""
# skill: truth_table
# difficulty: 0.5
import random
import re


class LampLogicEnv(TextGame):
    """Test switch settings to find the hidden gate that drives the lamp."""

    max_turns = 8
    GATES = ["and", "or", "xor", "nand"]

    def setup(self, rng):
        self.gate = rng.choice(self.GATES)
        self.tested = set()
        return (
            "A lamp is wired to switches A and B through one hidden gate: and, or, xor or nand.\n"
            "Commands: test A B (each 0 or 1) shows whether the lamp is on; gate NAME names the gate (one try)."
        )

    def _lamp(self, a, b):
        if self.gate == "and":
            return a and b
        if self.gate == "or":
            return a or b
        if self.gate == "xor":
            return a != b
        return not (a and b)

    def act(self, command):
        words = command.split()
        if len(words) == 3 and words[0] == "test" and words[1] in ("0", "1") and words[2] in ("0", "1"):
            pair = (words[1], words[2])
            reward = 0.0 if pair in self.tested else 0.02
            self.tested.add(pair)
            state = "ON" if self._lamp(words[1] == "1", words[2] == "1") else "OFF"
            return f"With A={words[1]} and B={words[2]} the lamp is {state}.", reward, False
        if len(words) == 2 and words[0] == "gate":
            if words[1] == self.gate:
                return f"Right: the gate is {self.gate}.", 1.0, True
            return f"Wrong: the gate is not {words[1]}.", 0.0, True
        return "Unknown command. Use test A B or gate NAME.", 0.0, False

    def plan(self):
        return ["test 0 0", "test 0 1", "test 1 1", f"gate {self.gate}"]
