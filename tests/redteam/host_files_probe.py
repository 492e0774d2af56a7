# expect: forbidden
# Looks for host files it could read and hand back in an observation: /sys, the kernel command
# line, /etc, data directories, other processes (homes are the audit hook's too: see read_home.py),
# then the checkout (found from the worker script's path). Directories that only lead to what the
# sandbox binds in (a checkout under /srv or /opt shows its own path there) are not host files.
# Anything readable in the first group is
# a leak of the minimal root and raises at once (a crash verdict, which fails the test); reading the
# checkout is forbidden by the audit hook wherever the checkout lies (under /home or not), so the
# verdict does not depend on where the project was cloned.
import os
import random


def _ancestors(path):
    out = set()
    while path and path != "/":
        out.add(path)
        path = os.path.dirname(path)
    return out


def readable(path):
    """Whether ``path`` shows something of the host: a file's bytes, or a directory entry that is
    not merely on the way to what the sandbox binds in (the worker's modules, the interpreter),
    which the minimal root has at their own paths wherever the project was cloned."""
    import __main__
    import sys

    bound = set()
    for p in (__main__.__file__, sys.prefix, sys.base_prefix, sys.exec_prefix):
        bound |= _ancestors(os.path.realpath(p))
    try:
        if os.path.isdir(path):
            return any(os.path.join(path, name) not in bound for name in os.listdir(path))
        with open(path, "rb") as f:
            return bool(f.read(64))
    except OSError:
        return False


def probe():
    found = []
    for path in ("/proc/cmdline", "/proc/kallsyms", "/proc/keys", "/sys", "/sys/kernel", "/etc", "/etc/passwd", "/etc/hostname",
                 "/var", "/srv", "/data", "/mnt", "/opt", "/boot", "/usr/share", "/usr/bin"):
        if readable(path):
            found.append(path)
    other = [p for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()))]
    if other:
        found.append(f"/proc/{other[0]} (other processes)")
    if found:
        raise RuntimeError("LEAK: readable host files: " + ", ".join(found))
    import __main__  # the worker script, which lives inside the checkout

    root = os.path.dirname(os.path.dirname(os.path.dirname(__main__.__file__)))
    for rel in ("pyproject.toml", "README.md", "spade.toml", ".git", "tests", "spade_engine/config.py", "spade_engine/engine"):
        if readable(os.path.join(root, rel)):
            found.append(os.path.join(root, rel))
    if found:
        raise RuntimeError("LEAK: readable checkout files: " + ", ".join(found))


class HostProbeEnv:
    def reset(self, seed=None):
        probe()
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
