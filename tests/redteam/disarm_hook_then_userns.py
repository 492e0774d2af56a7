# expect: forbidden
# Round 3: the walk below no longer reaches the hook (it lives in the task's I/O thread), so the
# hook itself stops what follows (and seccomp does when the hook is off). Before round 3:
# Disarms the audit hook, loads ctypes again and creates an unprivileged user namespace (the
# first step of many kernel exploits): the seccomp filter kills the task at unshare().
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


class DisarmUsernsEnv:
    def reset(self, seed=None):
        disarm()
        ct = __import__("ct" + "ypes")
        libc = ct.CDLL(None, use_errno=True)
        libc.unshare(0x10000000)  # CLONE_NEWUSER
        return "escaped %d" % ct.get_errno(), {}

    def step(self, action):
        return "x", 0.0, True, False, {}
