"""The isolation layers of a sandbox worker, applied once per worker, and the report of which
ones are active on this machine.

Layers (each one detected, never assumed):

=================  ===========================================================================
``process_group``  the worker leads its own session; the engine kills the whole group
``pid_namespace``  tasks run in a private PID namespace whose init is the worker: killing it
                   kills every process the environment made, even ones that left the group
``net_namespace``  a network namespace with no configured interface (connect() is unreachable)
``ipc_namespace``  private System V IPC objects (gone with the worker)
``uts_namespace``  its own host name (``sandbox``) and domain name: the host's are not seen
``time_namespace`` its own monotonic and boot-time clocks, starting near 0 when the worker starts:
                   the host's uptime is not seen (``CLOCK_BOOTTIME``, ``time.monotonic()``)
``mount_namespace`` private mounts (the layers below need it)
``minimal_root``   the worker's whole file system is a small tmpfs with read-only binds of the
                   Python installation, its shared libraries and the sandbox modules only
                   (pivot_root, see ``rootfs.py``): no checkout, data, /sys, /etc, host /proc;
                   the forbidden extension modules' files are covered by /dev/null
``hidden_proc``    /proc is an empty read-only directory: no procfs at all (``rootfs.hide_proc``)
``readonly_fs``    every mount read-only inside the worker
``hidden_home``    /root and /home are not visible (the minimal root; without it, empty tmpfs
                   over them with the interpreter bound back read-only)
``private_tmp``    a size- and inode-limited tmpfs on /tmp, invisible outside
``fresh_tmp``      a new, empty /tmp for every task (nothing is passed from one task to the next)
``uid_drop``       code runs as an unprivileged uid/gid with no supplementary groups
``no_new_privs``   no set-uid escalation (prctl PR_SET_NO_NEW_PRIVS)
``rlimit_as``      address-space limit (memory)
``rlimit_cpu``     CPU-seconds limit per task
``rlimit_fsize``   largest file it may write
``rlimit_nofile``  open-file limit
``rlimit_nproc``   process/thread limit (holds only after the uid drop)
``scrubbed_env``   only a few fixed environment variables are passed in
``seccomp``        a seccomp-bpf filter (kernel) kills the task on execve, non-AF_UNIX sockets,
                   ptrace, mount, namespaces, bpf, keyctl, perf_event_open... and makes
                   socket(AF_UNIX) fail: only socketpairs are left; each task adds a stricter
                   one: no new processes, no memfd, nothing that reaches other processes
                   (``seccomp_filter.py``)
``cgroup``         every task runs in a cgroup of its own (memory and pids limits for the task
                   as a whole), made by the engine (``cgroups.py``); reported by the pool
``audit_hook``     a Python audit hook kills the task on processes, sockets, ctypes, signals to
                   others and file writes outside the temp dir (reported as ``forbidden``); its
                   disarming is detected (``hookguard.py``)
=================  ===========================================================================

Imported by the untrusted worker as a plain module: standard library only, no relative imports.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
from typing import Any, Iterable

__all__ = ["LAYERS", "SandboxLayers", "SCRUBBED_ENV_KEYS", "scrubbed_environ", "enter_namespaces", "confine"]

LAYERS: tuple[str, ...] = (
    "process_group",
    "pid_namespace",
    "net_namespace",
    "ipc_namespace",
    "uts_namespace",
    "time_namespace",
    "mount_namespace",
    "minimal_root",
    "hidden_proc",
    "readonly_fs",
    "hidden_home",
    "private_tmp",
    "fresh_tmp",
    "uid_drop",
    "no_new_privs",
    "rlimit_as",
    "rlimit_cpu",
    "rlimit_fsize",
    "rlimit_nofile",
    "rlimit_nproc",
    "scrubbed_env",
    "seccomp",
    "cgroup",
    "audit_hook",
)

SCRUBBED_ENV_KEYS = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "HOME",
    "TMPDIR",
    "PYTHONHASHSEED",
    "PYTHONDONTWRITEBYTECODE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "MALLOC_ARENA_MAX",
)


class SandboxLayers(dict):
    """``{layer_name: active}`` for every name in :data:`LAYERS`."""

    @classmethod
    def of(cls, data: dict[str, Any]) -> "SandboxLayers":
        return cls({name: bool(data.get(name, False)) for name in LAYERS})

    @classmethod
    def intersect(cls, reports: Iterable[dict[str, Any]]) -> "SandboxLayers":
        """A layer is active for a pool only if it is active in every worker."""
        reports = list(reports)
        return cls({name: bool(reports) and all(r.get(name, False) for r in reports) for name in LAYERS})

    def missing(self) -> list[str]:
        return [name for name in LAYERS if not self.get(name, False)]


def scrubbed_environ(tmp: str = "/tmp") -> dict[str, str]:
    """The whole environment a worker gets: nothing of the engine's is passed through."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": tmp,
        "TMPDIR": tmp,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "MALLOC_ARENA_MAX": "2",  # threads would otherwise reserve 64 MiB arenas under RLIMIT_AS
    }


# ---------------------------------------------------------------------------------------------
# libc

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWTIME = 0x00000080
#: the host and domain names inside the sandbox (its own UTS namespace)
HOSTNAME = "sandbox"
DOMAINNAME = "(none)"
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
_SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}

_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_lib().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_lib().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def prctl(option: int, arg: int) -> None:
    _check(_lib().prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _readonly_everything() -> None:
    """mount_setattr(2) the whole tree read-only and nosuid (Linux >= 5.12)."""
    nr = _SYS_MOUNT_SETATTR.get(os.uname().machine)
    if nr is None:
        raise OSError("mount_setattr: unknown syscall number on this architecture")
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)  # not nodev: /dev/null stays usable
    rc = _lib().syscall(ctypes.c_long(nr), ctypes.c_int(AT_FDCWD), b"/", ctypes.c_uint(AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))
    _check(rc, "mount_setattr")


# ---------------------------------------------------------------------------------------------
# The layers


def _needed_paths(extra: Iterable[str]) -> list[str]:
    """Directories the interpreter must still read once homes are hidden (outermost only)."""
    cands = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, *sys.path, *extra) if p}
    cands = {p for p in cands if os.path.isdir(p)}
    out: list[str] = []
    for p in sorted(cands, key=len):
        if not any(p == q or p.startswith(q + "/") for q in out):
            out.append(p)
    return out


def _hide_homes(extra: Iterable[str]) -> None:
    keep = _needed_paths(extra)
    for home in ("/root", "/home"):
        if not os.path.isdir(home):
            continue
        inside = [p for p in keep if p.startswith(home + "/")]
        fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in inside]
        try:
            mount("tmpfs", home, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=256,mode=755")
            for p, fd in zip(inside, fds):
                os.makedirs(p, exist_ok=True)
                mount(f"/proc/self/fd/{fd}", p, None, MS_BIND | MS_REC)
        finally:
            for fd in fds:
                os.close(fd)


def enter_namespaces(opts: dict[str, Any]) -> tuple[dict[str, bool], dict[str, str]]:
    """Run in the worker's first process (still root): new namespaces and the private file
    system. Namespaces apply to this process (net, mounts) and to its next child (pid).
    Returns (layers, details of what failed)."""
    layers: dict[str, bool] = {}
    detail: dict[str, str] = {}
    layers["process_group"] = os.getpgid(0) == os.getpid()
    if not opts.get("isolate", True):
        return layers, {"isolate": "disabled by the caller"}
    hidden = _rootfs().under_tmp(opts.get("keep_paths", []))
    if hidden:  # the engine refuses such a pool (the tmpfs on /tmp would hide them from every task)
        detail["under_tmp"] = ", ".join(hidden)
    for name, flag in (
        ("mount_namespace", CLONE_NEWNS), ("net_namespace", CLONE_NEWNET), ("ipc_namespace", CLONE_NEWIPC),
        ("uts_namespace", CLONE_NEWUTS), ("pid_namespace", CLONE_NEWPID),
    ):
        try:
            unshare(flag)
            layers[name] = True
        except OSError as exc:
            layers[name] = False
            detail[name] = str(exc)
    try:  # before the minimal root hides /proc: the offsets are written through it
        _own_clocks()
        layers["time_namespace"] = True
    except OSError as exc:
        layers["time_namespace"] = False
        detail["time_namespace"] = str(exc)
    if layers.get("uts_namespace"):
        try:
            _neutral_names()
        except OSError as exc:
            layers["uts_namespace"] = False
            detail["uts_namespace"] = str(exc)
    if layers.get("net_namespace"):
        try:
            names = [n for _, n in __import__("socket").if_nameindex()]
            layers["net_namespace"] = names in ([], ["lo"])
        except OSError as exc:
            detail["net_namespace"] = str(exc)
    if layers["mount_namespace"]:
        try:
            mount(None, "/", None, MS_REC | MS_PRIVATE)
        except OSError as exc:
            layers["mount_namespace"] = False
            detail["mount_namespace"] = str(exc)
    if layers["mount_namespace"]:
        rootfs = _rootfs()
        try:
            masked = rootfs.extension_files(opts.get("masked_modules", []))
            detail["minimal_root"] = rootfs.enter_minimal_root(opts.get("keep_paths", []), masked)
            layers["minimal_root"] = layers["hidden_home"] = True
        except OSError as exc:
            layers["minimal_root"] = False
            detail["minimal_root"] = f"{exc} (falling back to hiding /root and /home)"
        steps = [] if layers["minimal_root"] else [("hidden_home", lambda: _hide_homes(opts.get("keep_paths", [])))]
        steps += [
            ("hidden_proc", rootfs.hide_proc),
            ("readonly_fs", _readonly_everything),
            (
                "private_tmp",
                lambda: rootfs.fresh_tmp(int(opts.get("tmp_size_mb", 64)), int(opts.get("tmp_inodes", 4096)), _uid(opts)),
            ),
        ]
        for name, fn in steps:
            try:
                fn()
                layers[name] = True
            except OSError as exc:
                layers[name] = False
                detail[name] = str(exc)
    return layers, detail


def _own_clocks() -> None:
    """A new time namespace for this process's next children (the zygote and its tasks), whose
    monotonic and boot-time clocks start near 0 instead of at the host's uptime (as root, before
    any process enters it; Linux >= 5.6)."""
    import time

    unshare(CLONE_NEWTIME)
    lines = []
    for name, clock in (("monotonic", time.CLOCK_MONOTONIC), ("boottime", time.CLOCK_BOOTTIME)):
        lines.append(f"{name} {-int(time.clock_gettime(clock)) + 1} 0\n")
    with open("/proc/self/timens_offsets", "w") as f:
        f.write("".join(lines))


def _neutral_names() -> None:
    """The sandbox's own host and domain names (in its new UTS namespace, as root)."""
    for fn, value in (("sethostname", HOSTNAME), ("setdomainname", DOMAINNAME)):
        raw = value.encode()
        _check(getattr(_lib(), fn)(raw, ctypes.c_size_t(len(raw))), fn)


def _rootfs() -> Any:
    """The sibling module rootfs (a plain import inside the worker)."""
    if __package__:
        from . import rootfs
    else:  # pragma: no cover - inside the worker
        import rootfs  # type: ignore[no-redef]
    return rootfs


def _uid(opts: dict[str, Any]) -> int | None:
    """The uid tasks run as, when this process will drop to it (it owns the task's /tmp)."""
    return int(opts.get("uid", 65534)) if os.getuid() == 0 else None


def confine(opts: dict[str, Any], layers: dict[str, bool], detail: dict[str, str]) -> None:
    """Run in the worker's long-lived process after its imports: no_new_privs, the uid drop and
    the rlimits. Updates ``layers``/``detail`` in place."""
    isolate = opts.get("isolate", True)
    dropped = False
    if isolate:
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            layers["no_new_privs"] = True
        except OSError as exc:
            layers["no_new_privs"] = False
            detail["no_new_privs"] = str(exc)
        uid = int(opts.get("uid", 65534))
        try:
            dropped = os.getuid() == 0
            if dropped:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            layers["uid_drop"] = os.getuid() != 0 and os.geteuid() != 0 and os.getgid() != 0
            if not layers["uid_drop"]:
                detail["uid_drop"] = "still root"
        except OSError as exc:
            layers["uid_drop"] = False
            detail["uid_drop"] = str(exc)
        try:
            prctl(PR_SET_DUMPABLE, 0)
        except OSError:
            pass
    mb = 1 << 20
    limits = {
        "rlimit_as": (resource.RLIMIT_AS, int(opts.get("memory_mb", 1024)) * mb),
        "rlimit_fsize": (resource.RLIMIT_FSIZE, int(opts.get("file_size_mb", 16)) * mb),
        "rlimit_nofile": (resource.RLIMIT_NOFILE, int(opts.get("open_files", 64))),
        "rlimit_nproc": (resource.RLIMIT_NPROC, int(opts.get("max_processes", 64))),
    }
    if isolate and not dropped:
        # RLIMIT_NPROC counts every process of the uid: for a user's own uid it would cap the
        # user's whole session, not the worker. It only means something after our own uid drop.
        limits.pop("rlimit_nproc")
        layers["rlimit_nproc"] = False
        detail["rlimit_nproc"] = "not started as root: no private uid to count processes against"
    for name, (res, value) in limits.items():
        if not isolate:
            layers[name] = False
            continue
        try:
            resource.setrlimit(res, (value, value))
            layers[name] = True
        except (OSError, ValueError) as exc:
            layers[name] = False
            detail[name] = str(exc)
    if layers.get("rlimit_nproc") and not layers.get("uid_drop"):
        layers["rlimit_nproc"] = False
        detail["rlimit_nproc"] = "ignored by the kernel for uid 0"
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (OSError, ValueError):
        pass
    layers["rlimit_cpu"] = bool(isolate)  # applied per task, in the task process
    allowed = set(SCRUBBED_ENV_KEYS)
    extra = sorted(set(opts.get("start_env", os.environ)) - allowed)  # as the process started
    layers["scrubbed_env"] = not extra
    if extra:
        detail["scrubbed_env"] = "unexpected variables: " + ", ".join(extra[:10])
    layers["audit_hook"] = bool(isolate) and hasattr(sys, "addaudithook")
