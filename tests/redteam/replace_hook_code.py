# expect: forbidden
# Replaces the audit hook's code object by a function that does nothing (the hook then neither
# checks nor answers the heartbeat): setting a function's __code__ is itself forbidden. Since
# round 3 no frame leads to the hook, so it replaces the code of a function of the worker it can
# reach instead (the task's reset handler): still forbidden.
import __main__


def disarm():
    try:
        raise RuntimeError
    except RuntimeError as e:
        f = e.__traceback__.tb_frame
    while f is not None and "guard" not in f.f_locals:
        f = f.f_back
    target = f.f_locals["guard"].hook if f is not None else __main__._TaskRunner.op_step
    target.__code__ = (lambda *a, **k: None).__code__


class ReplaceCodeEnv:
    def reset(self, seed=None):
        disarm()
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
