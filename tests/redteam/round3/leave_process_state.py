# expect: valid
# Class 3: changes everything a process owns that a careless worker would hand on: umask 0777, the
# working directory, environment variables (PATH, LD_PRELOAD, PYTHONPATH, one of its own, HOME
# removed), every signal blocked and SIGTERM/SIGINT/SIGALRM ignored, lower soft rlimits (open
# files, file size, stack, core), a thread left running, a pipe of its own left full of bytes and
# a note in /tmp; each again at every step. Then it behaves. The next task must see none of it.
import os
import random
import resource
import signal
import threading
import time


def leave():
    deep = os.path.join(os.environ.get("TMPDIR", "/tmp"), "deep", "er")
    try:
        os.makedirs(deep, exist_ok=True)
        os.chdir(deep)
    except OSError:
        pass
    os.environ["PATH"] = "/tmp/evil-bin"
    os.environ["LD_PRELOAD"] = "/tmp/evil.so"
    os.environ["PYTHONPATH"] = "/tmp/evil-path"
    os.environ["SPADE_LEFT_BEHIND"] = "yes"
    os.environ.pop("HOME", None)
    os.putenv("SPADE_PUTENV_LEFT", "yes")
    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGUSR1):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    for res, value in ((resource.RLIMIT_NOFILE, 16), (resource.RLIMIT_FSIZE, 1), (resource.RLIMIT_STACK, 1 << 16),
                       (resource.RLIMIT_CORE, 0)):
        try:
            hard = resource.getrlimit(res)[1]
            resource.setrlimit(res, (value, hard))
        except (OSError, ValueError):
            pass
    threading.Thread(target=lambda: [time.sleep(0.01) for _ in iter(int, 1)], daemon=False).start()
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        while True:
            os.write(w, b"left behind " * 100)
    except OSError:  # full (BlockingIOError), or out of descriptors under its own lower limit
        pass
    try:
        with open("/tmp/spade_left_note", "w") as f:
            f.write("hello next task")
    except OSError:
        pass
    os.umask(0o777)


class LeaveProcessStateEnv:
    def reset(self, seed=None):
        leave()
        self.n = random.Random(seed).randint(10**6, 10**9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        leave()
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
