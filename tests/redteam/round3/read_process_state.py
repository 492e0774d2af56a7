# expect: valid
# Class 3: reads what a previous task could have left in its process: umask, working directory,
# environment, blocked signals and signal dispositions, every rlimit, running threads, bytes
# waiting on any descriptor (FIONREAD, which reads nothing) and the files in /tmp; returned as
# JSON in the observation.
import fcntl
import json
import os
import resource
import signal
import struct
import termios
import threading


def look():
    umask = os.umask(0o022)
    os.umask(umask)
    pending = {}
    for fd in range(0, 64):
        try:
            buf = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
            pending[fd] = struct.unpack("i", buf)[0]
        except OSError:
            pass
    limits = {name: list(resource.getrlimit(getattr(resource, name))) for name in dir(resource) if name.startswith("RLIMIT_")}
    return {
        "umask": umask,
        "cwd_is_tmp": os.getcwd() == os.environ.get("TMPDIR"),
        "environ": sorted(k for k in os.environ if k not in ("HOME", "TMPDIR")) + [os.environ.get("PATH", "")],
        "home_is_tmp": os.environ.get("HOME") == os.environ.get("TMPDIR"),
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "dispositions": {s.name: str(signal.getsignal(s)) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGUSR1)},
        "limits": limits,
        "threads": threading.active_count(),
        "pending": pending,
        "tmp": sorted(os.listdir("/tmp")),
    }


class ReadProcessStateEnv:
    def reset(self, seed=None):
        return json.dumps(look()), {}

    def step(self, action):
        return "x", 0.0, True, False, {}
