"""The sandbox's file system: a minimal root, a fresh /tmp for every task, no /proc.

:func:`enter_minimal_root` runs in the worker's first process (root, in its own mount namespace)
and replaces the whole file system the worker sees by a small tmpfs holding only read-only bind
mounts of

* the Python installation: ``sys.prefix``, ``sys.exec_prefix``, ``sys.base_prefix``,
  ``sys.base_exec_prefix`` and the site-packages directories (each at its real path and, when a
  symlink leads to it, at the path Python uses),
* the directories of the shared libraries the interpreter has loaded (e.g.
  ``/usr/lib/x86_64-linux-gnu``, so extension modules imported later still load),
* the project's sandbox modules (``spade_engine/sandbox``, read for tracebacks),
* ``/dev/null``, ``/dev/zero``, ``/dev/full``, ``/dev/random`` and ``/dev/urandom``,

with the extension modules the worker forbids (``_testcapi``, ``_xxsubinterpreters``, ``_ctypes``,
``_posixsubprocess``... see ``worker.FORBIDDEN_MODULES``) covered by ``/dev/null``: a module the
worker never loaded cannot be loaded from them, whatever importer is used (a C module that creates
sub-interpreters, which have no audit hook, among them). Then it ``pivot_root``\\ s into it and detaches the old root. The checkout and every data directory,
/sys, /home, /root (but for a Python installed there), /etc and the host's /proc are simply not
there, and the first process mounts a fresh, empty, size-limited tmpfs on ``/tmp`` for every task
(:func:`fresh_tmp`): nothing a task writes is seen by the next one.

``/proc`` stays an empty, read-only directory (:func:`hide_proc`; also over the host's /proc when
the minimal root could not be built). No procfs is mounted at all, not even one of the sandbox's
own PID namespace: its kernel-wide files describe the host (``sys/kernel/random/boot_id``,
``version``, ``meminfo``, ``uptime``, ``stat``, ``loadavg``, ``cmdline``...), and the per-process
files that cannot be masked for processes not yet started (``/proc/self/mountinfo``, ``mounts``,
``mountstats``) show the host's devices, file-system options and the paths the binds come from.
Nothing in a worker reads /proc once it is isolated (the seccomp check uses ``prctl``).

Imported by the untrusted worker as a plain module: standard library only.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
import site
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["DEVICES", "needed_dirs", "under_tmp", "extension_files", "enter_minimal_root", "fresh_tmp", "hide_proc"]

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_STAGE = "/tmp"  # where the new root is assembled (inside our own mount namespace only)

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


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_lib().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _umount(target: str, flags: int = 0) -> None:
    _check(_lib().umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def _pivot_root(new: str, old: str) -> None:
    nr = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None:
        raise OSError("pivot_root: unknown syscall number on this architecture")
    _check(_lib().syscall(ctypes.c_long(nr), new.encode(), old.encode()), "pivot_root")


def _outermost(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in sorted({os.path.normpath(p) for p in paths}, key=len):
        if p != "/" and not any(p == q or p.startswith(q + "/") for q in out):
            out.append(p)
    return out


def _library_dirs() -> set[str]:
    """Directories of the shared libraries mapped into this process (not of Python extension
    modules: one loaded from outside the installation, like Debian's seccomp binding, is in
    memory already and its directory is not needed)."""
    out: set[str] = set()
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if path.startswith("/") and ".so" in path and not path.endswith(suffixes):
                    out.add(os.path.dirname(os.path.realpath(path)))
    except OSError:
        pass
    return out


def needed_dirs(extra: Iterable[str] = ()) -> list[str]:
    """Every directory the minimal root binds (outermost only, real paths and the paths Python
    uses for them)."""
    wanted = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *extra]
    try:
        wanted += list(site.getsitepackages())
    except AttributeError:  # pragma: no cover - old virtualenv's site module
        pass
    dirs = {p for p in wanted if p and os.path.isdir(p)}
    dirs |= {os.path.realpath(p) for p in dirs}
    dirs |= _library_dirs()
    return _outermost(p for p in dirs if os.path.isdir(p))


def under_tmp(keep: Iterable[str] = ()) -> list[str]:
    """The directories the sandbox needs (:func:`needed_dirs`) that lie under /tmp: every task
    gets a fresh, empty tmpfs on /tmp, which would hide them (a checkout or virtual environment
    in /tmp)."""
    return [d for d in needed_dirs(keep) if d == "/tmp" or d.startswith("/tmp/")]


def extension_files(names: Iterable[str]) -> list[str]:
    """The files of the extension modules called ``names`` (top-level names) that this Python
    would load: every file named ``<name><extension suffix>`` in a directory of ``sys.path``."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    out: set[str] = set()
    for d in {os.path.realpath(p) for p in sys.path if p}:
        if not os.path.isdir(d):
            continue
        for name in names:
            for suffix in suffixes:
                path = os.path.join(d, name + suffix)
                if os.path.isfile(path):
                    out.add(path)
    return sorted(out)


def enter_minimal_root(keep: Iterable[str], masked: Iterable[str] = ()) -> str:
    """Assemble the minimal root and pivot into it (see the module docstring). Returns a detail
    line; raises OSError when any step fails (the caller then falls back)."""
    dirs = needed_dirs(keep)
    # O_PATH handles first: the stage mount below hides whatever lives under it
    fds = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for p in dirs]
    devs = [(d, os.open(d, os.O_PATH | os.O_CLOEXEC)) for d in DEVICES if os.path.exists(d)]
    links = {p: os.readlink(p) for p in ("/lib", "/lib64", "/lib32", "/libx32") if os.path.islink(p)}
    try:
        _mount("tmpfs", _STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
        for p, fd in fds:
            target = _STAGE + p
            os.makedirs(target, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        os.makedirs(_STAGE + "/dev", exist_ok=True)
        for d, fd in devs:
            open(_STAGE + d, "w").close()
            _mount(f"/proc/self/fd/{fd}", _STAGE + d, None, MS_BIND)
        hidden = 0
        null = _STAGE + "/dev/null"
        for path in masked:  # forbidden extension modules: /dev/null over each file
            target = _STAGE + os.path.realpath(path)
            if os.path.isfile(target) and os.path.exists(null):
                _mount(null, target, None, MS_BIND)
                hidden += 1
        for name, target in links.items():
            if not os.path.lexists(_STAGE + name):
                os.symlink(target, _STAGE + name)
        for d in ("/tmp", "/proc", "/.old"):
            os.makedirs(_STAGE + d, exist_ok=True)
        os.chmod(_STAGE + "/tmp", 0o755)
    finally:
        for _, fd in fds + devs:
            os.close(fd)
    _pivot_root(_STAGE, _STAGE + "/.old")
    os.chdir("/")
    _umount("/.old", MNT_DETACH)
    os.rmdir("/.old")
    return (
        f"pivot_root into a tmpfs with {len(dirs)} read-only directories ({hidden} forbidden extension modules "
        "covered): " + ", ".join(dirs)
    )


def fresh_tmp(size_mb: int, inodes: int, uid: int | None) -> None:
    """Replace whatever is on /tmp by a new empty tmpfs (run as root in the worker's mount
    namespace, between tasks; the old one is detached and freed once nothing uses it)."""
    try:
        _umount("/tmp", MNT_DETACH)
    except OSError:
        pass  # nothing mounted yet
    owner = f",uid={uid},gid={uid},mode=700" if uid is not None else ",mode=1777"
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size={int(size_mb)}m,nr_inodes={int(inodes)}{owner}")


def hide_proc() -> None:
    """An empty, read-only tmpfs on /proc (run as root in the worker's mount namespace): nothing
    of the host's procfs, and no procfs of the sandbox's own (see the module docstring)."""
    _mount("tmpfs", "/proc", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=2,mode=555")
