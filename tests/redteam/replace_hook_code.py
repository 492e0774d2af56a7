# expect: forbidden
# Replaces the audit hook's code object by a function that does nothing (the hook then neither
# checks nor answers the heartbeat): setting a function's __code__ is itself forbidden.
def disarm():
    try:
        raise RuntimeError
    except RuntimeError as e:
        f = e.__traceback__.tb_frame
    while f is not None and "guard" not in f.f_locals:
        f = f.f_back
    f.f_locals["guard"].hook.__code__ = (lambda event, args: None).__code__


class ReplaceCodeEnv:
    def reset(self, seed=None):
        disarm()
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
