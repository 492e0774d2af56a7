"""Rail yard: wagons arrive in a hidden order and must leave in number order through a one-track siding.

Only the wagon at the front of the incoming track is visible. ``shunt`` moves it into the siding,
a dead end where only the last wagon in can come out first (a stack); ``pass`` sends it straight
to the outgoing track; ``pull`` moves the wagon at the siding's mouth to the outgoing track.
Wagons must leave as 1, 2, 3, ...: sending a wrong wagon out derails the train and ends the
episode. Each wagon sent out in order earns a small partial reward; all of them out wins.
"""
# skill: stack_machine
# difficulty: 0.55
import random
import re


class RailYardEnv:
    def __init__(self, max_turns=20):
        self.max_turns = max_turns
        self.turn_count = 0
        self.incoming = []
        self.siding = []
        self.sent = 0
        self.total = 6
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.total = rng.choice([5, 6, 7])
        # a random run of shunts and pulls defines an arrival order the siding can sort
        self.incoming = [0] * self.total
        pending, label, pushed = [], 1, 0
        while label <= self.total:
            if pushed < self.total and (not pending or rng.random() < 0.5):
                pending.append(pushed)
                pushed += 1
            else:
                self.incoming[pending.pop()] = label
                label += 1
        if self.incoming == sorted(self.incoming):
            self.incoming[0], self.incoming[1] = self.incoming[1], self.incoming[0]
        self.siding = []
        self.sent = 0
        return (
            f"{self.total} wagons, numbered 1 to {self.total}, wait on the incoming track in an unknown order; "
            "they must leave in number order. The siding is a dead end: the last wagon in comes out first.\n"
            "Actions: \\boxed{shunt} (front incoming wagon into the siding), \\boxed{pass} (front incoming wagon "
            "out), \\boxed{pull} (siding's mouth wagon out). One action per turn.\n" + self._view(),
            {},
        )

    def _view(self):
        front = str(self.incoming[0]) if self.incoming else "none"
        mouth = str(self.siding[-1]) if self.siding else "empty"
        return (
            f"Front incoming wagon: {front} ({len(self.incoming)} on the track). Siding (mouth last): "
            f"{' '.join(str(w) for w in self.siding) or 'empty'}, mouth {mouth}. Wagons out: {self.sent}."
        )

    def _send(self, wagon):
        if wagon != self.sent + 1:
            return f"Wagon {wagon} left before wagon {self.sent + 1}: the train derails.", 0.0, True, False, {}
        self.sent += 1
        if self.sent == self.total:
            return "All wagons left in order. The yard is clear.", 1.0, True, False, {}
        return f"Wagon {wagon} leaves. " + self._view(), 0.05, False, self.turn_count >= self.max_turns, {}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        cmd = m.group(1).strip().lower() if m else ""
        if cmd in ("shunt", "pass") and not self.incoming:
            return "The incoming track is empty. " + self._view(), 0.0, False, truncated, {}
        if cmd == "shunt":
            self.siding.append(self.incoming.pop(0))
            return "Shunted into the siding. " + self._view(), 0.0, False, truncated, {}
        if cmd == "pass":
            return self._send(self.incoming.pop(0))
        if cmd == "pull":
            if not self.siding:
                return "The siding is empty. " + self._view(), 0.0, False, truncated, {}
            return self._send(self.siding.pop())
        return "Unknown action. Use \\boxed{shunt}, \\boxed{pass} or \\boxed{pull}. " + self._view(), 0.0, False, truncated, {}

    def solution(self):
        incoming, siding, nxt, actions = list(self.incoming), [], 1, []
        while nxt <= self.total:
            if siding and siding[-1] == nxt:
                siding.pop()
                actions.append("\\boxed{pull}")
                nxt += 1
            elif incoming and incoming[0] == nxt:
                incoming.pop(0)
                actions.append("\\boxed{pass}")
                nxt += 1
            elif incoming:
                siding.append(incoming.pop(0))
                actions.append("\\boxed{shunt}")
            else:
                break
        return actions
