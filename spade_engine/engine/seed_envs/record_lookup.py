"""Record lookup: follow references between database records to answer a question about the last one.

Records are fetched by id with ``get ID``; a record may point to another record (its manager, its
warehouse, its parent company...). The question asks for a field of the record at the end of a
chain that starts at a given id. ``answer X`` submits the value. Each record fetched on the
chain earns a small partial reward.
"""
# skill: tool_use
# difficulty: 0.5
import random
import re


class RecordLookupEnv:
    CITIES = ["Lisbon", "Osaka", "Quito", "Tartu", "Accra", "Perth", "Bergen", "Cusco", "Dakar", "Hanoi"]
    NAMES = ["Ada", "Bram", "Cleo", "Dev", "Esme", "Farid", "Gwen", "Hugo", "Ines", "Jonas"]

    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.turn_count = 0
        self.records = {}
        self.chain = []
        self.fetched = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.fetched = set()
        ids = rng.sample(range(100, 999), 7)
        names = rng.sample(self.NAMES, 7)
        self.records = {}
        for rid, name in zip(ids, names):
            self.records[rid] = {"name": name, "city": rng.choice(self.CITIES), "manager": None}
        length = rng.randint(3, 4)
        self.chain = ids[:length]
        for a, b in zip(self.chain, self.chain[1:]):
            self.records[a]["manager"] = b
        for rid in ids[length:]:
            self.records[rid]["manager"] = rng.choice(ids[:length])
        return (
            f"Employee records are stored by id. Question: in which city does the manager of the manager "
            f"of ... (follow 'manager' until a record has none) of employee {self.chain[0]} work?\n"
            "Actions: \\boxed{get ID} fetches a record; \\boxed{answer CITY} submits the city (ends the episode). "
            "One action per turn.",
            {},
        )

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip() if m else "").split()
        if len(parts) == 2 and parts[0].lower() == "get" and parts[1].isdigit():
            rid = int(parts[1])
            rec = self.records.get(rid)
            if rec is None:
                return f"No record {rid}.", 0.0, False, truncated, {}
            reward = 0.05 if rid in self.chain and rid not in self.fetched else 0.0
            self.fetched.add(rid)
            manager = rec["manager"] if rec["manager"] is not None else "none"
            return f"Record {rid}: name={rec['name']}, city={rec['city']}, manager={manager}.", reward, False, truncated, {}
        if len(parts) == 2 and parts[0].lower() == "answer":
            if parts[1].lower() == self.records[self.chain[-1]]["city"].lower():
                return "Correct city.", 1.0, True, False, {}
            return "Wrong city.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{get ID} or \\boxed{answer CITY}.", 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{get {rid}}}" for rid in self.chain] + [f"\\boxed{{answer {self.records[self.chain[-1]]['city']}}}"]
