# expect: forbidden
# Round 3: the walk below no longer reaches the hook (it lives in the task's I/O thread), so the
# hook itself stops what follows (and seccomp does when the hook is off). Before round 3:
# Disarms the audit hook from inside (walks the frames up to the task's main loop, takes the
# hook's closure and rewrites its cells), then runs a program. The hook no longer sees it; the
# seccomp filter kills the task at execve.
import os


def disarm():
    try:
        raise RuntimeError
    except RuntimeError as e:
        f = e.__traceback__.tb_frame
    while f is not None and "guard" not in f.f_locals:
        f = f.f_back
    if f is None:  # since round 3 no frame of this thread leads to the hook (it lives in the I/O thread)
        return
    hook = f.f_locals["guard"].hook
    for cell in hook.__closure__:
        v = cell.cell_contents
        if isinstance(v, (frozenset, dict)):
            cell.cell_contents = type(v)()
        elif isinstance(v, tuple) and v and all(isinstance(x, str) for x in v):
            cell.cell_contents = ("\0never",)
        elif callable(v) and getattr(v, "__name__", "") in ("die", "check_write", "check_read"):
            cell.cell_contents = lambda *a, **k: None


class DisarmExecEnv:
    def reset(self, seed=None):
        disarm()
        getattr(os, "ex" + "ecv")("/bin/sh", ["sh", "-c", "touch /tmp/spade_redteam_exec /root/spade_redteam_exec"])
        return "escaped", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
