"""Print queue: jobs join and leave a printer queue under rules; report the queue at closing time.

The day's events are hidden until the clock moves: ``tick`` reveals the next event. ``arrive X``
puts job X at the back, ``urgent X`` puts it at the front, ``serve`` prints (removes) the front
job and ``bump`` moves the front job to the back. After the last event, ``queue X Y ...``
reports the jobs still waiting, front first (``queue empty`` if none), and ends the episode.
Each event revealed earns a small partial reward.
"""
# skill: stack_machine
# difficulty: 0.5
import random
import re


class PrintQueueEnv:
    JOBS = ["memo", "poster", "invoice", "map", "report", "ticket", "letter", "chart", "menu", "flyer"]

    def __init__(self, max_turns=16):
        self.max_turns = max_turns
        self.turn_count = 0
        self.events = []
        self.revealed = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.revealed = 0
        names = rng.sample(self.JOBS, len(self.JOBS))
        waiting, events = 0, []
        for _ in range(rng.randint(9, 12)):
            kinds = ["arrive", "arrive", "urgent"] if names else []
            if waiting:
                kinds += ["serve", "serve", "bump"]
            kind = rng.choice(kinds)
            if kind in ("arrive", "urgent"):
                events.append((kind, names.pop()))
                waiting += 1
            else:
                events.append((kind,))
                waiting -= 1 if kind == "serve" else 0
        self.events = events
        return (
            f"A printer queue starts empty; {len(events)} events happen today, hidden until the clock moves.\n"
            "Rules: arrive X joins the back; urgent X joins the front; serve prints and removes the front job; "
            "bump sends the front job to the back.\nActions: \\boxed{tick} reveals the next event; after the last "
            "one, \\boxed{queue X Y ...} reports the waiting jobs front first, or \\boxed{queue empty} "
            "(ends the episode). One action per turn.",
            {},
        )

    def _final(self):
        line = []
        for ev in self.events:
            if ev[0] == "arrive":
                line.append(ev[1])
            elif ev[0] == "urgent":
                line.insert(0, ev[1])
            elif ev[0] == "serve":
                line.pop(0)
            else:
                line.append(line.pop(0))
        return line

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").replace(",", " ").split()
        if words == ["tick"]:
            if self.revealed >= len(self.events):
                return "The day is over: report the queue.", 0.0, False, truncated, {}
            ev = self.events[self.revealed]
            self.revealed += 1
            return f"Event {self.revealed}/{len(self.events)}: {' '.join(ev)}.", 0.03, False, truncated, {}
        if words and words[0] == "queue":
            if self.revealed < len(self.events):
                return f"The day is not over ({self.revealed}/{len(self.events)} events seen).", 0.0, False, truncated, {}
            if len(words) == 1:
                return "Name the waiting jobs front first, or \\boxed{queue empty}.", 0.0, False, truncated, {}
            claim = [] if words[1:] == ["empty"] else words[1:]
            if claim == self._final():
                return "Correct: that is the queue at closing time.", 1.0, True, False, {}
            return "Wrong queue.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{tick} or \\boxed{queue X Y ...}.", 0.0, False, truncated, {}

    def solution(self):
        final = self._final()
        return ["\\boxed{tick}"] * len(self.events) + ["\\boxed{queue " + (" ".join(final) or "empty") + "}"]
