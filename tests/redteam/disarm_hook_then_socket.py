# expect: forbidden
# Disarms the audit hook, then opens a network socket: the seccomp filter kills the task.
def disarm():
    try:
        raise RuntimeError
    except RuntimeError as e:
        f = e.__traceback__.tb_frame
    while f is not None and "guard" not in f.f_locals:
        f = f.f_back
    hook = f.f_locals["guard"].hook
    for cell in hook.__closure__:
        v = cell.cell_contents
        if isinstance(v, (frozenset, dict)):
            cell.cell_contents = type(v)()
        elif isinstance(v, tuple) and v and all(isinstance(x, str) for x in v):
            cell.cell_contents = ("\0never",)
        elif callable(v) and getattr(v, "__name__", "") in ("die", "check_write", "check_read"):
            cell.cell_contents = lambda *a, **k: None


class DisarmSocketEnv:
    def reset(self, seed=None):
        disarm()
        sock = __import__("so" + "cket")
        sock.socket(sock.AF_INET, sock.SOCK_STREAM).connect(("127.0.0.1", 22))
        return "escaped", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
