"""Build order: plan the order of construction jobs whose precedence rules are hidden until asked for.

``needs JOB`` lists the jobs that must be finished before JOB can start; ``plan J1 J2 ...`` submits
an order of all the jobs and ends the episode: any order that respects every rule wins. Each job
whose rules are read for the first time earns a small partial reward.
"""
# skill: ordering
# difficulty: 0.5
import random
import re


class BuildOrderEnv:
    JOBS = ["survey", "dig", "drain", "pour", "frame", "roof", "wire", "plumb", "plaster", "paint", "floor", "glaze"]

    def __init__(self, max_turns=12):
        self.max_turns = max_turns
        self.turn_count = 0
        self.jobs = []
        self.needs = {}
        self.read = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.read = set()
        count = rng.choice([6, 7])
        self.needs = {}
        for _ in range(50):
            hidden = rng.sample(self.JOBS, count)
            needs = {}
            for k, job in enumerate(hidden):
                earlier = hidden[:k]
                needs[job] = sorted(rng.sample(earlier, min(len(earlier), rng.choice([0, 1, 1, 2]))))
            self.needs = needs
            if not self._valid(sorted(hidden)):
                break
        self.jobs = sorted(self.needs)
        return (
            f"Jobs to schedule, one after another: {', '.join(self.jobs)}. Some jobs need others finished "
            "first; the rules are hidden.\nActions: \\boxed{needs JOB} lists what JOB waits for; "
            "\\boxed{plan J1 J2 ...} submits an order of all jobs (ends the episode). One action per turn.",
            {},
        )

    def _valid(self, order):
        if sorted(order) != sorted(self.needs):
            return False
        place = {job: i for i, job in enumerate(order)}
        return all(place[before] < place[job] for job, reqs in self.needs.items() for before in reqs)

    def _an_order(self):
        done, order = set(), []
        while len(order) < len(self.needs):
            ready = [j for j in sorted(self.needs) if j not in done and set(self.needs[j]) <= done]
            order.append(ready[0])
            done.add(ready[0])
        return order

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").replace(",", " ").split()
        if len(words) == 2 and words[0] == "needs":
            job = words[1]
            if job not in self.needs:
                return f"No job '{job}'. Jobs: {', '.join(self.jobs)}.", 0.0, False, truncated, {}
            reward = 0.0 if job in self.read else 0.03
            self.read.add(job)
            reqs = ", ".join(self.needs[job]) or "nothing"
            return f"{job} needs: {reqs}.", reward, False, truncated, {}
        if words and words[0] == "plan":
            order = words[1:]
            if sorted(order) != self.jobs:
                return f"A plan names every job exactly once: {', '.join(self.jobs)}.", 0.0, False, truncated, {}
            if self._valid(order):
                return "The plan respects every rule: the building goes up.", 1.0, True, False, {}
            return "The plan breaks a rule: a job started before what it needs.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{needs JOB} or \\boxed{plan J1 J2 ...}.", 0.0, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{needs {j}}}" for j in self.jobs] + [f"\\boxed{{plan {' '.join(self._an_order())}}}"]
