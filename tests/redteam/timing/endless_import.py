# expect: timeout
# Never finishes importing (a busy loop at module level): the import limit stops it.
x = 0
while True:
    x += 1


class NeverEnv:
    def reset(self, seed=None):
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
