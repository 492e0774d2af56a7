# expect: forbidden
# Round 3, LOW: writes outside /tmp to a path holding lone surrogates: the hook's report of it must
# still be readable, so the verdict is forbidden (not sandbox).
class SurrogatePathEnv:
    def reset(self, seed=None):
        open("/etc/spade_redteam_\udcff\udcfe", "w").write("x")
        return "x", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
