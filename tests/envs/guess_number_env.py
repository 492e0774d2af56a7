"""Valid example (SPADE format): guess a number with higher/lower feedback, six turns."""
import random
import re


class GuessNumberEnv:
    max_turns = 6

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.target = self.rng.randint(1, 50)
        self.turns = 0
        return "I picked a number from 1 to 50. Guess it as \\boxed{n}; I say higher or lower.", {}

    def step(self, action):
        self.turns += 1
        m = re.search(r"\\boxed\{\s*(-?\d+)\s*\}", action)
        if not m:
            obs, reward, done = "Give a number as \\boxed{n}.", 0.0, False
        else:
            guess = int(m.group(1))
            if guess == self.target:
                obs, reward, done = "Correct!", 1.0, True
            else:
                obs, reward, done = ("Higher." if guess < self.target else "Lower."), 0.0, False
        truncated = not done and self.turns >= self.max_turns
        return obs, reward, done, truncated, {"turns": self.turns}

    def solution(self):
        return [f"\\boxed{{{self.target}}}"]
