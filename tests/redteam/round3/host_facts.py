# expect: valid
# Class 9, hook off: what the sandbox shows of the host through plain system calls: uptime
# (CLOCK_BOOTTIME, monotonic), RAM (sysinfo, sysconf), disk (statvfs of / and of the Python
# installation), mounts (statmount/listmount, newer than this libseccomp), the kernel release
# (uname) and the CPUs. Reported as JSON; the test says which must be hidden.
import ctypes
import json
import os
import sys
import time


def syscall(nr, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(nr, *args)
    return [rc, ctypes.get_errno() if rc < 0 else 0]


def statvfs(path):
    try:
        st = os.statvfs(path)
        return [st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize]
    except OSError as exc:
        return exc.errno


class HostFactsEnv:
    def reset(self, seed=None):
        buf = ctypes.create_string_buffer(128)
        facts = {
            "boottime": time.clock_gettime(time.CLOCK_BOOTTIME),
            "monotonic": time.monotonic(),
            "sysinfo": syscall(99, buf),
            "phys_pages": os.sysconf("SC_PHYS_PAGES"),
            "statvfs_root": statvfs("/"),
            "statvfs_prefix": statvfs(sys.prefix),
            "statmount": syscall(457, 0, 0, 0, 0),
            "listmount": syscall(458, 0, 0, 0, 0),
            "release": os.uname().release,
            "cpus": os.cpu_count(),
        }
        return json.dumps(facts), {}

    def step(self, action):
        return "x", 0.0, True, False, {}
