"""The kernel layer: a seccomp-bpf filter that code inside the sandbox cannot switch off.

Installed by each worker's zygote after the uid drop and before it forks any task, so every task
process (and everything it forks or threads) inherits it; a filter can only ever be tightened,
never removed. The filter allows everything except the system calls a text environment never
needs and an escape needs first; each of them kills the whole task process (SIGSYS), which the
engine reports as ``forbidden``:

* running programs: ``execve``, ``execveat``;
* network and kernel sockets: ``socket`` and ``socketpair`` of any family but ``AF_UNIX``;
* other processes: ``ptrace``, ``process_vm_readv/writev``, ``kcmp``, ``pidfd_getfd``;
* namespaces and mounts: ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag,
  ``mount``, ``umount2``, ``pivot_root``, ``chroot``, the new mount API (``fsopen``...);
* kernel attack surface: ``bpf``, ``perf_event_open``, ``keyctl``/``add_key``/``request_key``,
  ``userfaultfd``, ``io_uring_*``, module loading, ``kexec_*``, ``reboot``, ``swapon/off``,
  ``acct``, ``quotactl``, ``open_by_handle_at``, ``iopl``/``ioperm``, clock and host-name
  setters, ``syslog``, ``ioctl(TIOCSTI)``;
* IPC objects that would outlive the task: System V shared memory, queues and semaphores, POSIX
  message queues;
* ``socket(AF_UNIX, ...)`` fails with ``EACCES``: only ``socketpair(AF_UNIX)`` (a connected pair
  within the task) is left, so nothing can connect to a Unix socket by path or abstract name.
  Nothing in the worker needs one once the filter is in (its channels are pipes, and
  ``multiprocessing`` is not available to tasks). An error rather than a kill because the C
  library opens such sockets on its own: its NSS client tries ``/var/run/nscd/socket`` on every
  user or group lookup (``pwd.getpwuid``, ``getpass.getuser``, ``~user``), and ``syslog(3)``
  ``/dev/log``; both fall back quietly when the socket cannot be made, and a harmless lookup
  must not be reported as ``forbidden``;
* ``sysinfo`` fails with ``EPERM`` (it tells the host's uptime, load and memory, what the
  sandbox's missing /proc would; nothing a task needs); so do ``statfs``, ``fstatfs`` and
  ``ustat`` (the size and free space of the host's file systems behind the read-only binds);
* every system call number this libseccomp does not know (newer than it, like ``statmount`` and
  ``listmount``, which describe mounts) fails with ``ENOSYS``, as on an older kernel: a new
  kernel's additions are closed until the filter knows them;
* ``clone3`` fails with ``ENOSYS`` instead (its flags sit in memory a filter cannot read), so the
  C library falls back to ``clone``, whose flags are checked.

System calls of another ABI (32-bit ``int 0x80``, x32) do not match the filter's architecture
and kill the whole process (the bad-architecture action is set to kill the process, not just the
thread: libseccomp's default would kill one thread and leave the task running, unreported).

:func:`task_filter` builds a second, stricter filter that each task process loads on top of the
worker's before any environment code runs (filters stack; a task can only add to them):

* no new processes: ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD`` kill the task
  (threads stay allowed), so a task is one process whatever primitive it reaches for;
* ``memfd_create`` fails with ``EPERM`` (its memory sits outside the address-space limit);
* calls that reach other processes of the same uid (the worker's zygote, hence the next task)
  fail with ``EPERM``: ``setpriority``/``ioprio_set`` for anything but the calling process,
  ``sched_setaffinity``/``sched_setscheduler``/``sched_setparam``/``sched_setattr`` and
  ``prlimit64`` on another pid.

The filter is built with libseccomp through one of its Python bindings, whichever is present:
the official bindings (``import seccomp``; Debian's ``python3-seccomp``, which is found in
``/usr/lib/python3/dist-packages`` when it was built for this interpreter's ABI) or ``pyseccomp``
(a pure-Python ctypes binding from PyPI over ``libseccomp.so.2``). The binding is loaded by
:func:`load_binding` before the worker's file system is reduced to its minimal root.

Imported by the untrusted worker as a plain module: standard library (and the binding) only.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import os
import socket
from typing import Any

__all__ = ["KILLED", "CLONE_NS_FLAGS", "ERRNO_RULES", "load_binding", "block_binding", "install", "task_filter", "active"]

#: system calls that kill the task process
KILLED: tuple[str, ...] = (
    "execve", "execveat",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "open_by_handle_at", "name_to_handle_at",
    "lookup_dcookie", "iopl", "ioperm", "modify_ldt", "uselib", "vhangup", "syslog",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "fanotify_init", "nfsservctl",
    # System V and POSIX message-queue IPC: objects that outlive the task (a channel to the next one)
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semctl",
    "semtimedop", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
)

CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NS_FLAGS = (CLONE_NEWTIME, CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET)
CLONE_THREAD = 0x00010000
TIOCSTI = 0x5412
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1
#: system calls that fail (errno) instead of killing: host facts no task needs
ERRNO_RULES: tuple[tuple[str, int], ...] = (
    ("clone3", errno.ENOSYS), ("sysinfo", errno.EPERM), ("statfs", errno.EPERM), ("fstatfs", errno.EPERM),
    ("ustat", errno.EPERM),
)
#: the highest system call number looked at when closing the ones libseccomp does not know
_MAX_SYSCALL = 1023
TIOCLINUX = 0x541C

_DEBIAN_DIRS = ("/usr/lib/python3/dist-packages",)

_binding: Any = None
_binding_name = ""
_blocked = ""


def block_binding(why: str) -> None:
    """Behave as if no binding were installed: :func:`load_binding` returns ``(None, why)``
    (how the engine tests that a pool without the kernel filter is refused)."""
    global _binding, _binding_name, _blocked
    _binding, _binding_name, _blocked = None, "", why


def load_binding() -> tuple[Any, str]:
    """The libseccomp binding (module, how it was found), or ``(None, why not)``. Cached."""
    global _binding, _binding_name
    if _blocked:
        return None, _blocked
    if _binding is not None:
        return _binding, _binding_name
    try:
        import seccomp  # type: ignore[import-not-found, unused-ignore]  # the official bindings, if on sys.path

        _binding, _binding_name = seccomp, "libseccomp's Python bindings"
        return _binding, _binding_name
    except ImportError:
        pass
    for d in _DEBIAN_DIRS:  # Debian's python3-seccomp, if built for this interpreter's ABI
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, "seccomp" + suffix)
            if not os.path.isfile(path):
                continue
            try:
                spec = importlib.util.spec_from_file_location("seccomp", path)
                if spec is None or spec.loader is None:
                    continue
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            except (ImportError, OSError):
                continue
            _binding, _binding_name = mod, f"python3-seccomp ({path})"
            return _binding, _binding_name
    try:
        import pyseccomp  # type: ignore[import-not-found, unused-ignore]

        _binding, _binding_name = pyseccomp, "pyseccomp"
        return _binding, _binding_name
    except (ImportError, RuntimeError, OSError) as exc:
        return None, f"no libseccomp binding (python3-seccomp or pyseccomp): {exc}"


PR_GET_SECCOMP = 21


def active() -> bool:
    """Is a seccomp filter in force on this process? (``prctl(PR_GET_SECCOMP)`` is 2; the sandbox
    has no /proc. Else ``Seccomp: 2`` in /proc/self/status.)"""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(PR_GET_SECCOMP, 0, 0, 0, 0)) == 2
    except (OSError, AttributeError, ImportError):
        pass
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Seccomp:"):
                    return line.split()[1] == "2"
    except OSError:
        pass
    return False


def _base(sc: Any) -> Any:
    """A new filter (default allow) with the attributes every filter of ours has: all threads,
    a foreign architecture kills the process, binary-tree dispatch where libseccomp has it."""
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for attr, value in (("CTL_TSYNC", 1), ("ACT_BADARCH", sc.KILL_PROCESS), ("CTL_OPTIMIZE", 2)):
        try:
            f.set_attr(getattr(sc.Attr, attr), value)
        except (AttributeError, OSError, RuntimeError, ValueError):
            pass
    return f


def unknown_syscalls(sc: Any) -> list[int]:
    """System call numbers (native architecture, up to ``_MAX_SYSCALL``) this libseccomp cannot name."""
    out = []
    native = sc.Arch.NATIVE
    for nr in range(_MAX_SYSCALL + 1):
        try:
            sc.resolve_syscall(native, nr)
        except (ValueError, OSError, RuntimeError):
            out.append(nr)
    return out


def install() -> tuple[bool, str]:
    """Build and load the filter on this process (and its future children and threads).
    Returns ``(active, detail)``."""
    sc, how = load_binding()
    if sc is None:
        return False, how
    try:
        f = _base(sc)
        kill = sc.KILL_PROCESS
        rules = 0
        for name in KILLED:
            try:
                f.add_rule(kill, name)
                rules += 1
            except (OSError, RuntimeError, ValueError):  # not a system call on this architecture
                pass
        for name in ("socket", "socketpair"):
            f.add_rule(kill, name, sc.Arg(0, sc.NE, socket.AF_UNIX))
            rules += 1
        for flag in CLONE_NS_FLAGS:
            f.add_rule(kill, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
            rules += 1
        for request in (TIOCSTI, TIOCLINUX):
            f.add_rule(kill, "ioctl", sc.Arg(1, sc.EQ, request))
            rules += 1
        f.add_rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.EQ, socket.AF_UNIX))
        rules += 1
        for name, err in ERRNO_RULES:
            try:
                f.add_rule(sc.ERRNO(err), name)
                rules += 1
            except (OSError, RuntimeError, ValueError):
                pass
        unknown = unknown_syscalls(sc)
        for nr in unknown:
            try:
                f.add_rule(sc.ERRNO(errno.ENOSYS), nr)
                rules += 1
            except (OSError, RuntimeError, ValueError):
                pass
        f.load()
    except (OSError, RuntimeError, ValueError, TypeError, AttributeError) as exc:
        return False, f"loading the seccomp filter failed ({how}): {exc}"
    if not active():
        return False, f"the seccomp filter did not take effect ({how})"
    newest = max((n for n in range(_MAX_SYSCALL + 1) if n not in set(unknown)), default=0)
    return True, (
        f"{rules} rules via {how}; a blocked call kills the task (SIGSYS); system calls this libseccomp does not "
        f"know (above {newest}) fail with ENOSYS"
    )


def task_filter() -> Any:
    """The per-task filter (see the module docstring), built but not loaded: the zygote builds
    it once, each task process calls its ``load()`` before any environment code runs. ``None``
    without a binding."""
    sc, _ = load_binding()
    if sc is None:
        return None
    f = _base(sc)
    kill, eperm = sc.KILL_PROCESS, sc.ERRNO(errno.EPERM)
    for name in ("fork", "vfork"):
        try:
            f.add_rule(kill, name)
        except (OSError, RuntimeError, ValueError):
            pass
    f.add_rule(kill, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(eperm, "memfd_create")
    f.add_rule(eperm, "setpriority", sc.Arg(0, sc.NE, PRIO_PROCESS))
    f.add_rule(eperm, "setpriority", sc.Arg(1, sc.NE, 0))
    f.add_rule(eperm, "ioprio_set", sc.Arg(0, sc.NE, IOPRIO_WHO_PROCESS))
    f.add_rule(eperm, "ioprio_set", sc.Arg(1, sc.NE, 0))
    for name in ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "prlimit64"):
        f.add_rule(eperm, name, sc.Arg(0, sc.NE, 0))
    return f
