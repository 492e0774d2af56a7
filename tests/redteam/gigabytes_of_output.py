# expect: timeout
import sys
class ChattyEnv:
    def reset(self, seed=None):
        line = "spam " * 200_000
        while True:
            print(line)
            sys.stderr.write(line)
    def step(self, action):
        return "x", 0.0, True, False, {}
