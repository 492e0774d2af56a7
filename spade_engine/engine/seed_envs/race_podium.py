"""Race podium: six runners finished a race in a hidden order; find the podium with few questions.

``ask X Y`` asks the race judge which of two runners finished ahead (ten questions at most);
``podium X Y Z`` names the winner, second and third in order and ends the episode. The whole
ranking is not needed, so a knockout strategy saves questions. Each question about a new pair of
runners earns a small partial reward.
"""
# skill: ordering
# difficulty: 0.55
import random
import re


class RacePodiumEnv:
    RUNNERS = ["ada", "ben", "cleo", "dev", "eli", "fay", "gus", "hana"]
    QUESTIONS = 10

    def __init__(self, max_turns=13):
        self.max_turns = max_turns
        self.turn_count = 0
        self.finish = []
        self.asked = set()
        self.questions = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.finish = rng.sample(self.RUNNERS, 6)
        self.asked = set()
        self.questions = 0
        return (
            f"Six runners finished a race: {', '.join(sorted(self.finish))} (no ties). The order is hidden.\n"
            f"Actions: \\boxed{{ask X Y}} asks the judge who of X and Y finished ahead ({self.QUESTIONS} questions "
            "at most); \\boxed{podium X Y Z} names first, second and third (ends the episode). One action per turn.",
            {},
        )

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        words = (m.group(1).strip().lower() if m else "").replace(",", " ").split()
        if len(words) == 3 and words[0] == "ask":
            x, y = words[1], words[2]
            if x not in self.finish or y not in self.finish or x == y:
                return f"Ask about two different runners of: {', '.join(sorted(self.finish))}.", 0.0, False, truncated, {}
            if self.questions >= self.QUESTIONS:
                return "The judge has gone home: name the podium.", 0.0, False, truncated, {}
            self.questions += 1
            pair = frozenset((x, y))
            reward = 0.0 if pair in self.asked else 0.02
            self.asked.add(pair)
            ahead, behind = (x, y) if self.finish.index(x) < self.finish.index(y) else (y, x)
            return f"{ahead} finished ahead of {behind}. ({self.QUESTIONS - self.questions} questions left)", reward, False, truncated, {}
        if len(words) == 4 and words[0] == "podium":
            if words[1:] == self.finish[:3]:
                return "Correct podium.", 1.0, True, False, {}
            return "Wrong podium.", 0.0, True, False, {}
        return "Unknown action. Use \\boxed{ask X Y} or \\boxed{podium X Y Z}.", 0.0, False, truncated, {}

    def solution(self):
        asks = [f"\\boxed{{ask {self.finish[i]} {self.finish[i + 1]}}}" for i in range(3)]
        return asks + [f"\\boxed{{podium {' '.join(self.finish[:3])}}}"]
