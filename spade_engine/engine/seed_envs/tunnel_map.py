"""Tunnel map: walk from the entrance to the exit through tunnels found by looking around (a TextGame game).

Five chambers are joined by hidden tunnels. ``look`` lists the chambers joined to the current one;
``go X`` walks to a joined chamber (a small reward for each new chamber). Reaching the exit
chamber wins (reward 1.0); the turn budget ends the episode otherwise.
"""
# skill: graph_path
# difficulty: 0.6
import random
import re


class TunnelMapEnv(TextGame):
    """Find a way through hidden tunnels from the entrance to the exit chamber."""

    max_turns = 14
    NAMES = ["amber", "basalt", "coral", "dune", "ember"]

    def setup(self, rng):
        order = list(self.NAMES)
        rng.shuffle(order)
        self.links = {n: set() for n in order}
        for a, b in zip(order, order[1:]):
            self.links[a].add(b)
            self.links[b].add(a)
        a, b = rng.sample(order[1:], 2)
        self.links[a].add(b)
        self.links[b].add(a)
        self.start, self.here, self.exit = order[0], order[0], order[-1]
        self.visited = {self.here}
        return (
            f"You are in the {self.here} chamber. Reach the {self.exit} chamber.\n"
            "Commands: look lists the chambers joined to this one; go X walks to joined chamber X."
        )

    def act(self, command):
        words = command.split()
        if command == "look":
            return f"From {self.here} tunnels lead to: {', '.join(sorted(self.links[self.here]))}.", 0.0, False
        if len(words) == 2 and words[0] == "go":
            if words[1] not in self.links[self.here]:
                return f"No tunnel joins {self.here} to {words[1]}.", 0.0, False
            self.here = words[1]
            if self.here == self.exit:
                return f"You reach the {self.exit} chamber: you are out!", 1.0, True
            reward = 0.0 if self.here in self.visited else 0.03
            self.visited.add(self.here)
            return f"You walk to the {self.here} chamber.", reward, False
        return "Unknown command. Use look or go X.", 0.0, False

    def _path(self):
        paths, todo = {self.start: [self.start]}, [self.start]
        while todo:
            node = todo.pop(0)
            for nxt in sorted(self.links[node]):
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    todo.append(nxt)
        return paths[self.exit]

    def plan(self):
        return ["look"] + [f"go {n}" for n in self._path()[1:]]
