# expect: forbidden
# Round 3, class 1: installs a tracer and a profiler (they are handed every frame that runs,
# the hook's among them) and asks for every thread's current frame (the I/O thread's). All three
# are refused.
import sys


class TraceEnv:
    def reset(self, seed=None):
        frames = sys._current_frames()
        sys.settrace(lambda frame, event, arg: None)
        return f"{len(frames)} threads", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
