# expect: valid
# Looks for what /proc and the kernel tell about the host: its name (/proc/sys/kernel/hostname,
# uname), the boot id, kernel build, memory, uptime, load, CPU counters, network devices, and the
# mount table (/proc/self/mountinfo shows the host's devices and the paths the binds come from).
# It raises if any of them is readable or the host name is not the sandbox's own: in the sandbox
# /proc is empty and the UTS namespace has its own name.
import os
import random

PROC = ("/proc/sys/kernel/hostname", "/proc/sys/kernel/random/boot_id", "/proc/version", "/proc/meminfo",
        "/proc/uptime", "/proc/net/dev", "/proc/stat", "/proc/loadavg", "/proc/self/mountinfo", "/proc/self/mounts",
        "/proc/self/net/dev", "/proc/cpuinfo", "/proc/self/cgroup")


def probe():
    found = []
    for path in PROC:
        try:
            with open(path, "rb") as f:
                if f.read(64):
                    found.append(path)
        except OSError:
            pass
    if os.listdir("/proc"):
        found.append("/proc (not empty)")
    if os.uname().nodename != "sandbox":
        found.append("host name " + os.uname().nodename)
    if found:
        raise RuntimeError("LEAK: host /proc entries: " + ", ".join(found))


class HostProcProbeEnv:
    def reset(self, seed=None):
        probe()
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
