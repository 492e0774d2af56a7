# expect: valid
# Class 3: reads what a previous task could have left for it: each open descriptor's flags, signal
# owner, signal and pipe size, its own priority and CPUs; returned as JSON in the observation (the
# last round, one task read what the one before wrote into the shared pipes' state).
import fcntl
import json
import os

F_GETSIG, F_GETPIPE_SZ = 11, 1032


def look():
    fds = {}
    for fd in range(0, 64):
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        entry = {"nonblock": bool(flags & os.O_NONBLOCK), "async": bool(flags & os.O_ASYNC)}
        for name, op in (("owner", fcntl.F_GETOWN), ("sig", F_GETSIG), ("pipe_size", F_GETPIPE_SZ)):
            try:
                entry[name] = fcntl.fcntl(fd, op)
            except OSError:
                entry[name] = None
        fds[fd] = entry
    return {"fds": fds, "nice": os.getpriority(os.PRIO_PROCESS, 0), "cpus": len(os.sched_getaffinity(0))}


class ReadStateEnv:
    def reset(self, seed=None):
        return json.dumps(look()), {}

    def step(self, action):
        return "x", 0.0, True, False, {}
