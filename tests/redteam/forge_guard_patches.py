# expect: forbidden
# Round 3, class 1: forges the guard the way the last round did (its check replaced, its exit made
# a no-op) by patching everything the worker's modules share: the fingerprint class, the frame
# encoder, os.write/os._exit, the posix functions, the builtins the hook used and its tables; then
# writes outside /tmp. The hook and the I/O thread use private copies of all of them: forbidden.
import builtins
import os
import sys

import __main__

hg = sys.modules.get("hookguard")
if hg is not None:
    hg.HookGuard.fingerprint = lambda self: "96:2"
    hg.make_fingerprint = lambda *a, **k: (lambda: "96:2", lambda: ([], []))
fr = sys.modules.get("framing")
if fr is not None:
    fr.encode = lambda obj: b""
    fr.write_frame = lambda fd, obj: None
os._exit = lambda code: None
sys.modules["posix"]._exit = lambda code: None
for table in ("_WRITE_EVENTS", "_READ_EVENTS"):
    getattr(__main__, table, {}).clear()
__main__._FORBIDDEN_EVENTS = frozenset()
__main__.FORBIDDEN_MODULES = frozenset()
builtins.any = lambda it: False
builtins.str = type("str", (), {})
with open("/etc/spade_redteam_forged", "w") as f:
    f.write("x")


class ForgeGuardEnv:
    def reset(self, seed=None):
        return "wrote outside /tmp", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
