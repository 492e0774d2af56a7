# expect: memory
class MemoryBombEnv:
    def reset(self, seed=None):
        self.blob = bytearray(50 * 1024**3)
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
