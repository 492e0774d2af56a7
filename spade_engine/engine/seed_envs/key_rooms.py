"""Key rooms: explore a house whose doors are seen only from inside each room; the vault needs a key.

The agent starts in the hall and sees only the doors of the room it stands in. ``go ROOM`` walks
through a door to a neighbouring room; ``take key`` picks up the key in the room that holds it.
The vault's door stays locked until the key is carried. Entering a room for the first time earns
a small partial reward, and so does taking the key; entering the vault wins.
"""
# skill: graph_path
# difficulty: 0.6
import random
import re


class KeyRoomsEnv:
    ROOMS = ["kitchen", "library", "cellar", "attic", "study", "pantry", "gallery", "chapel", "armoury", "garden"]

    def __init__(self, max_turns=24):
        self.max_turns = max_turns
        self.turn_count = 0
        self.doors = {}
        self.here = "hall"
        self.key_room = ""
        self.has_key = False
        self.seen = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        names = ["hall"] + rng.sample(self.ROOMS, rng.choice([6, 7]))
        self.doors = {n: set() for n in names}
        parent_of = {}
        for i in range(1, len(names)):
            parent_of[names[i]] = names[rng.randrange(i)]
            self._connect(names[i], parent_of[names[i]])
        leaves = [n for n in names[1:] if n not in parent_of.values()]
        vault = max(leaves, key=lambda n: (self._depth(n, parent_of), n))
        for _ in range(2):
            a, b = rng.sample([n for n in names if n != vault], 2)
            self._connect(a, b)
        self.doors["vault"] = self.doors.pop(vault)
        for room in self.doors.values():
            if vault in room:
                room.discard(vault)
                room.add("vault")
        self.key_room = rng.choice([n for n in self.doors if n not in ("hall", "vault")])
        self.here = "hall"
        self.has_key = False
        self.seen = {"hall"}
        return (
            "You stand in the hall of an old house. Somewhere is the vault, locked; its key lies in another room.\n"
            "Actions: \\boxed{go ROOM} walks to a neighbouring room; \\boxed{take key} picks up the key where it "
            "lies. Reaching the vault with the key wins. One action per turn.\n" + self._look(),
            {},
        )

    def _connect(self, a, b):
        self.doors[a].add(b)
        self.doors[b].add(a)

    @staticmethod
    def _depth(node, parent_of):
        d = 0
        while node in parent_of:
            node, d = parent_of[node], d + 1
        return d

    def _look(self):
        text = f"You are in the {self.here}. Doors lead to: {', '.join(sorted(self.doors[self.here]))}."
        if self.here == self.key_room and not self.has_key:
            text += " A brass key lies on the floor."
        return text

    def _route(self, start, goal):
        paths = {start: [start]}
        frontier = [start]
        while frontier:
            nxt = []
            for room in frontier:
                for other in sorted(self.doors[room]):
                    if other not in paths and (other != "vault" or goal == "vault"):
                        paths[other] = paths[room] + [other]
                        nxt.append(other)
            frontier = nxt
        return paths[goal][1:]

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").split()
        if words == ["take", "key"]:
            if self.here != self.key_room or self.has_key:
                return "There is no key here. " + self._look(), 0.0, False, truncated, {}
            self.has_key = True
            return "You pocket the brass key. " + self._look(), 0.1, False, truncated, {}
        if len(words) == 2 and words[0] == "go":
            room = words[1]
            if room not in self.doors[self.here]:
                return f"No door from the {self.here} to '{room}'. " + self._look(), 0.0, False, truncated, {}
            if room == "vault":
                if not self.has_key:
                    return "The vault door is locked: find the key first. " + self._look(), 0.0, False, truncated, {}
                return "The key turns and the vault opens. You made it.", 1.0, True, False, {}
            self.here = room
            reward = 0.0 if room in self.seen else 0.03
            self.seen.add(room)
            return self._look(), reward, False, truncated, {}
        return "Unknown action. Use \\boxed{go ROOM} or \\boxed{take key}. " + self._look(), 0.0, False, truncated, {}

    def solution(self):
        to_key = self._route("hall", self.key_room)
        to_vault = self._route(self.key_room, "vault")
        return [f"\\boxed{{go {r}}}" for r in to_key] + ["\\boxed{take key}"] + [f"\\boxed{{go {r}}}" for r in to_vault]
