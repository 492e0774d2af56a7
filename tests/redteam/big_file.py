# expect: crash
class BigFileEnv:
    def reset(self, seed=None):
        with open("/tmp/spade_redteam_big", "wb") as f:
            for _ in range(1000):
                f.write(b"x" * (4 * 1024**2))
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
