# expect: forbidden
# Round 3, class 1: imports a forbidden module under a str subclass whose methods lie (split,
# partition, __eq__ and __hash__), hoping the hook calls them. The hook looks only at exact str
# arguments: a name of another type is itself refused.
class Liar(str):
    def split(self, *a, **k):
        return ["harmless"]

    def partition(self, *a, **k):
        return ("harmless", "", "")

    def __eq__(self, other):
        return False

    def __hash__(self):
        return 1


class StrSubclassEnv:
    def reset(self, seed=None):
        __import__(Liar("sub" + "process"))
        return "escaped", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
