"""The sandbox worker: the only code that runs next to model-written environments.

Started by the pool as ``python3 -s -B worker.py '<json options>'`` with a scrubbed environment,
a control socket (a ``SOCK_SEQPACKET`` socketpair end: the engine sends task requests on it, each
with the new task's own pipes and cgroup files attached as ``SCM_RIGHTS``) and a status pipe. It
becomes three kinds of process:

* the **supervisor** (first process, root): enters the new namespaces and the minimal root, then
  forks the zygote and waits; it mounts a fresh, empty /tmp whenever the zygote is about to start
  a task, and kills the zygote (and with it the whole PID namespace) the moment the engine's end
  of the control socket goes away. It never runs environment code and tasks cannot reach it.
* the **zygote** (PID 1 of the new PID namespace): imports everything environments commonly need,
  drops to an unprivileged uid with rlimits, installs the seccomp filter, says hello with its
  isolation report on the status pipe, then forks one **task** process per task. When a task ends it kills every process left
  in the namespace and reports how the task ended (exit code, signal) on the status pipe, which
  the task cannot write to. It never runs environment code, so its reports can be trusted.
* the **task**: starts from a clean slate (it moves itself into the cgroup the engine made for it,
  keeps only its own two pipes, which no other task ever had, and closes every other descriptor;
  it loads the per-task seccomp filter: no new processes), installs the audit hook, then executes
  commands from the engine (parse, load, new, reset, step, solution, end) against environment
  instances and answers with JSON-safe values. It never decides whether an environment is valid:
  the engine grades what it sends, against a strict schema per reply (``replies.py``).

  Inside the task, environment code runs in the main thread; the pipes, the framing, the audit
  hook's reports and its fingerprint belong to a second thread (started with ``_thread``, so no
  ``threading.Thread`` object leads to it) in which no environment code ever runs: it reads a
  command, hands it to the main thread, copies the answer into exact builtin types (no method of
  an environment's object runs in it) and writes the reply. Every function and table it and the
  audit hook use is bound privately when the task starts (functions cloned with globals of their
  own and a private copy of the builtins), so patching a module, a class or the builtins from
  environment code changes neither.

Frames the task writes (all length-framed JSON): ``{"op": "ready", "seq": 0, "guard": ...}`` once,
``{"op": "reply", "seq": n, "ok": true, "data": {...}, "guard": ...}`` or ``{..., "ok": false,
"error": {...}}`` per command, and ``{"op": "forbidden", ...}`` from the audit hook just before it
kills the task. ``guard`` is the audit hook's fingerprint and heartbeat (``hookguard.py``).

Only the standard library, gymnasium and the sibling modules framing/isolation/adapters/limits/
hookguard/rootfs/seccomp_filter are used.
"""

from __future__ import annotations

import os
import sys

_START_ENV = sorted(os.environ)  # before any import can add to it
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import adapters  # noqa: E402
import framing  # noqa: E402
import hookguard  # noqa: E402
import isolation  # noqa: E402
import limits  # noqa: E402
import rootfs  # noqa: E402,F401 - used by isolation, imported before the file system shrinks
import seccomp_filter  # noqa: E402

sys.path.remove(_HERE)

# Modules environments commonly import, loaded once in the zygote (imports after the uid drop may
# not be able to read the interpreter's files, and loading them per task would be slow).
import ast  # noqa: E402
import bisect  # noqa: E402,F401
import collections  # noqa: E402,F401
import copy  # noqa: E402,F401
import dataclasses  # noqa: E402,F401
import decimal  # noqa: E402,F401
import difflib  # noqa: E402,F401
import enum  # noqa: E402,F401
import fractions  # noqa: E402,F401
import functools  # noqa: E402,F401
import hashlib  # noqa: E402,F401
import heapq  # noqa: E402,F401
import itertools  # noqa: E402,F401
import linecache  # noqa: E402
import json  # noqa: E402,F401
import math  # noqa: E402,F401
import operator  # noqa: E402,F401
import random  # noqa: E402,F401
import re  # noqa: E402,F401
import resource  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402,F401
import string  # noqa: E402,F401
import textwrap  # noqa: E402,F401
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
import typing  # noqa: E402,F401
import unicodedata  # noqa: E402,F401
import warnings  # noqa: E402
from typing import Any  # noqa: E402

# Bound as module globals so that an environment monkeypatching builtins/math cannot change how
# this worker encodes what it sends (the engine re-checks everything anyway).
from builtins import (  # noqa: E402
    all, any, bool, callable, dict, float, getattr, int, isinstance, len, list, str, tuple, type,
)
from math import isfinite  # noqa: E402

import gymnasium  # noqa: E402
import gymnasium.spaces  # noqa: E402
import numpy  # noqa: E402

#: Exit code of a task killed by the audit hook.
FORBIDDEN_EXIT = 86
#: Exit code of a task that could not even report a MemoryError.
MEMORY_EXIT = 87
#: Exit code of a task whose own loop failed (a bug or a tampered worker).
BROKEN_EXIT = 70
#: Exit code of a task that could not enter the cgroup the engine made for it.
CGROUP_EXIT = 88

FORBIDDEN_MODULES = frozenset(
    {
        "subprocess", "_posixsubprocess", "socket", "_socket", "ssl", "_ssl", "ctypes", "_ctypes",
        "multiprocessing", "_multiprocessing", "pty", "asyncio", "http", "ftplib",
        "smtplib", "poplib", "imaplib", "telnetlib", "socketserver", "xmlrpc", "webbrowser",
        "concurrent", "isolation", "_xxsubinterpreters", "rootfs", "seccomp_filter", "seccomp", "pyseccomp",
        # C modules that run code in a sub-interpreter (which has no audit hook) or reach raw memory
        "_xxinterpchannels", "_interpreters", "_interpchannels", "_interpqueues", "_testcapi", "_testinternalcapi",
        "_testbuffer", "_testclinic", "_testimportmultiple", "_testmultiphase", "_testsinglephase", "_ctypes_test",
        "_xxtestfuzz", "xxlimited", "xxlimited_35", "xxsubtype", "_posixshmem", "_imp",
    }
)
_FORBIDDEN_EVENTS = frozenset(
    {
        "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "signal.pthread_kill",
        "resource.prlimit", "os.chroot", "sys.remote_exec", "os.setns", "os.unshare",
        # the garbage collector's object lists lead to the hook's closure (see hookguard.py)
        "gc.get_objects", "gc.get_referrers", "gc.get_referents",
        # a sub-interpreter has no audit hook; other threads' frames and tracers lead to the I/O thread
        "cpython.PyInterpreterState_New", "cpython._PySys_ClearAuditHooks", "sys._current_frames", "sys.settrace",
        "sys.setprofile",
    }
)
#: forbidden names that stay loaded: the import system's own ``_imp`` (its loaders are audited instead)
_NOT_HOLLOWED = frozenset({"_imp"})
#: attributes that give a frame: refused while a C extension module is being created
_FRAME_ATTRS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back")
_FORBIDDEN_PREFIXES = (
    "os.exec", "os.spawn", "os.posix_spawn", "subprocess.", "pty.", "socket.", "ctypes.",
    "_posixsubprocess.", "webbrowser.", "urllib.", "http.", "ftplib.", "smtplib.", "poplib.",
    "imaplib.", "nntplib.", "telnetlib.", "_xxsubinterpreters.",
)
# events whose arguments at these positions are paths being modified
_WRITE_EVENTS = {
    "os.remove": (0,), "os.rename": (0, 1), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,),
    "os.chown": (0,), "os.link": (0, 1), "os.symlink": (0, 1), "os.truncate": (0,), "os.utime": (0,),
    "os.mkfifo": (0,), "os.mknod": (0,), "os.setxattr": (0,), "os.removexattr": (0,), "os.chflags": (0,),
    "shutil.copyfile": (1,), "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.copytree": (1,),
    "shutil.move": (0, 1), "shutil.rmtree": (0,), "shutil.chown": (0,), "shutil.make_archive": (0,),
    "shutil.unpack_archive": (1,), "tempfile.mkstemp": (0,), "tempfile.mkdtemp": (0,),
}
_READ_EVENTS = {"os.listdir": (0,), "os.scandir": (0,), "glob.glob": (0,), "os.chdir": (0,), "os.walk": (0,)}
# The directory above the package: the source checkout (or the site-packages holding an installed
# package, which the interpreter's own readable paths then cover). Denied like the homes wherever it
# lies, so a program reading the checkout gets the same verdict whether it was cloned under /home or
# elsewhere; what the interpreter needs (a .venv inside it, the sandbox modules) stays readable.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.realpath(_HERE)))
_DENY_READ = ("/root", "/home", "/etc/shadow", "/etc/gshadow", "/run/secrets", "/var/run/secrets", _CHECKOUT)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_STATIC_OS_CALLS = frozenset(
    {"system", "popen", "fork", "forkpty", "kill", "killpg", "execv", "execve", "execl", "execle", "execlp",
     "execlpe", "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "spawnlp", "spawnvp",
     "posix_spawn", "posix_spawnp"}
)

#: Names every environment module starts with (an explicit import rebinds them): the common
#: standard-library modules and names generated code uses without importing, as the SPADE
#: release's loader provides. All are loaded in the zygote already.
COMMON_NAMES: dict[str, Any] = {
    **{m.__name__: m for m in (
        itertools, math, random, re, json, collections, functools, string, copy, heapq, operator, statistics,
        bisect, fractions, decimal, textwrap, dataclasses, enum,
    )},
    "deque": collections.deque, "defaultdict": collections.defaultdict, "Counter": collections.Counter,
    "OrderedDict": collections.OrderedDict, "namedtuple": collections.namedtuple,
    "combinations": itertools.combinations, "permutations": itertools.permutations, "product": itertools.product,
    "chain": itertools.chain, "accumulate": itertools.accumulate, "reduce": functools.reduce,
    "lru_cache": functools.lru_cache, "deepcopy": copy.deepcopy, "heappush": heapq.heappush, "heappop": heapq.heappop,
    "Fraction": fractions.Fraction, "dataclass": dataclasses.dataclass,
    **{n: getattr(typing, n) for n in (
        "Any", "Callable", "Dict", "FrozenSet", "Iterable", "List", "Mapping", "Optional", "Sequence", "Set", "Tuple",
        "Union",
    )},
}

_BUILTINS = dict(vars(__import__("builtins")))
_real_import = _BUILTINS["__import__"]


class _CallableModule(types.ModuleType):
    """A common module that can also be called as the function of the same name: what ``from
    random import random`` gives environment code, so both ``random()`` and ``random.Random(seed)``
    (the confusion small models make) work."""

    def __init__(self, module: types.ModuleType, fn: Any) -> None:
        super().__init__(module.__name__)
        self.__dict__.update(module.__dict__)
        self.__dict__["_spade_call"] = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_spade_call"](*args, **kwargs)


def _tolerant_import(name: Any, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """``__import__`` for environment code. ``from random import re`` or ``from math import
    random`` (a common name asked of the wrong standard module) gets the common module or name
    instead of an ImportError; ``from random import random`` gets a module that is also the
    function; ``from random import *`` does the same for the names it binds. Everything else is the
    real import (audit hook included)."""
    module = _real_import(name, globals, locals, fromlist, level)
    if level == 0 and fromlist and isinstance(module, types.ModuleType):
        fix = {}
        names = list(fromlist)
        if "*" in names:  # the names a star import binds: __all__, else the public ones
            public = getattr(module, "__all__", None)
            if not isinstance(public, (list, tuple)):
                public = [k for k in vars(module) if not k.startswith("_")]
            names += [n for n in public if type(n) is str]
        for n in names:
            if type(n) is not str or n not in COMMON_NAMES:
                continue
            common = COMMON_NAMES[n]
            if not hasattr(module, n):
                fix[n] = common
            elif isinstance(common, types.ModuleType) and module is common:
                attr = getattr(module, n)
                if callable(attr) and not isinstance(attr, type):
                    fix[n] = _CallableModule(common, attr)
        if fix:
            view = types.ModuleType(module.__name__)
            view.__dict__.update(module.__dict__)
            view.__dict__.update(fix)
            return view
    return module


MAX_SOURCE_CHARS = limits.MAX_SOURCE_CHARS
MAX_INFO_ITEMS = limits.MAX_INFO_ITEMS
MAX_SOLUTION_ACTIONS = limits.MAX_SOLUTION_ACTIONS


# ---------------------------------------------------------------------------------------------
# Supervisor and zygote


def main(argv: list[str]) -> None:
    opts = json.loads(argv[1])
    opts["start_env"] = _START_ENV
    opts["masked_modules"] = sorted(FORBIDDEN_MODULES)  # their files are covered in the minimal root
    if opts.get("seccomp_binding", True):
        seccomp_filter.load_binding()  # before the minimal root hides where the binding lives
    else:  # the engine asked to behave as if no binding were installed (SPADE_SANDBOX_NO_SECCOMP_BINDING)
        seccomp_filter.block_binding("no libseccomp binding (python3-seccomp or pyseccomp): hidden by SPADE_SANDBOX_NO_SECCOMP_BINDING")
    for name in opts.get("preload", []):  # trusted, configured by the engine, before isolation
        try:
            __import__(str(name))
        except Exception:  # noqa: BLE001 - a missing optional module only makes envs using it fail
            pass
    ctl, status_w = opts["fds"]
    layers, detail = isolation.enter_namespaces(opts)
    fallback_tmp = None
    if not layers.get("private_tmp"):
        # no private tmpfs: a private directory instead (no size limit), removed when we exit;
        # the zygote makes a fresh subdirectory of it for every task
        import tempfile

        fallback_tmp = opts["tmp_dir"] = tempfile.mkdtemp(prefix="spade-sandbox-")
        if opts.get("isolate", True) and os.getuid() == 0:
            os.chown(fallback_tmp, int(opts.get("uid", 65534)), int(opts.get("uid", 65534)))
        os.chmod(fallback_tmp, 0o700)
    ask_r, ask_w = os.pipe()  # zygote -> supervisor: "a fresh /tmp, please"
    ack_r, ack_w = os.pipe()  # supervisor -> zygote: done (b"K") or failed (b"E")
    pid = os.fork()
    if pid:
        os.close(ask_w)
        os.close(ack_r)
        code = _supervise(pid, ctl, status_w, ask_r, ack_w, opts if layers.get("private_tmp") else None)
        if fallback_tmp:
            import shutil

            shutil.rmtree(fallback_tmp, ignore_errors=True)
        os._exit(code)
    else:
        os.close(ask_r)
        os.close(ack_w)
        try:
            _zygote(opts, layers, detail, ctl, status_w, (ask_w, ack_r))
        except BaseException:  # noqa: BLE001 - reported on stderr (the engine's, in debug mode)
            traceback.print_exc()
        finally:
            os._exit(BROKEN_EXIT)


def _supervise(pid: int, ctl: int, status_w: int, ask_r: int, ack_w: int, tmp_opts: dict[str, Any] | None) -> int:
    """Wait for the zygote; mount a fresh /tmp when it asks (``tmp_opts``: the worker's options
    when /tmp is a tmpfs of ours); kill it (and its namespace) when the engine goes away.
    Returns the exit status to end with."""
    import select

    os.close(status_w)
    cmd_r = ctl
    poller = select.poll()
    poller.register(cmd_r, 0)  # only POLLHUP/POLLERR: the engine closed its end
    poller.register(ask_r, select.POLLIN)
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = -1
    uid = isolation._uid(tmp_opts) if tmp_opts is not None else None
    while True:
        events = poller.poll(None if pidfd >= 0 else 200)
        if any(fd == cmd_r for fd, _ in events):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif any(fd == ask_r for fd, _ in events):
            asked = os.read(ask_r, 1)
            if asked == b"T":
                ok = b"E"
                if tmp_opts is not None:
                    try:
                        rootfs.fresh_tmp(int(tmp_opts.get("tmp_size_mb", 64)), int(tmp_opts.get("tmp_inodes", 4096)), uid)
                        ok = b"K"
                    except OSError:
                        pass
                try:
                    os.write(ack_w, ok)
                except OSError:
                    pass
            elif not asked:
                poller.unregister(ask_r)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) & 0xFF
        if any(fd == cmd_r for fd, _ in events):
            os.waitpid(pid, 0)
            return 0


class _FreshTmp:
    """A new, empty /tmp for every task: a new tmpfs mounted by the supervisor, or (without a
    private mount namespace) a new private directory that is removed after the task."""

    def __init__(self, opts: dict[str, Any], layers: dict[str, bool], detail: dict[str, str], ctl: tuple[int, int]) -> None:
        self.ask_w, self.ack_r = ctl
        self.mounted = bool(layers.get("private_tmp"))
        self.base = "/tmp" if self.mounted else opts.get("tmp_dir") or "/tmp"
        self.count = 0
        self.current = self.base
        if not self.mounted and opts.get("tmp_dir"):
            layers["private_tmp"] = True  # a private directory made by the supervisor (no size limit)
        layers["fresh_tmp"] = self.mounted or bool(opts.get("tmp_dir"))
        if not self.mounted:
            detail["fresh_tmp"] = "a new private directory per task (no tmpfs: no mount namespace)"

    def prepare(self) -> str:
        """A fresh /tmp for the next task; returns its path. Raises OSError when that failed."""
        if self.mounted:
            os.write(self.ask_w, b"T")
            if os.read(self.ack_r, 1) != b"K":
                raise OSError("the supervisor could not mount a fresh /tmp")
            self.current = "/tmp"
        else:
            self.count += 1
            self.current = os.path.join(self.base, f"task-{self.count}")
            os.mkdir(self.current, 0o700)
        return self.current

    def discard(self) -> None:
        if not self.mounted and self.current != self.base:
            import shutil

            def unlock(fn: Any, path: str, exc: Any) -> None:
                try:
                    os.chmod(os.path.dirname(path), 0o700)
                    os.chmod(path, 0o700)
                    fn(path)
                except OSError:
                    pass

            shutil.rmtree(self.current, onerror=unlock)

    def close_in_task(self) -> None:
        for fd in (self.ask_w, self.ack_r):
            try:
                os.close(fd)
            except OSError:
                pass


def _zygote(
    opts: dict[str, Any], layers: dict[str, bool], detail: dict[str, str], ctl: int, status_w: int, ctlpipes: tuple[int, int],
) -> None:
    import socket

    fresh = _FreshTmp(opts, layers, detail, ctlpipes)
    os.chdir("/")  # never inside a /tmp that is about to be replaced
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    threading.stack_size(2 << 20)  # 2 MiB thread stacks: threads count against RLIMIT_AS
    isolation.confine(opts, layers, detail)
    if not opts.get("isolate", True) or not opts.get("audit_hook", True):
        layers["audit_hook"] = False
    task_filter = None
    if opts.get("isolate", True):
        # the kernel layer, inherited by every task: installed after the uid drop, before any task
        layers["seccomp"], detail["seccomp"] = seccomp_filter.install()
        if layers["seccomp"]:
            try:
                task_filter = seccomp_filter.task_filter()
                detail["seccomp"] += "; each task adds a filter of its own (no new processes, no memfd)"
            except (OSError, RuntimeError, ValueError, TypeError, AttributeError) as exc:
                layers["seccomp"], detail["seccomp"] = False, f"building the task filter failed: {exc}"
    else:
        layers["seccomp"] = False
    in_pidns = os.getpid() == 1
    sock = socket.socket(fileno=ctl)
    global _TO_HOLLOW
    _TO_HOLLOW = _forbidden_loaded()
    framing.write_frame(status_w, {"op": "hello", "layers": layers, "detail": detail, "uid": os.getuid(), "pid": os.getpid()})
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        try:
            msg = framing.decode(data[4:])
        except framing.FrameError:
            msg = {"op": "?"}
        if msg.get("op") == "exit":
            os._exit(0)
        want = 2 + int(msg.get("cgroups") or 0) if msg.get("op") == "task" else -1
        if len(fds) != want:
            for fd in fds:
                os.close(fd)
            framing.write_frame(
                status_w, {"op": "error", "detail": f"unexpected request {str(msg.get('op'))[:50]!r} with {len(fds)} descriptors"}
            )
            continue
        try:
            tmp = fresh.prepare()
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            framing.write_frame(status_w, {"op": "task_end", "exit": None, "signal": None, "error": f"task start failed: {exc}"})
            continue
        if pid == 0:
            try:
                _task_main(opts, msg, tmp, fds, task_filter)
            except BaseException:  # noqa: BLE001 - on the engine's stderr in debug mode only
                if opts.get("debug"):
                    traceback.print_exc()
            finally:
                os._exit(BROKEN_EXIT)
        for fd in fds:  # the task's own: the zygote keeps none of them
            os.close(fd)
        framing.write_frame(status_w, {"op": "forked", "pid": pid, "pidns": in_pidns})
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        killed = _clean_up(pid, in_pidns)
        fresh.discard()
        framing.write_frame(
            status_w,
            {"op": "task_end", "exit": code if code >= 0 else None, "signal": -code if code < 0 else None, "leftovers": killed},
        )


def _clean_up(task_pid: int, in_pidns: bool) -> int:
    """Kill whatever the task left behind (all of the namespace but us) and reap it."""
    try:
        if in_pidns:
            os.kill(-1, signal.SIGKILL)
        else:
            os.killpg(task_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    reaped = 0
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.005)
        else:
            reaped += 1
    return reaped


# ---------------------------------------------------------------------------------------------
# Task process


def _task_main(opts: dict[str, Any], msg: dict[str, Any], tmp: str, fds: list[int], task_filter: Any) -> None:
    """A task process, from the zygote's fork to its end (never returns)."""
    cmd_r, resp_w, cgroup_fds = fds[0], fds[1], fds[2:]
    for fd in cgroup_fds:  # into the cgroup the engine made for this task, before anything else
        try:
            os.write(fd, b"0")
        except OSError:
            os._exit(CGROUP_EXIT)
        os.close(fd)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    devnull = os.open("/dev/null", os.O_RDWR)  # its own: no descriptor the zygote holds stays open
    for fd in (0, 1) if opts.get("debug") else (0, 1, 2):
        os.dup2(devnull, fd)
    keep = {0, 1, 2, cmd_r, resp_w}
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    for fd in range(3, top if 0 < top < 65536 else 65536):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    os.chdir(tmp)
    os.environ["HOME"] = os.environ["TMPDIR"] = tmp
    import tempfile

    tempfile.tempdir = None  # recomputed from TMPDIR
    cpu = int(msg.get("cpu_s") or opts.get("cpu_s", 30))
    isolate = opts.get("isolate", True)
    if isolate:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if task_filter is not None:
            task_filter.load()  # no new processes, no memfd, nothing that reaches another process
    isolation._libc = None
    channel = _Channel()
    _start_io(opts, tmp, cmd_r, resp_w, channel)  # nothing of the hook stays in this frame
    runner = _TaskRunner(opts)
    try:
        while True:  # environment code runs here, in the main thread
            channel.go.acquire()
            channel.box[1] = runner.handle(channel.box[0])
            channel.done.release()
    except BaseException:  # noqa: BLE001 - the channel was tampered with
        os._exit(BROKEN_EXIT)


def _start_io(opts: dict[str, Any], tmp: str, cmd_r: int, resp_w: int, channel: "_Channel") -> None:
    """Install the audit hook (when the task has one) and start the I/O thread. The hook, its
    fingerprint and heartbeat end up only in the I/O thread and the hook's own closure: no frame
    of the main thread (where environment code runs) refers to them once this returns."""
    import _thread

    if opts.get("isolate", True) and opts.get("audit_hook", True):
        readable = tuple(isolation._needed_paths(opts.get("keep_paths", [])))  # the interpreter's own files
        _hollow_forbidden_modules()
        fingerprint, beat = _install_hook(resp_w, tmp, readable)
    else:
        fingerprint, beat = None, [0]
    nonce = os.urandom(8).hex()  # the engine learns it from the ready frame, sent before environment code runs
    _thread.start_new_thread(
        _private(_io_loop), (channel, cmd_r, resp_w, fingerprint, beat, _private_encoder(), _private_decoder(), nonce)
    )


class _Channel:
    """Hands a command from the I/O thread to the main thread and the answer back."""

    def __init__(self) -> None:
        import _thread

        self.go = _thread.allocate_lock()
        self.done = _thread.allocate_lock()
        self.go.acquire()
        self.done.acquire()
        self.box: list[Any] = [None, None]


def _private(fn: Any) -> Any:
    """``fn`` with globals of its own: a private copy of the builtins and nothing else, so that
    patching this module, another module or the builtins later does not change what it runs
    (every other name it uses is an argument or one of its own locals)."""
    import builtins as _b

    return types.FunctionType(fn.__code__, {"__builtins__": dict(vars(_b))}, fn.__name__, fn.__defaults__, fn.__closure__)


def _private_encoder() -> Any:
    """A frame encoder made for this task only: its own C JSON encoder and header packer."""
    import struct
    from _json import encode_basestring_ascii, make_encoder

    def no_default(o: Any) -> Any:
        raise TypeError("not JSON serializable")

    return _private(_encode_with)(make_encoder(None, _private(no_default), encode_basestring_ascii, None, ":", ",", False, False, False),
                                  struct.Struct(">I").pack, framing.MAX_FRAME)


def _encode_with(c_encoder: Any, pack: Any, max_frame: int) -> Any:
    def encode(obj: Any) -> bytes:
        payload = "".join(c_encoder(obj, 0)).encode("ascii")
        if len(payload) > max_frame:
            raise ValueError(f"frame of {len(payload)} bytes exceeds {max_frame}")
        return pack(len(payload)) + payload

    return encode


def _private_decoder() -> Any:
    from json.decoder import JSONDecoder

    return JSONDecoder().scan_once


def _io_loop(
    channel: Any, cmd_r: int, resp_w: int, fingerprint: Any, beat: list[int], encode: Any, scan_once: Any, nonce: str
) -> None:
    """The task's I/O thread (run as a private clone, see :func:`_private`): reads each command,
    hands it to the main thread, copies the answer into exact builtin types and writes the reply
    with the audit hook's fingerprint and heartbeat. No environment code runs in this thread:
    nothing it calls is reachable from or replaceable by environment code. Every fingerprint
    starts with ``nonce``, a random string of this task that only this thread knows (and the
    engine, from the ready frame): a reply forged by writing to the pipe directly cannot carry it."""
    import posix
    import select as _select
    import sys as _sys

    read, write, exit_, audit, wait = posix.read, posix.write, posix._exit, _sys.audit, _select.select
    go, done, box = channel.go, channel.done, channel.box
    heartbeat, max_frame = "spade.heartbeat", 8 << 20

    def read_exact(n: int) -> bytes | None:
        chunks = []
        while n:
            try:
                data = read(cmd_r, n if n < (1 << 20) else (1 << 20))
            except BlockingIOError:  # the environment made our pipe non-blocking: wait instead
                wait([cmd_r], [], [])
                continue
            if not data:
                return None
            chunks.append(data)
            n -= len(data)
        return b"".join(chunks)

    def next_command() -> Any:
        head = read_exact(4)
        if head is None:
            return None
        n = int.from_bytes(head, "big")
        if n > max_frame:
            exit_(70)
        payload = read_exact(n)
        if payload is None:
            return None
        text = payload.decode("utf-8")
        obj, end = scan_once(text, 0)
        if end != len(text) or type(obj) is not dict:
            exit_(70)
        return obj

    def send(obj: Any) -> None:
        data = memoryview(encode(obj))
        while data:
            try:
                n = write(resp_w, data)
            except BlockingIOError:
                wait([], [resp_w], [])
                continue
            data = data[n:]

    def plain(x: Any, depth: int) -> Any:
        """``x`` copied into exact builtin types; anything else raises ValueError (no method of
        an object the environment made is ever called here)."""
        t = type(x)
        if x is None or t is bool or t is str or t is int:
            return x
        if t is float:
            return x if x - x == 0.0 else None
        if depth > 40:
            raise ValueError("nested too deeply")
        if t is list or t is tuple:
            return [plain(v, depth + 1) for v in x]
        if t is dict:
            out = {}
            for k, v in dict.items(x):
                if type(k) is not str:
                    raise ValueError("a key that is not a str")
                out[k] = plain(v, depth + 1)
            return out
        raise ValueError("a value of a type of its own")

    def guard(seq: Any) -> dict[str, Any]:
        n = seq if type(seq) is int else -1
        if fingerprint is None:
            return {"fp": nonce, "beat": n}
        audit(heartbeat, n)
        return {"fp": nonce + ":" + fingerprint(), "beat": beat[0]}

    def reply_for(seq: Any, answer: Any) -> dict[str, Any]:
        try:
            a = plain(answer, 0)
        except (ValueError, RecursionError) as exc:
            a = {"ok": False, "error": {"kind": "contract", "message": f"reply not sendable: {exc}", "traceback": ""}}
        if type(a) is not dict:
            a = {"ok": False, "error": {"kind": "contract", "message": "reply not sendable: not a dict", "traceback": ""}}
        frame = {"op": "reply", "seq": seq, "ok": a.get("ok") is True}
        if frame["ok"]:
            frame["data"] = a.get("data")
        else:
            frame["error"] = a.get("error")
        return frame

    try:
        send({"seq": 0, "op": "ready", "guard": guard(0)})
        while True:
            cmd = next_command()
            if cmd is None:
                exit_(0)
            seq = cmd.get("seq")
            box[0], box[1] = cmd, None
            go.release()
            done.acquire()
            frame = reply_for(seq, box[1])
            frame["guard"] = guard(seq)
            try:
                send(frame)
            except (ValueError, TypeError, OverflowError) as exc:
                err = {"kind": "contract", "message": f"reply not sendable: {str(exc)[:200]}", "traceback": ""}
                send({"op": "reply", "seq": seq, "ok": False, "error": err, "guard": guard(seq)})
            if cmd.get("op") == "end":
                exit_(0)
    except MemoryError:
        exit_(87)
    except BaseException:  # noqa: BLE001 - a broken pipe or a tampered channel: the task ends
        exit_(70)


def _forbidden_loaded() -> list[str]:
    """The loaded modules :func:`_hollow_forbidden_modules` empties (the zygote finds them once:
    every task starts with the zygote's modules)."""
    return [n for n in sys.modules if n not in _NOT_HOLLOWED and any(p in FORBIDDEN_MODULES for p in n.split("."))]


_TO_HOLLOW: list[str] | None = None


def _hollow_forbidden_modules() -> None:
    """Forget process/socket/ctypes modules and empty the loaded ones, so that importing them
    again goes through the audit hook and old references to them are useless."""
    for name in _TO_HOLLOW if _TO_HOLLOW is not None else _forbidden_loaded():
        if name in sys.modules:
            mod = sys.modules.pop(name)
            try:
                keep = {"__name__": getattr(mod, "__name__", name)}
                mod.__dict__.clear()
                mod.__dict__.update(keep)
            except Exception:  # noqa: BLE001 - best effort on exotic modules
                pass


def _install_hook(resp_w: int, tmp: str, readable: tuple[str, ...]) -> tuple[Any, list[int]]:
    """Install the audit hook and the extension-loading audit; returns ``(fingerprint,
    heartbeat box)``. Everything is built privately (see :func:`_private`)."""
    import _imp
    import posix

    loading = [False]  # true while a C extension module is being created (see _loader)
    gen = _private(_loader)(_imp.create_dynamic, _imp.create_builtin, sys.audit, types.SimpleNamespace, loading)
    next(gen)
    encode = _private_encoder()
    tables = (
        frozenset(_FORBIDDEN_EVENTS), tuple(_FORBIDDEN_PREFIXES), frozenset(FORBIDDEN_MODULES), dict(_WRITE_EVENTS),
        dict(_READ_EVENTS), tuple(_DENY_READ), int(_WRITE_FLAGS), hookguard.HEARTBEAT_EVENT, int(limits.MAX_EVENT_CHARS),
        frozenset(_FRAME_ATTRS),
    )
    hook, beat = _private(_hook_factory)(
        posix.write, posix._exit, encode, resp_w, tmp, readable, tables, (posix.lstat, posix.readlink, posix.getcwd, posix.getpid),
        gen, loading,
    )
    sys.addaudithook(hook)
    fingerprint = _private(hookguard.make_fingerprint)(hook, types.FunctionType, types.CodeType, {})[0]
    _imp.create_dynamic = _private(_create_dynamic)(gen)
    _imp.create_builtin = _private(_create_builtin)(gen)
    return fingerprint, beat


def _loader(create_dynamic: Any, create_builtin: Any, audit: Any, namespace: Any, loading: list[bool]) -> Any:
    """A generator holding the real ``_imp.create_dynamic``/``create_builtin``: each request is
    audited (``spade.load_extension``, which the hook refuses for forbidden names) before it is
    served. The originals live only in this generator's frame, and reading a generator's frame
    (``gi_frame``) is an audit event the hook refuses for this one; while a module is being
    created (when its initialisation may import, and so run code) no frame can be obtained at
    all (``loading``)."""
    request = yield None
    while True:
        try:
            kind, name, origin, file = request
            if type(name) is not str or type(origin) is not str:
                raise ImportError("extension module name and origin must be str")
            audit("spade.load_extension", name, origin)
            spec = namespace(name=name, origin=origin)
            loading[0] = True
            try:
                if kind == "builtin":
                    out = create_builtin(spec)
                elif file is None:
                    out = create_dynamic(spec)
                else:
                    out = create_dynamic(spec, file)
            finally:
                loading[0] = False
            request = yield (True, out)
        except BaseException as exc:  # noqa: BLE001 - handed back to the importer
            request = yield (False, exc)


def _create_dynamic(gen: Any) -> Any:
    def create_dynamic(spec: Any, file: Any = None) -> Any:
        ok, out = gen.send(("dynamic", spec.name, spec.origin, file))
        if not ok:
            raise out
        return out

    return create_dynamic


def _create_builtin(gen: Any) -> Any:
    def create_builtin(spec: Any) -> Any:
        ok, out = gen.send(("builtin", spec.name, "", None))
        if not ok:
            raise out
        return out

    return create_builtin


def _hook_factory(
    write: Any, exit_: Any, encode: Any, resp_w: int, tmp: str, readable: tuple[str, ...], tables: tuple[Any, ...],
    posix_fns: tuple[Any, ...], gen: Any, loading: list[bool],
) -> tuple[Any, list[int]]:
    """The audit hook and the list its heartbeat is stored in (see hookguard.py). Run as a
    private clone: every name it uses is an argument or a local. It never calls a method of an
    object an environment made (arguments are looked at only when they are exact str, bytes or
    int), so no environment code runs inside it."""
    forbidden_events, prefixes, modules, write_events, read_events, deny_read, write_flags, heartbeat, max_event, frame_attrs = tables
    lstat, readlink, getcwd, getpid = posix_fns
    beat = [0]
    allowed_write = (tmp, "/dev/null")

    def clean(s: str) -> str:
        return s.encode("utf-8", "replace").decode("utf-8")

    def die(event: str, detail: str) -> None:
        try:
            write(resp_w, encode({"op": "forbidden", "event": clean(event[:max_event]), "detail": clean(detail[:300])}))
        finally:
            exit_(86)

    def realpath(path: str) -> str:
        done, links = "", 0
        todo = path.split("/")
        todo.reverse()
        while todo:
            name = todo.pop()
            if name == "" or name == ".":
                continue
            if name == "..":
                done = done.rpartition("/")[0]
                continue
            cand = done + "/" + name
            try:
                mode = lstat(cand).st_mode
            except OSError:
                done = cand
                continue
            if mode & 0o170000 != 0o120000:
                done = cand
                continue
            links += 1
            if links > 40:
                return "?"
            target = readlink(cand)
            if target.startswith("/"):
                done = ""
            parts = target.split("/")
            parts.reverse()
            todo.extend(parts)
        return done or "/"

    def resolve(path: Any) -> str | None:
        t = type(path)
        if t is str:
            p = path
        elif t is bytes:
            p = path.decode("utf-8", "surrogateescape")
        else:  # a descriptor, None, or an object of its own (not looked into: its code would run here)
            return None
        try:
            return realpath(p if p.startswith("/") else getcwd() + "/" + p)
        except Exception:  # noqa: BLE001 - a NUL byte, a loop...
            return "?"

    def check_write(event: str, path: Any) -> None:
        p = resolve(path)
        if p is None:
            return
        if not any(p == a or p.startswith(a + "/") for a in allowed_write):
            die(event, f"write to {p} (outside {tmp})")

    def check_read(event: str, path: Any) -> None:
        p = resolve(path)
        if p is None:
            return
        if any(p == d or p.startswith(d + "/") for d in deny_read) and not any(
            p == r or p.startswith(r + "/") for r in readable
        ):
            die(event, f"read of {p}")
        if p.startswith("/proc/"):
            part = p[6:].partition("/")[0]
            if part.isdigit() and int(part) != getpid():
                die(event, f"read of {p}")

    def forbidden_name(name: str) -> bool:
        return any(part in modules for part in name.split("."))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "object.__getattr__":  # frames and code read (tracebacks, the fingerprint): allowed, and frequent
            if len(args) > 1 and (args[0] is gen or (loading[0] and type(args[1]) is str and args[1] in frame_attrs)):
                die(event, "a frame of the extension loader")
            return
        if event == heartbeat:
            beat[0] = args[0] if args and type(args[0]) is int else -1
        elif event in forbidden_events or event.startswith(prefixes):
            die(event, "")
        elif event == "sys._getframe":
            if loading[0]:
                die(event, "a frame while an extension module is created")
        elif event == "object.__setattr__":
            if len(args) > 1 and type(args[1]) is str and args[1] == "__code__":  # replacing a function's code
                die(event, "set __code__")
        elif event == "import":
            name = args[0] if args else None
            if type(name) is not str:
                die(event, "import of a name that is not a str")
            elif forbidden_name(name):
                die(event, f"import {name}")
        elif event == "spade.load_extension":
            name, origin = (tuple(args) + ("", ""))[:2]
            if type(name) is not str or type(origin) is not str:
                die(event, "extension module")
            elif forbidden_name(name) or origin.rpartition("/")[2].partition(".")[0] in modules:
                die(event, f"extension module {name}")
        elif event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (type(mode) is str and any(c in mode for c in "wax+")) or (
                type(flags) is int and flags & write_flags
            )
            if writing:
                check_write(event, path)
            else:
                check_read(event, path)
        elif event in write_events:
            for i in write_events[event]:
                if i < len(args):
                    check_write(event, args[i])
        elif event in read_events:
            for i in read_events[event]:
                if i < len(args):
                    check_read(event, args[i])

    return hook, beat


class _Contract(Exception):
    """The environment returned something outside the contract."""


def _error(seq: Any, kind: str, message: str, trace: str = "") -> dict[str, Any]:
    return {
        "op": "reply", "seq": seq, "ok": False,
        "error": {"kind": kind, "message": message[: limits.MAX_ERROR_CHARS], "traceback": trace[-limits.MAX_TRACEBACK_CHARS :]},
    }


def _tname(x: Any) -> str:
    try:
        return type(x).__name__[:80]
    except Exception:  # noqa: BLE001
        return "?"


def _describe(exc: BaseException) -> tuple[str, str]:
    """An exception's message and traceback as valid text (a lone surrogate replaced)."""
    try:
        text = _clean_text(str(exc)[:500])
    except Exception:  # noqa: BLE001
        text = "<unprintable>"
    try:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        trace = _clean_text("".join(lines[-12:]))
    except Exception:  # noqa: BLE001
        trace = ""
    return f"{_tname(exc)}: {text}" if text else _tname(exc), trace


class _TaskRunner:
    """Executes one task's commands. Values sent back are wrapped: ``{"v": value}`` when they
    could be encoded, ``{"bad": "why"}`` when not; the engine decides what is acceptable."""

    def __init__(self, opts: dict[str, Any]) -> None:
        self.max_obs = limits.MAX_OBS_CHARS
        self.max_action = limits.MAX_ACTION_CHARS
        self.module: types.ModuleType | None = None
        self.cls: Any = None
        self.contract = "spade"
        self.envs: dict[int, Any] = {}
        self.next_id = 1
        self.designed_max_turns: int | None = None

    def handle(self, cmd: dict[str, Any]) -> dict[str, Any]:
        seq, op = cmd.get("seq"), cmd.get("op")
        fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            return _error(seq, "sandbox", f"unknown op {str(op)[:40]!r}")
        try:
            out = fn(cmd)
        except _Contract as exc:
            return _error(seq, "contract", str(exc))
        except MemoryError:
            return _error(seq, "memory", f"MemoryError in {op}")
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
            message, trace = _describe(exc)
            return _error(seq, "crash", f"{op}: {message}", trace)
        return {"op": "reply", "seq": seq, "ok": True, "data": out}

    # -- source ----------------------------------------------------------------------------

    def op_parse(self, cmd: dict[str, Any]) -> dict[str, Any]:
        source = cmd.get("source")
        if not isinstance(source, str):
            raise _Contract("source must be a string")
        if len(source) > MAX_SOURCE_CHARS:
            return {"syntax_error": {"msg": f"source has {len(source)} characters (limit {MAX_SOURCE_CHARS})", "lineno": None}}
        try:
            tree = ast.parse(source, "<environment>")
        except SyntaxError as exc:
            return {"syntax_error": {"msg": str(exc.msg)[:500], "lineno": exc.lineno, "offset": exc.offset, "text": (exc.text or "")[:200]}}
        except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
            return {"syntax_error": {"msg": f"{_tname(exc)}: {str(exc)[:200]}", "lineno": None}}
        classes = []
        name_max = limits.MAX_NAME_CHARS
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and len(classes) < limits.MAX_CLASSES:
                methods = [n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                classes.append(
                    {
                        "name": node.name[:name_max],
                        "lineno": node.lineno,
                        "bases": [ast.unparse(b)[:name_max] for b in node.bases[: limits.MAX_BASES]],
                        "methods": [m[:name_max] for m in methods[: limits.MAX_METHODS]],
                    }
                )
        return {"syntax_error": None, "classes": classes, "forbidden": _static_screen(tree), "hidden_draws": _hidden_draws(tree)}

    def op_load(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = str(cmd.get("class_name") or "")
        module = types.ModuleType("spade_env")
        module.__file__ = "<environment>"
        module.__dict__.update(COMMON_NAMES)
        module.__dict__["__builtins__"] = {**_BUILTINS, "__import__": _tolerant_import}
        sys.modules["spade_env"] = module
        source = str(cmd.get("source", ""))
        linecache.cache["<environment>"] = (len(source), None, source.splitlines(True), "<environment>")
        code = compile(source, "<environment>", "exec")
        exec(code, module.__dict__)  # noqa: S102 - this process exists to run it
        cls = module.__dict__.get(name)
        if not isinstance(cls, type):
            raise _Contract(f"{name!r} is not a class after import (got {_tname(cls)})")
        missing = [m for m in ("reset", "step") if not callable(getattr(cls, m, None))]
        if missing:
            raise _Contract(f"{name} has no {' or '.join(missing)}() method")
        self.module, self.cls = module, cls
        self.contract = adapters.contract_of(cls)
        return {"class_name": name[: limits.MAX_NAME_CHARS], "contract": self.contract, "has_solution": callable(getattr(cls, "solution", None))}

    def _instance(self, max_turns: Any = None) -> Any:
        """A new instance, adapted; with a turn budget its own ``max_turns`` is capped at it."""
        if self.cls is None:
            raise _Contract("no environment loaded")
        budget = max_turns if type(max_turns) is int and max_turns > 0 else None
        try:
            raw = self.cls()
        except TypeError as first:
            if budget is None:
                raise
            try:
                raw = self.cls(max_turns=budget)  # a class that requires max_turns gets the budget
            except TypeError:
                raise first from None
        self.designed_max_turns = _cap_turns(raw, budget)
        try:
            return adapters.adapt(raw, max_obs_chars=self.max_obs, max_action_chars=self.max_action)
        except TypeError as exc:
            raise _Contract(str(exc)) from None

    def op_new(self, cmd: dict[str, Any]) -> dict[str, Any]:
        env = self._instance(cmd.get("max_turns"))
        iid = self.next_id
        self.next_id += 1
        self.envs[iid] = env
        def small(n: int | None) -> int | None:  # the reply schema's bounds: an absurd value reads as unknown
            return n if n is not None and 0 <= n <= 2**31 else None

        designed = self.designed_max_turns
        return {
            "iid": iid, "designed_max_turns": small(designed) or None, "max_turns": small(_turns_of(env)),
            "spaces": _spaces_of(env) if self.contract == "gymnasium" else None,
        }

    def _env(self, cmd: dict[str, Any]) -> Any:
        env = self.envs.get(cmd.get("iid"))  # type: ignore[arg-type]
        if env is None:
            raise _Contract(f"no environment instance {cmd.get('iid')!r}")
        return env

    # -- the episode -----------------------------------------------------------------------

    def op_reset(self, cmd: dict[str, Any]) -> dict[str, Any]:
        env = self._env(cmd)
        seed = cmd.get("seed")
        out = env.reset(seed=seed if isinstance(seed, int) else None)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise _Contract(f"reset() must return (observation, info), got {_shape(out)}")
        return {"obs": self._text(out[0]), "info": _wire_info(out[1])}

    def op_step(self, cmd: dict[str, Any]) -> dict[str, Any]:
        env = self._env(cmd)
        out = env.step(str(cmd.get("action", "")))
        if not isinstance(out, (tuple, list)) or len(out) != 5:
            raise _Contract(f"step() must return (observation, reward, terminated, truncated, info), got {_shape(out)}")
        obs, reward, terminated, truncated, info = out
        return {
            "obs": self._text(obs),
            "reward": _wire_reward(reward),
            "terminated": _wire_flag(terminated),
            "truncated": _wire_flag(truncated),
            "info": _wire_info(info),
        }

    def op_solution(self, cmd: dict[str, Any]) -> dict[str, Any]:
        env = self._env(cmd)
        fn = getattr(env, "solution", None)
        if isinstance(env, adapters.SpadeEnvAdapter):
            fn = getattr(env.env, "solution", None)
        if not callable(fn):
            return {"kind": "none"}
        sol = fn()
        if isinstance(sol, str):
            text = _clean_text("".join([sol])[: self.max_obs])
            boxed = adapters.boxed_actions(text)[:MAX_SOLUTION_ACTIONS]
            if any(len(a) > self.max_action for a in boxed):
                return {"kind": "bad", "bad": f"solution() text holds an action over {self.max_action} characters"}
            return {"kind": "text", "text": text, "actions": boxed or None}
        if isinstance(sol, (list, tuple)):
            items = list(sol)[: MAX_SOLUTION_ACTIONS + 1]
            if len(items) > MAX_SOLUTION_ACTIONS:
                return {"kind": "bad", "bad": f"solution() returned more than {MAX_SOLUTION_ACTIONS} actions"}
            if all(isinstance(a, str) and len(a) <= self.max_action for a in items):
                actions = ["".join([a]) for a in items]
                if any(a != _clean_text(a) for a in actions):
                    return {"kind": "bad", "bad": "solution() actions are not valid Unicode text"}
                return {"kind": "actions", "actions": actions}
            return {"kind": "bad", "bad": "solution() must return a list of action strings or a text"}
        return {"kind": "bad", "bad": f"solution() returned {_tname(sol)}"}

    def op_close(self, cmd: dict[str, Any]) -> dict[str, Any]:
        env = self.envs.pop(cmd.get("iid"), None)  # type: ignore[arg-type]
        close = getattr(env, "close", None)
        if callable(close):
            close()
        return {}

    def op_end(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return {}

    def op_ping(self, cmd: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _text(self, x: Any) -> dict[str, Any]:
        if not isinstance(x, str):
            return {"bad": f"observation must be str, got {_tname(x)}"}
        s = "".join([x])
        if len(s) > self.max_obs:
            return {"bad": f"observation has {len(s)} characters (limit {self.max_obs})"}
        if s != _clean_text(s):
            return {"bad": "observation is not valid Unicode text (unpaired surrogates)"}
        return {"v": s}


def _clean_text(s: str) -> str:
    """``s`` with unpaired surrogates replaced (they cannot be UTF-8 on the engine's side)."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def _cap_turns(raw: Any, budget: int | None) -> int | None:
    """The release's respect_game_max_turns: an environment's own ``max_turns`` (a positive int)
    becomes min(its own, budget); one holding something else gets the budget. Returns the
    designed value when it was an int."""
    if budget is None:
        return None
    designed = getattr(raw, "max_turns", None)
    if type(designed) is int and designed > 0:
        raw.max_turns = min(designed, budget)
        return designed
    if hasattr(raw, "max_turns"):
        raw.max_turns = budget
    return None


def _spaces_of(env: Any) -> dict[str, Any]:
    """A gymnasium environment's declared Text spaces as data (the engine rebuilds them and runs
    gymnasium's checker on its side): max and min length, and the charset when it is small."""
    out = {}
    for name in ("observation_space", "action_space"):
        space = getattr(env, name, None)
        charset = getattr(space, "characters", None)
        chars = "".join(sorted(c for c in charset if type(c) is str)) if isinstance(charset, (frozenset, set, str)) else None
        small = chars if chars is not None and len(chars) <= limits.MAX_CHARSET_CHARS else None
        out[name] = {
            "max_length": int(getattr(space, "max_length", 0) or 0), "min_length": int(getattr(space, "min_length", 0) or 0),
            "charset": _clean_text(small) if small is not None else None,
        }
    return out


def _turns_of(env: Any) -> int | None:
    raw = env.env if isinstance(env, adapters.SpadeEnvAdapter) else env
    value = getattr(raw, "max_turns", None)
    return value if type(value) is int else None


def _shape(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return f"{_tname(x)} of length {len(x)}"
    return _tname(x)


def _wire_reward(x: Any) -> dict[str, Any]:
    if isinstance(x, bool) or isinstance(x, numpy.bool_):
        return {"bad": "reward must be a number, got bool"}
    if type(x) in (int, float) or isinstance(x, (numpy.integer, numpy.floating)):
        try:
            f = float(x)
        except (OverflowError, ValueError, TypeError):
            return {"bad": "reward is not representable as a float"}
        if not isfinite(f):
            return {"bad": f"reward is not finite: {f}"}
        return {"v": f}
    return {"bad": f"reward must be a number, got {_tname(x)}"}


def _wire_flag(x: Any) -> dict[str, Any]:
    if type(x) is bool:
        return {"v": x}
    if type(x) is numpy.bool_:
        return {"v": bool(x)}
    return {"bad": f"must be bool, got {_tname(x)}"}


def _wire_info(x: Any) -> dict[str, Any]:
    if not isinstance(x, dict):
        return {"bad": f"info must be a dict, got {_tname(x)}"}
    budget = [MAX_INFO_ITEMS]
    return {"v": _json_safe(x, 0, budget)}


def _json_safe(x: Any, depth: int, budget: list[int]) -> Any:
    """Exact builtin types only (no user code runs); anything else becomes '<TypeName>'. At most
    ``MAX_INFO_ITEMS`` values in all (containers stop taking items when the budget is spent)."""
    budget[0] -= 1
    t = type(x)
    if x is None or t is bool:
        return x
    if t is int:
        return x if -(2**53) <= x <= 2**53 else float(x) if abs(x) < 1e300 else "<int>"
    if t is float:
        return x if isfinite(x) else str(x)
    if t is str:
        return _clean_text(x[: limits.MAX_INFO_STR])
    if isinstance(x, (numpy.integer, numpy.floating, numpy.bool_)):
        budget[0] += 1
        return _json_safe(x.item(), depth, budget)
    if depth >= limits.MAX_INFO_DEPTH:
        return f"<{_tname(x)}>"
    if t in (list, tuple):
        items = []
        for v in list(x)[: limits.MAX_INFO_LIST]:
            if budget[0] <= 0:
                break
            items.append(_json_safe(v, depth + 1, budget))
        return items
    if t is dict:
        out = {}
        for k, v in list(dict.items(x))[: limits.MAX_INFO_LIST]:
            if budget[0] <= 0:
                break
            if type(k) in (str, int, float, bool):
                out[_clean_text(str(k)[: limits.MAX_INFO_KEY])] = _json_safe(v, depth + 1, budget)
        return out
    return f"<{_tname(x)}>"


#: calls that make a number no player can work out from what a puzzle shows: a generator seeded
#: with values of its own, hashes and checksums
_HIDDEN_CALLS = frozenset({"Random", "seed", "default_rng", "RandomState", "hash", "crc32", "adler32"})
_HIDDEN_MODULES = frozenset({"hashlib", "zlib", "binascii", "secrets", "uuid"})
_SCAFFOLD_BASE = "TextGame"  # the engine's base class (textgame.py), inlined before a scaffolded game


def _hidden_draws(tree: ast.AST) -> list[dict[str, Any]]:
    """Calls inside a class that would let an answer be a hidden pseudo-random function of the
    values a question shows (``random.Random(a * b)``, ``hash((a, b))``, ``hashlib.md5(...)``...):
    the validator refuses them in a puzzle, whose setup(rng) may draw only from ``rng``."""
    found: list[dict[str, Any]] = []
    own = [c for c in getattr(tree, "body", []) if isinstance(c, ast.ClassDef) and c.name != _SCAFFOLD_BASE]
    for cls in own:  # the environment's own classes (not the engine's TextGame, when it is inlined)
        for node in ast.walk(cls):
            if not isinstance(node, ast.Call):
                continue
            f, what = node.func, None
            if isinstance(f, ast.Name) and f.id in _HIDDEN_CALLS:
                what = f"{f.id}(...)"
            elif isinstance(f, ast.Attribute):
                base = f.value
                root = base
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in _HIDDEN_MODULES:
                    what = f"{root.id}.{f.attr}(...)"
                elif f.attr in _HIDDEN_CALLS:
                    what = f"{ast.unparse(base)[:60]}.{f.attr}(...)"
            if what:
                found.append({"lineno": getattr(node, "lineno", None), "what": what})
    return found[: limits.MAX_FINDINGS]


def _forbidden_name(name: str) -> bool:
    """Is any part of a dotted module name forbidden (``x._posixsubprocess`` as well)?"""
    return any(part in FORBIDDEN_MODULES for part in name.split("."))


def _static_screen(tree: ast.AST) -> list[dict[str, Any]]:
    """Obviously forbidden constructs, found without running anything."""
    found: list[dict[str, Any]] = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if _forbidden_name(a.name)]
            what = f"import {', '.join(bad)}" if bad else None
        elif isinstance(node, ast.ImportFrom):
            if node.module and _forbidden_name(node.module):
                what = f"from {node.module} import ..."
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in _STATIC_OS_CALLS:
                what = f"os.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                if _forbidden_name(node.args[0].value):
                    what = f"__import__({node.args[0].value!r})"
        if what:
            found.append({"lineno": getattr(node, "lineno", None), "what": what})
    return found[:20]


if __name__ == "__main__":
    main(sys.argv)
