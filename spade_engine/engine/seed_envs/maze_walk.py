"""Maze walk: find the exit of a grid maze whose walls are hidden until bumped into (long horizon: 40 turns).

The agent starts in the top-left corner; the exit is in the bottom-right corner. ``move
north|south|east|west`` moves one cell; a move into a wall is refused and the wall is remembered
in the observation. Each newly visited cell earns a small partial reward; reaching the exit wins.
"""
# skill: sort_swaps
# difficulty: 0.6
import collections
import random
import re


class MazeWalkEnv:
    MOVES = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}

    def __init__(self, max_turns=40):
        self.max_turns = max_turns
        self.turn_count = 0
        self.size = 5
        self.blocked = set()
        self.pos = (0, 0)
        self.visited = set()
        self.bumped = set()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.size = rng.choice([4, 5])
        while True:
            cells = [(r, c) for r in range(self.size) for c in range(self.size) if (r, c) not in ((0, 0), self._exit())]
            self.blocked = set(rng.sample(cells, self.size + 1))
            if self._path() is not None:
                break
        self.pos = (0, 0)
        self.visited = {self.pos}
        self.bumped = set()
        return (
            f"You are at (0, 0) in a {self.size}x{self.size} maze; the exit is at {self._exit()}. Some cells are "
            "walls, hidden until you bump into them.\nAction: \\boxed{move north}, \\boxed{move south}, "
            "\\boxed{move east} or \\boxed{move west} (north = row - 1). One move per turn.",
            {},
        )

    def _exit(self):
        return (self.size - 1, self.size - 1)

    def _free(self, cell):
        r, c = cell
        return 0 <= r < self.size and 0 <= c < self.size and cell not in self.blocked

    def _path(self):
        start, goal = (0, 0), self._exit()
        prev = {start: None}
        queue = collections.deque([start])
        while queue:
            cell = queue.popleft()
            if cell == goal:
                moves = []
                while prev[cell] is not None:
                    cell, name = prev[cell]
                    moves.append(name)
                return moves[::-1]
            for name, (dr, dc) in self.MOVES.items():
                nxt = (cell[0] + dr, cell[1] + dc)
                if self._free(nxt) and nxt not in prev:
                    prev[nxt] = (cell, name)
                    queue.append(nxt)
        return None

    def _status(self):
        walls = ", ".join(str(w) for w in sorted(self.bumped)) or "none found"
        return f"Position {self.pos}. Known walls: {walls}. Turn {self.turn_count}/{self.max_turns}."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        m = re.search(r"\\boxed\{([^{}]*)\}", str(action))
        parts = (m.group(1).strip().lower() if m else "").split()
        if len(parts) != 2 or parts[0] != "move" or parts[1] not in self.MOVES:
            return "Use \\boxed{move north|south|east|west}. " + self._status(), 0.0, False, truncated, {}
        dr, dc = self.MOVES[parts[1]]
        nxt = (self.pos[0] + dr, self.pos[1] + dc)
        if not (0 <= nxt[0] < self.size and 0 <= nxt[1] < self.size):
            return "That is the outer wall. " + self._status(), 0.0, False, truncated, {}
        if nxt in self.blocked:
            self.bumped.add(nxt)
            return f"A wall blocks {nxt}. " + self._status(), 0.0, False, truncated, {}
        self.pos = nxt
        if self.pos == self._exit():
            return "You reached the exit!", 1.0, True, False, {}
        reward = 0.02 if nxt not in self.visited else 0.0
        self.visited.add(nxt)
        return "Moved. " + self._status(), reward, False, truncated, {}

    def solution(self):
        return [f"\\boxed{{move {name}}}" for name in (self._path() or [])]
