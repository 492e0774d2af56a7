# expect: crash
class ManyFilesEnv:
    def reset(self, seed=None):
        for i in range(1_000_000):
            with open(f"/tmp/spade_redteam_{i}", "w") as f:
                f.write("x")
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
