# expect: valid
# Round 3, class 1: raises audit events whose arguments are objects of its own (a path-like whose
# __fspath__, an int whose __and__ and a str whose __contains__ record that they ran): code
# running inside the hook could reach the hook's frame and closure. The hook never calls them, so
# nothing is recorded and the (otherwise honest) environment is valid; it crashes if they ran.
import random
import sys

RAN = []


class Path:
    def __fspath__(self):
        RAN.append("fspath")
        return "/etc/passwd"


class Flags(int):
    def __and__(self, other):
        RAN.append("and")
        return 0


class Mode(str):
    def __contains__(self, item):
        RAN.append("contains")
        return False


class HookRunsMyCodeEnv:
    def reset(self, seed=None):
        sys.audit("open", Path(), Mode("w"), Flags(1))
        sys.audit("os.remove", Path())
        sys.audit("import", "random", None, [], [], [])
        if RAN:
            raise RuntimeError(f"the hook ran environment code: {RAN}")
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
