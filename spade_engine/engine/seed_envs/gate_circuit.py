"""Gate circuit: four switches feed a circuit of three hidden logic gates; write out the lamp's truth table.

The wiring is lamp = G3(G1(A, B), G2(C, D)); the type of each gate (AND, OR, XOR, NAND, NOR or
XNOR) is hidden until inspected with ``inspect g1``. ``test ABCD`` sets the switches (four bits,
e.g. 1011) and shows whether the lamp lights. ``column BITS`` gives the lamp's output for all 16
settings, 0000 first and 1111 last (16 bits), and ends the episode. Each gate inspected for the
first time earns a small partial reward.
"""
# skill: truth_table
# difficulty: 0.6
import random
import re


class GateCircuitEnv:
    GATES = {
        "AND": (0, 0, 0, 1),
        "OR": (0, 1, 1, 1),
        "XOR": (0, 1, 1, 0),
        "NAND": (1, 1, 1, 0),
        "NOR": (1, 0, 0, 0),
        "XNOR": (1, 0, 0, 1),
    }

    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.turn_count = 0
        self.types = {"g1": "AND", "g2": "AND", "g3": "AND"}
        self.inspected = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        names = sorted(self.GATES)
        self.types = {g: rng.choice(names) for g in ("g1", "g2", "g3")}
        self.inspected = set()
        return (
            "Four switches A, B, C, D drive a lamp through three logic gates: lamp = G3(G1(A, B), G2(C, D)). "
            "Each gate is one of AND, OR, XOR, NAND, NOR, XNOR, but which one is hidden.\n"
            "Actions: \\boxed{inspect g1} (or g2, g3) reveals a gate's type; \\boxed{test 1011} sets A, B, C, D "
            "and shows the lamp; \\boxed{column BITS} gives the lamp (1 = on) for all 16 settings in order "
            "0000, 0001, ..., 1111 (16 bits; ends the episode). One action per turn.",
            {},
        )

    def _gate(self, name, x, y):
        return self.GATES[self.types[name]][2 * x + y]

    def _lamp(self, a, b, c, d):
        return self._gate("g3", self._gate("g1", a, b), self._gate("g2", c, d))

    def _column(self):
        return "".join(str(self._lamp((n >> 3) & 1, (n >> 2) & 1, (n >> 1) & 1, n & 1)) for n in range(16))

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if len(words) == 2 and words[0] == "inspect":
            if words[1] not in self.types:
                return "The gates are g1, g2 and g3.", 0.0, False, truncated, {}
            reward = 0.0 if words[1] in self.inspected else 0.04
            self.inspected.add(words[1])
            return f"Gate {words[1].upper()} is {self.types[words[1]]}.", reward, False, truncated, {}
        if len(words) == 2 and words[0] == "test":
            bits = words[1]
            if len(bits) != 4 or set(bits) - {"0", "1"}:
                return "Set four switches with bits, e.g. \\boxed{test 0110}.", 0.0, False, truncated, {}
            lit = self._lamp(*(int(ch) for ch in bits))
            return f"A={bits[0]} B={bits[1]} C={bits[2]} D={bits[3]}: the lamp is {'ON' if lit else 'off'}.", 0.0, False, truncated, {}
        if words and words[0] == "column":
            bits = "".join(words[1:])
            if len(bits) != 16 or set(bits) - {"0", "1"}:
                return "The column is 16 bits of 0 and 1, setting 0000 first.", 0.0, False, truncated, {}
            if bits == self._column():
                return "Correct: that is the lamp's truth table.", 1.0, True, False, {}
            wrong = sum(a != b for a, b in zip(bits, self._column()))
            return f"Wrong column: {wrong} of 16 rows differ.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{inspect g}, \\boxed{test ABCD} or \\boxed{column BITS}.", 0.0, False, truncated, {}

    def solution(self):
        return ["\\boxed{inspect g1}", "\\boxed{inspect g2}", "\\boxed{inspect g3}", f"\\boxed{{column {self._column()}}}"]
