"""A cgroup per sandbox task: memory and process limits for the task as a whole.

Rlimits are per process: a task that reaches a process-creation primitive, or memory that is not
address space (``memfd_create``, tmpfs pages, pipe buffers), is not bounded by them as a whole.
So when the kernel lets the engine make cgroups, every task runs in a cgroup of its own, made
here, on the engine's (trusted) side:

* the pool makes ``<the engine's own cgroup>/spade-sandbox-<engine pid>-<n>/`` and, per task,
  a child ``t<k>`` with ``memory`` (the task's memory limit plus its /tmp size; swap 0 where the
  kernel accounts it) and ``pids`` limits (``max_processes``: threads count);
* the engine opens the child's ``cgroup.procs`` and hands the open file to the worker with the
  task's pipes; the task process writes ``0`` to it (moving itself) before any environment code
  runs, then closes it. The write is checked against the credentials the file was opened with
  (the engine's), so the unprivileged task can do it, and nothing else: it never sees /sys;
* after ``ready`` the engine checks that the cgroup holds the task; after the task it reads the
  counters (peak memory, OOM kills, peak and refused processes) and removes the cgroup. An OOM
  kill is a ``memory`` verdict.

Cgroup v2 is used when the engine's own cgroup can delegate ``memory`` and ``pids`` to children
(its ``cgroup.subtree_control`` accepts them), else cgroup v1 when the ``memory`` hierarchy (and
``pids``, if mounted) are writable; otherwise there is no such layer and :attr:`TaskCgroups.detail`
says why (e.g. not root and no delegation). Cgroups are made under the engine's own cgroup, never
elsewhere, so whatever limits the engine itself runs under still hold for its tasks.

Engine side only (the worker never imports this module).
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TaskCgroups", "TaskCgroup", "Usage", "describe_machine"]

log = logging.getLogger("spade_engine.sandbox")

_PREFIX = "spade-sandbox-"
_serial = itertools.count()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of the cgroup file systems this process sees."""
    out = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(parts) < 5 or len(rparts) < 3 or rparts[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((parts[4], rparts[0], set(rparts[2].split(","))))
    return out


def _own() -> dict[str, str]:
    """The engine's own cgroup per hierarchy: ``{"": path}`` for v2, ``{"memory": path, ...}`` for v1."""
    out: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _v2_dir() -> Path | None:
    own = _own()
    for point, kind, _ in _mounts():
        if kind == "cgroup2" and "" in own:
            return Path(point + own[""])
    return None


def _v1_dir(controller: str) -> Path | None:
    own = _own()
    for point, kind, opts in _mounts():
        if kind == "cgroup" and controller in opts and controller in own:
            return Path(point + own[controller])
    return None


def describe_machine() -> str:
    """One line: what cgroups this machine offers the engine (for the docs and the layer detail)."""
    parts = []
    v2 = _v2_dir()
    if v2 is not None:
        ctl = _read(v2 / "cgroup.controllers").split()
        parts.append(f"cgroup v2 at {v2} with controllers [{' '.join(ctl) or 'none'}]")
    for c in ("memory", "pids"):
        d = _v1_dir(c)
        if d is not None:
            parts.append(f"cgroup v1 {c} at {d}" + (" (writable)" if os.access(d, os.W_OK) else " (read-only)"))
    return "; ".join(parts) or "no cgroup file system mounted"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rmtree_cgroups(root: Path, tries: int = 1) -> bool:
    """Remove a cgroup and its children (cgroups are removed with rmdir, deepest first)."""
    ok = True
    try:
        children = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return not root.exists()
    for child in children:
        ok = _rmtree_cgroups(child, tries) and ok
    for i in range(tries):
        try:
            root.rmdir()
            return ok
        except FileNotFoundError:
            return ok
        except OSError as exc:
            if exc.errno != errno.EBUSY or i == tries - 1:
                return False
            time.sleep(0.02)
    return False


@dataclass(frozen=True)
class Usage:
    """What a task used, read from its cgroup after it ended (``None``: not reported by this kernel)."""

    memory_peak_bytes: int | None = None
    oom_kills: int = 0
    pids_peak: int | None = None
    pids_refused: int = 0


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


class TaskCgroup:
    """One task's cgroup (in one or two hierarchies). :attr:`fds` are its ``cgroup.procs``,
    opened for writing, to be handed to the task (the caller closes them once sent)."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version = version
        self.dirs = dirs  # controller ("memory", "pids"; "" for v2) -> directory
        self.fds: list[int] = []
        try:
            for d in dict.fromkeys(dirs.values()):
                self.fds.append(os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            self.close_fds()
            self.remove()
            raise

    @property
    def _memory(self) -> Path:
        return self.dirs.get("memory") or self.dirs[""]

    def close_fds(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def members(self) -> list[int]:
        """Process ids in the task's cgroup (as the engine sees them)."""
        return [int(x) for x in _read(self._memory / "cgroup.procs").split() if x.isdigit()]

    def usage(self) -> Usage:
        mem = self._memory
        pids = self.dirs.get("pids") or self.dirs.get("")
        if self.version == 2:
            peak = _int(_read(mem / "memory.peak"))
            ooms = _counter(_read(mem / "memory.events"), "oom_kill")
        else:
            peak = _int(_read(mem / "memory.max_usage_in_bytes"))
            ooms = _counter(_read(mem / "memory.oom_control"), "oom_kill")
        pids_peak = _int(_read(pids / "pids.peak")) if pids is not None else None
        refused = _counter(_read(pids / "pids.events"), "max") if pids is not None else 0
        return Usage(memory_peak_bytes=peak, oom_kills=ooms, pids_peak=pids_peak, pids_refused=refused)

    def remove(self, tries: int = 50) -> bool:
        """Remove the cgroup (it must be empty: the task and its threads are gone)."""
        ok = True
        for d in dict.fromkeys(self.dirs.values()):
            ok = _rmtree_cgroups(d, tries) and ok
        return ok


class TaskCgroups:
    """A pool's cgroups: :meth:`new_task` makes one per task. :attr:`available` says whether
    the layer is there, :attr:`detail` what was found (or why not)."""

    def __init__(self, *, memory_bytes: int, pids_max: int) -> None:
        self.memory_bytes = int(memory_bytes)
        self.pids_max = int(pids_max)
        self.version = 0
        self.roots: dict[str, Path] = {}
        self.detail = ""
        self._tasks = itertools.count()
        self._leftover: list[TaskCgroup] = []
        try:
            self._setup()
        except OSError as exc:
            self._discard()
            self.version, self.roots = 0, {}
            self.detail = f"no cgroup for tasks: {exc} ({describe_machine()})"

    @property
    def available(self) -> bool:
        return self.version > 0

    def _name(self) -> str:
        return f"{_PREFIX}{os.getpid()}-{next(_serial)}"

    def _setup(self) -> None:
        v2 = _v2_dir()
        if v2 is not None and {"memory", "pids"} <= set(_read(v2 / "cgroup.controllers").split()):
            root = v2 / self._name()
            self._sweep(v2)
            os.mkdir(root)
            self.roots = {"": root}
            try:
                (v2 / "cgroup.subtree_control").write_text("+memory +pids")  # may already be on
            except OSError:
                pass
            try:
                (root / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError as exc:
                raise OSError(exc.errno, f"cgroup v2 at {v2} does not delegate memory and pids ({exc.strerror})") from None
            self.version = 2
            self.detail = f"cgroup v2: {root}/t<k> per task, memory.max {self.memory_bytes >> 20} MiB, pids.max {self.pids_max}"
            return
        mem = _v1_dir("memory")
        if mem is None:
            raise OSError(errno.ENOENT, "no writable cgroup v2 with memory and pids, and no cgroup v1 memory hierarchy")
        self._sweep(mem)
        roots = {"memory": mem / self._name()}
        pids = _v1_dir("pids")
        if pids is not None:
            self._sweep(pids)
            roots["pids"] = pids / roots["memory"].name
        for d in roots.values():
            os.mkdir(d)
        self.roots = roots
        self.version = 1
        self.detail = (
            f"cgroup v1: {' and '.join(str(d) for d in roots.values())}/t<k> per task, memory limit "
            f"{self.memory_bytes >> 20} MiB" + (f", pids.max {self.pids_max}" if "pids" in roots else ", no pids hierarchy")
        )

    def _sweep(self, parent: Path) -> None:
        """Remove cgroups left by engines that are gone (killed before they could clean up)."""
        try:
            entries = list(parent.iterdir())
        except OSError:
            return
        for d in entries:
            if not d.name.startswith(_PREFIX) or not d.is_dir():
                continue
            pid = d.name[len(_PREFIX):].partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                _rmtree_cgroups(d)

    def new_task(self) -> TaskCgroup:
        """A fresh cgroup for one task, with its limits set; raises OSError when it cannot be made."""
        name = f"t{next(self._tasks)}"
        dirs = {c: r / name for c, r in self.roots.items()}
        made: list[Path] = []
        try:
            for d in dirs.values():
                os.mkdir(d)
                made.append(d)
            if self.version == 2:
                d = dirs[""]
                (d / "memory.max").write_text(str(self.memory_bytes))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(self.pids_max))
            else:
                d = dirs["memory"]
                (d / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
                if (d / "memory.memsw.limit_in_bytes").exists():
                    (d / "memory.memsw.limit_in_bytes").write_text(str(self.memory_bytes))
                if "pids" in dirs:
                    (dirs["pids"] / "pids.max").write_text(str(self.pids_max))
        except OSError:
            for d in reversed(made):
                _rmtree_cgroups(d)
            raise
        return TaskCgroup(self.version, dirs)

    def release(self, cg: TaskCgroup) -> None:
        """Remove a finished task's cgroup (kept for a later try if it is not empty yet)."""
        cg.close_fds()
        if not cg.remove(tries=25):
            self._leftover.append(cg)
        if self._leftover:
            self._leftover = [c for c in self._leftover if not c.remove(tries=1)]

    def _discard(self) -> None:
        for root in self.roots.values():
            _rmtree_cgroups(root, tries=50)

    def close(self) -> None:
        """Remove every cgroup of the pool (after its workers are gone)."""
        for cg in self._leftover:
            cg.remove(tries=50)
        self._leftover = []
        self._discard()
