# expect: valid
# Class 9, hook off: more of what a task can learn of the host through plain calls: its resource
# usage and its children's (getrusage), the device nodes (/dev), /proc and /sys, the CPUs it may
# run on (sched_getaffinity), the load average, uname (node name, release, version, machine), its
# pid and uid, and the wall clock. Reported as JSON; the test says which must be hidden and that
# docs/sandbox.md lists the rest.
import json
import os
import resource
import time


def attempt(fn):
    try:
        return fn()
    except OSError as exc:
        return "%s: %s" % (type(exc).__name__, exc.errno)


class HostFactsMoreEnv:
    def reset(self, seed=None):
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        u = os.uname()
        facts = {
            "maxrss_kb": own.ru_maxrss,
            "children": [children.ru_maxrss, children.ru_utime, children.ru_stime, children.ru_minflt],
            "dev": attempt(lambda: sorted(os.listdir("/dev"))),
            "proc": attempt(lambda: sorted(os.listdir("/proc"))),
            "sys": attempt(lambda: sorted(os.listdir("/sys"))),
            "affinity": attempt(lambda: sorted(os.sched_getaffinity(0))),
            "loadavg": attempt(lambda: list(os.getloadavg())),
            "nodename": u.nodename,
            "release": u.release,
            "version": u.version,
            "machine": u.machine,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "uid": os.getuid(),
            "realtime": time.time(),
        }
        return json.dumps(facts), {}

    def step(self, action):
        return "x", 0.0, True, False, {}
