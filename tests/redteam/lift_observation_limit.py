# expect: sandbox
# Lifts its worker's observation limit and returns a 1 MB observation (such observations put
# 4.2 MB RolloutCompleted events in the log): the engine's reply schema refuses it.
import __main__

__main__._TaskRunner._text = lambda self, x: {"v": x}


class BigObsEnv:
    def reset(self, seed=None):
        return "A" * 1_000_000, {}

    def step(self, action):
        return "B" * 1_000_000, 0.0, True, False, {}
