"""Distinct sandbox uids for every live pool on this machine.

Worker ``i`` of a pool runs as its own unprivileged uid, and the kernel counts ``RLIMIT_NPROC``
per uid: two pools sharing uids could exhaust each other's process limit (or signal each other's
tasks). So a pool *leases* its uids: starting at ``sandbox.uid_base`` it looks for ``workers``
consecutive uids that no other live pool holds, claiming each one with an exclusive ``flock`` on
``<lock dir>/<uid>.lock``. The locks are held by open files of the pool's process, so they are
released when the pool closes or its process dies (no stale claims), and they work across pools
of one process as well as across processes, whatever ``uid_base`` each was given.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading

__all__ = ["UidLease", "lease_uids", "lock_dir", "MAX_UID"]

MAX_UID = 2**32 - 2  # (uid_t)-1 is "no change"
_SCAN_BLOCKS = 4096


def lock_dir() -> str:
    """Where the uid locks live: one directory for the whole machine when running as root."""
    for d in ("/run/spade-sandbox-uids", os.path.join(tempfile.gettempdir(), f"spade-sandbox-uids-{os.geteuid()}")):
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    raise OSError("no writable directory for sandbox uid locks")


class UidLease:
    """The uids one pool holds (``uids``); :meth:`release` gives them back."""

    def __init__(self, uids: list[int], fds: list[int]) -> None:
        self.uids = uids
        self._fds = fds
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            fds, self._fds = self._fds, []
        for fd in fds:
            try:
                os.close(fd)  # closing the file drops its flock
            except OSError:
                pass

    def __del__(self) -> None:  # pragma: no cover - safety net
        self.release()


def _claim(path: str) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def lease_uids(base: int, n: int, *, directory: str | None = None) -> UidLease:
    """``n`` consecutive uids from ``base`` on (in steps of ``n``) that no live pool holds."""
    d = directory or lock_dir()
    start = base
    for _ in range(_SCAN_BLOCKS):
        if start + n - 1 > MAX_UID:
            break
        fds: list[int] = []
        for uid in range(start, start + n):
            fd = _claim(os.path.join(d, f"{uid}.lock"))
            if fd is None:
                break
            fds.append(fd)
        if len(fds) == n:
            return UidLease(list(range(start, start + n)), fds)
        for fd in fds:
            os.close(fd)
        start += n
    raise OSError(f"no {n} free sandbox uids from {base} on (every block of {_SCAN_BLOCKS} is held)")
