"""Calendar slot: query each person's busy hours and book the earliest hour everyone is free.

The working day runs from 9 to 17 (hours 9..16 can be booked). ``busy NAME`` lists a person's
busy hours; ``book H`` books hour H for the meeting. The earliest common free hour wins; a free
but later hour ends with a partial reward; an hour someone is busy ends the episode with 0.
"""
# skill: tool_use
# difficulty: 0.45
import random
import re


class CalendarEnv:
    PEOPLE = ["ana", "ben", "chen", "dora", "eli", "fay"]

    def __init__(self, max_turns=8):
        self.max_turns = max_turns
        self.turn_count = 0
        self.busy = {}
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        names = rng.sample(self.PEOPLE, 3)
        while True:
            self.busy = {n: sorted(rng.sample(range(9, 17), rng.randint(2, 4))) for n in names}
            if self._free():
                break
        return (
            f"Book a one-hour meeting for {', '.join(names)} at the earliest hour (9 to 16) when all are free.\n"
            "Actions: \\boxed{busy NAME} lists someone's busy hours; \\boxed{book H} books hour H (ends the episode). "
            "One action per turn.",
            {},
        )

    def _free(self):
        return [h for h in range(9, 17) if all(h not in hours for hours in self.busy.values())]

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) == 2 and parts[0] == "busy":
            hours = self.busy.get(parts[1])
            if hours is None:
                return f"{parts[1]} is not invited.", 0.0, False, truncated, {}
            return f"{parts[1]} is busy at {', '.join(str(h) for h in hours)}.", 0.0, False, truncated, {}
        if len(parts) == 2 and parts[0] == "book" and parts[1].isdigit():
            h = int(parts[1])
            free = self._free()
            if h == free[0]:
                return f"Booked at {h}: the earliest common free hour.", 1.0, True, False, {}
            if h in free:
                return f"Booked at {h}, but an earlier hour was free.", 0.3, True, False, {}
            return f"Someone is busy at {h}: the meeting fails.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{busy NAME} or \\boxed{book H}.", 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{busy {n}}}" for n in self.busy] + [f"\\boxed{{book {self._free()[0]}}}"]
