# expect: memory
class GrowEnv:
    def reset(self, seed=None):
        chunks = []
        while True:
            chunks.append(b"x" * (16 * 1024**2))
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
