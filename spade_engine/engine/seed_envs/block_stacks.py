"""Block stacks: move blocks between three stacks until they match a goal arrangement (long horizon: 30 turns).

Only the top block of a stack can move: ``move a b`` moves the top block of stack a onto stack b
(stacks 1 to 3). The goal arrangement is shown. Each move that brings a new best number of
blocks into their goal position earns a small partial reward; matching the goal wins.
"""
# skill: sort_swaps
# difficulty: 0.55
import collections
import random
import re


class BlockStacksEnv:
    def __init__(self, max_turns=30):
        self.max_turns = max_turns
        self.turn_count = 0
        self.stacks = [[], [], []]
        self.goal = [[], [], []]
        self.best = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        blocks = rng.sample("ABCDE", 4)
        self.stacks = self._scatter(blocks, rng)
        self.goal = self._scatter(rng.sample(blocks, 4), rng)
        while self.goal == self.stacks:
            self.goal = self._scatter(rng.sample(blocks, 4), rng)
        self.best = self._placed()
        return (
            "Three stacks of blocks (bottom first). Move blocks until the stacks match the goal.\n"
            f"Now: {self._show(self.stacks)}\nGoal: {self._show(self.goal)}\n"
            "Action: \\boxed{move a b} moves the top block of stack a onto stack b (1 to 3). One move per turn.",
            {},
        )

    @staticmethod
    def _scatter(blocks, rng):
        stacks = [[], [], []]
        for b in blocks:
            stacks[rng.randrange(3)].append(b)
        return stacks

    @staticmethod
    def _show(stacks):
        return " | ".join(f"{i + 1}: {' '.join(s) or '-'}" for i, s in enumerate(stacks))

    def _placed(self):
        return sum(
            1 for s, g in zip(self.stacks, self.goal) for k, b in enumerate(s) if k < len(g) and g[k] == b
        )

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) != 3 or parts[0] != "move" or parts[1] not in "123" or parts[2] not in "123" or parts[1] == parts[2]:
            return f"Use \\boxed{{move a b}} with two different stacks from 1 to 3. Now: {self._show(self.stacks)}", 0.0, False, truncated, {}
        a, b = int(parts[1]) - 1, int(parts[2]) - 1
        if not self.stacks[a]:
            return f"Stack {a + 1} is empty. Now: {self._show(self.stacks)}", 0.0, False, truncated, {}
        self.stacks[b].append(self.stacks[a].pop())
        if self.stacks == self.goal:
            return f"Goal reached: {self._show(self.stacks)}", 1.0, True, False, {}
        placed = self._placed()
        reward = 0.03 if placed > self.best else 0.0
        self.best = max(self.best, placed)
        return f"Now: {self._show(self.stacks)} (turn {self.turn_count}/{self.max_turns})", reward, False, truncated, {}

    def solution(self):
        start = tuple(tuple(s) for s in self.stacks)
        goal = tuple(tuple(s) for s in self.goal)
        prev = {start: None}
        queue = collections.deque([start])
        while queue:
            state = queue.popleft()
            if state == goal:
                break
            for a in range(3):
                if not state[a]:
                    continue
                for b in range(3):
                    if a == b:
                        continue
                    nxt = [list(s) for s in state]
                    nxt[b].append(nxt[a].pop())
                    key = tuple(tuple(s) for s in nxt)
                    if key not in prev:
                        prev[key] = (state, a, b)
                        queue.append(key)
        actions = []
        state = goal
        while prev[state] is not None:
            state, a, b = prev[state]
            actions.append(f"\\boxed{{move {a + 1} {b + 1}}}")
        return actions[::-1]
