"""Toll roads: drive from the start town to the goal on a road map whose tolls are hidden, within a budget.

The roads are listed but their tolls are not: ``toll X Y`` asks the toll of one road and
``drive X`` takes the road from the current town to X, paying its toll. The budget is at most
two coins above the cheapest route, so the agent must compare routes before driving. Spending more than
the budget ends the trip; arriving at the goal within it wins. Reaching a town from which the
goal is cheaper than from anywhere reached before earns a small partial reward.
"""
# skill: graph_path
# difficulty: 0.65
import random
import re


class TollRoadsEnv:
    TOWNS = ["avon", "brook", "cliff", "dale", "elm", "ford", "glen", "heath"]

    def __init__(self, max_turns=22):
        self.max_turns = max_turns
        self.turn_count = 0
        self.tolls = {}
        self.start = ""
        self.goal = ""
        self.at = ""
        self.spent = 0
        self.budget = 0
        self.closest = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        towns = rng.sample(self.TOWNS, rng.choice([6, 7]))
        self.tolls = {}
        for i in range(1, len(towns)):
            self.tolls[frozenset((towns[i], towns[rng.randrange(i)]))] = rng.randint(1, 9)
        for _ in range(3):
            a, b = rng.sample(towns, 2)
            self.tolls.setdefault(frozenset((a, b)), rng.randint(1, 9))
        self.start = towns[0]
        costs = self._costs(self.start)
        near = {t for road in self.tolls if self.start in road for t in road}
        self.goal = max(towns[1:], key=lambda t: (t not in near, costs[t], t))
        self.budget = costs[self.goal] + rng.randint(0, 2)
        self.at = self.start
        self.spent = 0
        self.closest = self._costs(self.goal)[self.start]
        roads = ", ".join(sorted("-".join(sorted(r)) for r in self.tolls))
        return (
            f"Drive from {self.start} to {self.goal} with at most {self.budget} coins of tolls. Roads (two-way): "
            f"{roads}. Tolls are hidden.\nActions: \\boxed{{toll X Y}} asks the toll of the road X-Y; "
            "\\boxed{drive X} takes the road from where you are to X and pays its toll. One action per turn.",
            {},
        )

    def _costs(self, source):
        towns = {t for road in self.tolls for t in road}
        best = {t: 10 ** 6 for t in towns}
        best[source] = 0
        todo = set(towns)
        while todo:
            here = min(sorted(todo), key=lambda t: best[t])
            todo.discard(here)
            for road, fee in self.tolls.items():
                if here in road:
                    (other,) = road - {here}
                    best[other] = min(best[other], best[here] + fee)
        return best

    def _status(self):
        return f"You are in {self.at}, {self.spent}/{self.budget} coins spent."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").replace("-", " ").split()
        if len(words) == 3 and words[0] == "toll":
            road = frozenset(words[1:])
            if road not in self.tolls:
                return f"There is no road {words[1]}-{words[2]}. " + self._status(), 0.0, False, truncated, {}
            return f"The road {words[1]}-{words[2]} costs {self.tolls[road]} coins. " + self._status(), 0.0, False, truncated, {}
        if len(words) == 2 and words[0] == "drive":
            road = frozenset((self.at, words[1]))
            if road not in self.tolls:
                return f"No road from {self.at} to '{words[1]}'. " + self._status(), 0.0, False, truncated, {}
            self.spent += self.tolls[road]
            self.at = words[1]
            if self.spent > self.budget:
                return f"Paying {self.tolls[road]} coins at {self.at} breaks the budget: the trip is over.", 0.0, True, False, {}
            if self.at == self.goal:
                return f"You reach {self.goal} having spent {self.spent}/{self.budget} coins.", 1.0, True, False, {}
            left = self._costs(self.goal)[self.at]
            reward = 0.05 if left < self.closest else 0.0
            self.closest = min(self.closest, left)
            return f"Paid {self.tolls[road]} coins. " + self._status(), reward, False, truncated, {}
        return "Unknown action. Use \\boxed{toll X Y} or \\boxed{drive X}. " + self._status(), 0.0, False, truncated, {}

    def solution(self):
        back = self._costs(self.goal)
        route, here = [], self.start
        while here != self.goal:
            step = min(
                sorted(other for road in self.tolls if here in road for other in road - {here}),
                key=lambda t: back[t] + self.tolls[frozenset((here, t))],
            )
            route.append(step)
            here = step
        return [f"\\boxed{{drive {t}}}" for t in route]
