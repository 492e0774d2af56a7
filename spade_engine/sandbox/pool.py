"""SandboxPool: pre-forked, isolated, reused worker processes, and the task channel to them.

A pool starts ``config.workers`` worker processes (see ``worker.py``), each isolated once, and
hands them out one task at a time: a validation or an episode session is one *task*, executed in
a process forked from the worker's clean zygote, with a fresh empty /tmp, pipes of its own (made
here for that task and handed to the worker over its control socket: nothing a task does to its
pipes, such as non-blocking mode, signal ownership or their size, reaches another task) and,
where the kernel allows, a cgroup of its own (``cgroups.py``). Results come back as
length-framed JSON that is decoded here against a strict schema per reply (``replies.py``), never
unpickled. Any anomaly (timeout, death, garbage, extra frames or frames that do not fit, a
forbidden operation, a tampered audit hook) kills the worker's whole process group and PID
namespace and the worker is replaced; a worker is also replaced after a task in which the
environment raised or broke the contract, and after ``max_tasks_per_worker`` tasks. Each pool
runs its workers as uids no other live pool holds (``uids.py``).

The pool is thread-safe: many engine threads may hold sessions at once (at most one per worker;
``open_session`` waits for a free worker up to ``acquire_timeout_s``).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import Any, NoReturn

from ..config import SandboxConfig
from . import framing, replies
from .cgroups import TaskCgroup, TaskCgroups
from .errors import EnvError, ErrorKind, IsolationError, PoolExhausted, SandboxCrash, SandboxError, StepTimeout
from .isolation import SandboxLayers, scrubbed_environ
from .session import Session
from .uids import UidLease, lease_uids

__all__ = ["SandboxPool", "Task"]

log = logging.getLogger("spade_engine.sandbox")

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
FORBIDDEN_EXIT, MEMORY_EXIT, CGROUP_EXIT = 86, 87, 88
_START_TIMEOUT_S = 120.0  # worker start (imports gymnasium) on a loaded machine
_TASK_START_TIMEOUT_S = 20.0
_TASK_END_TIMEOUT_S = 5.0
_TASK_ERROR_KINDS = frozenset({ErrorKind.CRASH.value, ErrorKind.MEMORY.value, ErrorKind.CONTRACT.value})
_live_pools: "weakref.WeakSet[SandboxPool]" = weakref.WeakSet()


def _close_all_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


atexit.register(_close_all_pools)


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(x) for x in text.split()]
    except (OSError, ValueError):
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if int(d.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d.name))
                except (OSError, ValueError, IndexError):
                    pass
        return out


#: over a worker's traceback (environment text) in linear time: a literal start, bounded runs, and
#: once the indent is matched the source line always matches (it may take the indent's blanks)
_ENV_FRAME = re.compile(r'File "<environment>", line (\d+), in (\w{1,80})\n {2,}([^\n]{1,400})')


def where_in_environment(trace: str) -> str:
    """`` (line N in fn: source)`` for the innermost frame of the environment's own code in a
    worker's traceback (model text, clipped), or "": what a repair quotes so the designer sees
    the exact line that failed."""
    frames = _ENV_FRAME.findall(trace or "")
    if not frames:
        return ""
    line, fn, src = frames[-1]
    src = src.strip()
    return f" (line {line} in {fn}: {src[:160]}{'...' if len(src) > 160 else ''})"


def no_seccomp_message(detail: str) -> str:
    """Why an isolated pool refuses to start without its seccomp filter, and what to do."""
    return (
        f"the sandbox's kernel filter (seccomp) could not be installed ({detail or 'unknown reason'}); "
        "refusing to run model-written code without it. Install a libseccomp binding for this Python: "
        "Debian/Ubuntu `apt-get install libseccomp2 python3-seccomp` (for the system Python) or "
        "`pip install pyseccomp` (needs libseccomp.so.2 from libseccomp2). To run anyway, with the audit hook "
        "and the other OS layers only, set sandbox.allow_without_seccomp = true "
        "(or SPADE_SANDBOX__ALLOW_WITHOUT_SECCOMP=1)"
    )


def under_tmp_message(paths: str) -> str:
    """Why an isolated pool refuses to start from a checkout or Python installation in /tmp."""
    return (
        f"the sandbox needs {paths}, which lies under /tmp: every sandbox task gets a fresh, empty /tmp "
        "(a private tmpfs), which would hide the Python installation or the sandbox modules from the "
        "environments. Move the checkout or virtual environment out of /tmp (e.g. to your home directory or /opt)"
    )


class _Worker:
    """One worker process: its pipes, its frame buffers, its state."""

    def __init__(self, pool: "SandboxPool", slot: int) -> None:
        self.pool = pool
        self.slot = slot
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: replies.Hello | None = None
        self.tasks = 0
        self.task_pid: int | None = None
        self.task_pidns = True
        self._kill_lock = threading.Lock()
        self.ctl: socket.socket | None = None  # the control socket (SOCK_SEQPACKET) to the zygote
        self.cmd_w = self.resp_r = self.status_r = -1  # the current task's pipes, and the zygote's status pipe
        self.resp_buf = framing.FrameBuffer(raw=True)
        self.status_buf = framing.FrameBuffer(raw=True)
        self.resp_q: deque[bytes] = deque()
        self.status_q: deque[bytes] = deque()
        self.resp_closed = False  # the current task closed its result pipe

    # -- life cycle -----------------------------------------------------------------------

    def spawn(self) -> None:
        cfg = self.pool.config
        uid = self.pool.uids[self.slot]
        ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        status_r, status_w = os.pipe()
        child_fd = ctl_child.detach()
        opts = {
            "fds": [child_fd, status_w],
            "isolate": self.pool.isolate,
            "audit_hook": self.pool.audit_hook,
            "uid": uid,
            "memory_mb": cfg.memory_mb,
            "cpu_s": cfg.cpu_s,
            "file_size_mb": cfg.file_size_mb,
            "open_files": cfg.open_files,
            "max_processes": cfg.max_processes,
            "tmp_size_mb": cfg.tmp_size_mb,
            "keep_paths": [str(WORKER_SCRIPT.parent)],
            "preload": list(cfg.preload_modules),
            # a test switch: the worker behaves as if no libseccomp binding were installed
            "seccomp_binding": not os.environ.get("SPADE_SANDBOX_NO_SECCOMP_BINDING"),
            # SPADE_SANDBOX_DEBUG: tasks keep the worker's stderr (the engine's), for tracebacks
            "debug": bool(os.environ.get("SPADE_SANDBOX_DEBUG")),
        }
        import json

        try:
            self.proc = subprocess.Popen(
                [self.pool.python, "-s", "-B", str(WORKER_SCRIPT), json.dumps(opts)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL if not os.environ.get("SPADE_SANDBOX_DEBUG") else None,
                pass_fds=(child_fd, status_w),
                env=scrubbed_environ("/tmp"),
                cwd="/",
                start_new_session=True,
            )
        except BaseException:
            ctl.close()
            os.close(status_r)
            raise
        finally:
            for fd in (child_fd, status_w):
                os.close(fd)
        self.ctl, self.status_r = ctl, status_r
        self.cmd_w = self.resp_r = -1
        self.hello = None
        self.tasks = 0
        self.task_pid = None
        self.resp_buf, self.status_buf = framing.FrameBuffer(raw=True), framing.FrameBuffer(raw=True)
        self.resp_q.clear()
        self.status_q.clear()

    def wait_hello(self, timeout: float = _START_TIMEOUT_S) -> replies.Hello:
        if self.hello is not None:
            return self.hello
        if self.proc is None:
            self.spawn()
        deadline = time.monotonic() + timeout
        while True:
            try:
                src, payload = self.next_frame(deadline, allow_resp=False)
                frame = replies.decode_status_frame(payload) if src == "status" else None
            except (framing.FrameError, replies.ReplyError) as exc:
                self.kill()
                raise SandboxError(f"sandbox worker {self.slot} sent garbage during start-up ({exc})") from None
            if src == "timeout":
                self.kill()
                raise SandboxError(f"sandbox worker {self.slot} did not start within {timeout:.0f}s")
            if src == "eof":
                code = self.proc.poll() if self.proc else None
                self.kill()
                raise SandboxError(f"sandbox worker {self.slot} exited during start-up (code {code})")
            if isinstance(frame, replies.Hello):
                self.hello = frame
                return frame

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """Kill the worker and everything it started, and forget it.

        Closing the command pipe makes the supervisor SIGKILL the zygote (PID 1 of the task
        namespace, so every process in it dies), reap it and exit; if it does not within a few
        seconds, its children and then its whole process group are SIGKILLed from here."""
        with self._kill_lock:
            self._kill()

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if self.ctl is not None:  # the supervisor sees the socket close and kills the zygote
            try:
                self.ctl.close()
            except OSError:
                pass
            self.ctl = None
        self.end_task()
        if proc is not None:
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                for child in _children(proc.pid):
                    try:
                        os.kill(child, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - a D-state process
                    log.error("sandbox worker %s (pid %s) did not die", self.slot, proc.pid)
            if self.task_pid and not self.task_pidns:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(self.task_pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        for name in ("cmd_w", "resp_r", "status_r"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)
        self.hello = None
        self.task_pid = None

    # -- a task's own pipes -------------------------------------------------------------------

    def begin_task(self, request: dict[str, Any], extra_fds: list[int]) -> None:
        """Make the next task's pipes and send ``request`` to the zygote with them (and
        ``extra_fds``, the task's cgroup files) attached; raises OSError when the worker does not
        take it."""
        self.end_task()
        if self.ctl is None:
            raise BrokenPipeError("no control socket")
        cmd_r, cmd_w = os.pipe()
        resp_r, resp_w = os.pipe()
        try:
            self.ctl.settimeout(_TASK_START_TIMEOUT_S)
            socket.send_fds(self.ctl, [framing.encode(request)], [cmd_r, resp_w, *extra_fds])
        except BaseException:
            for fd in (cmd_w, resp_r):
                os.close(fd)
            raise
        finally:
            os.close(cmd_r)
            os.close(resp_w)
        os.set_blocking(cmd_w, False)
        self.cmd_w, self.resp_r = cmd_w, resp_r
        self.resp_buf = framing.FrameBuffer(raw=True)
        self.resp_q.clear()
        self.resp_closed = False

    def end_task(self) -> None:
        """Close the current task's pipes (the next task gets new ones)."""
        for name in ("cmd_w", "resp_r"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)
        self.resp_buf = framing.FrameBuffer(raw=True)
        self.resp_q.clear()

    # -- frames ---------------------------------------------------------------------------

    def send(self, obj: dict[str, Any], deadline: float) -> bool:
        """Write one frame before ``deadline``; False on timeout (the worker is not reading)."""
        data = memoryview(framing.encode(obj))
        poller = select.poll()
        poller.register(self.cmd_w, select.POLLOUT)
        while data:
            try:
                n = os.write(self.cmd_w, data)
                data = data[n:]
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, OSError):
                raise SandboxCrash(f"sandbox worker {self.slot} closed its command pipe") from None
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poller.poll(max(1, int(left * 1000)))
        return True

    def next_frame(self, deadline: float, *, allow_resp: bool = True) -> tuple[str, bytes]:
        """The next frame's payload from the task ("resp") or the zygote ("status"); ("timeout",
        b"") or ("eof", b"") otherwise. ``deadline`` is absolute: nothing that arrives moves it.
        Raises framing.FrameError on bad framing."""
        poller = select.poll()
        fds = [self.status_r] + ([self.resp_r] if allow_resp and self.resp_r >= 0 and not self.resp_closed else [])
        for fd in fds:
            poller.register(fd, select.POLLIN)
        while True:
            if allow_resp and self.resp_q:
                return "resp", self.resp_q.popleft()
            if self.status_q:
                return "status", self.status_q.popleft()
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", b""
            events = poller.poll(max(1, int(left * 1000)))
            for fd, ev in events:
                data = os.read(fd, 1 << 20) if ev & (select.POLLIN | select.POLLHUP | select.POLLERR) else b""
                if not data:
                    if ev & (select.POLLHUP | select.POLLERR):
                        if fd == self.resp_r:  # the task closed its end (it ended): its end report follows
                            self.resp_closed = True
                            poller.unregister(fd)
                            continue
                        return "eof", b""
                    continue
                if fd == self.resp_r:
                    self.resp_q.extend(self.resp_buf.feed(data))
                else:
                    self.status_q.extend(self.status_buf.feed(data))

    def resp_pending(self) -> bool:
        """Is there anything more on the task's pipe (it should be silent between calls)?"""
        if self.resp_q or self.resp_buf.pending:
            return True
        if self.resp_r < 0 or self.resp_closed:
            return False
        poller = select.poll()
        poller.register(self.resp_r, select.POLLIN)
        if not poller.poll(0):
            return False
        try:
            data = os.read(self.resp_r, 1 << 20)
        except OSError:
            return False
        if not data:  # closed, nothing more: the task ended after its reply
            self.resp_closed = True
            return False
        try:
            self.resp_q.extend(self.resp_buf.feed(data))
        except framing.FrameError:
            pass
        return True

    def drain_resp(self) -> list[bytes]:
        """Whatever complete frames the task's pipe holds right now (without waiting)."""
        if self.resp_r < 0 or self.resp_closed:
            out = list(self.resp_q)
            self.resp_q.clear()
            return out
        poller = select.poll()
        poller.register(self.resp_r, select.POLLIN)
        try:
            while poller.poll(0):
                data = os.read(self.resp_r, 1 << 20)
                if not data:
                    break
                self.resp_q.extend(self.resp_buf.feed(data))
        except (OSError, framing.FrameError):
            pass
        out = list(self.resp_q)
        self.resp_q.clear()
        return out


class Task:
    """The channel to one task process. Used by :class:`Session` and the validator.

    :meth:`call` returns the reply's data, decoded against the schema of the command
    (:data:`.replies.DATA_TYPES`), and raises :class:`StepTimeout` (the wall-clock deadline
    passed), :class:`SandboxCrash` (the task died, was killed for a forbidden operation, sent
    something that does not fit the schema or tampered with the audit hook: the task is then
    dead and its worker replaced) or :class:`EnvError` (the environment raised or returned
    something outside the contract; the task lives on, and its worker is recycled when it ends).

    Deadlines are absolute and enforced here: a call's deadline is fixed when it is sent (the
    sooner of its own timeout and the task's), and no frame from the task moves it. A
    ``forbidden`` frame or a malformed one kills the task at once.
    """

    def __init__(self, pool: "SandboxPool", worker: _Worker, timeout_s: float | None) -> None:
        self.pool = pool
        self.worker = worker
        self.timeout_s = timeout_s
        self.label = "the task"  # how a timeout of the whole task is described
        self.deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        self.seq = 0
        self.dead = False
        self.ended = False
        self.tainted = False  # an environment error happened: recycle the worker at the end
        self.death: SandboxError | None = None
        self._forbidden: replies.Forbidden | None = None
        self._guarded = pool.guarded
        self._fingerprint = ""
        #: whether the environment's code may have run in this task (its module was sent): from
        #: then on ``parse`` (a verdict the task computes) is refused
        self.code_ran = False
        #: the task's cgroup (None without the layer) and what it used, read when the task ended
        self.cgroup: TaskCgroup | None = None
        self.usage: Any = None

    def _limit(self, timeout: float | None, cap: float | None = None) -> tuple[float, bool]:
        now = time.monotonic()
        cands = [(now + timeout, False)] if timeout is not None else []
        if cap is not None:
            cands.append((now + cap, False))
        if self.deadline is not None:
            cands.append((self.deadline, True))
        if not cands:
            return now + 3600.0, False
        return min(cands)

    def start(self, cpu_s: int) -> None:
        w = self.worker
        deadline, _ = self._limit(None, _TASK_START_TIMEOUT_S)
        cgroups = self.pool.cgroups
        if cgroups is not None and cgroups.available:
            try:
                self.cgroup = cgroups.new_task()
            except OSError as exc:
                self._die(SandboxCrash(f"no cgroup for the task: {exc}", kind=ErrorKind.SANDBOX))
        fds = list(self.cgroup.fds) if self.cgroup is not None else []
        try:
            w.begin_task({"op": "task", "cpu_s": cpu_s, "cgroups": len(fds)}, fds)
        except OSError as exc:
            self._die(SandboxCrash(f"sandbox worker is not accepting tasks ({exc})", kind=ErrorKind.SANDBOX))
        finally:
            if self.cgroup is not None:
                self.cgroup.close_fds()
        src, frame = self._frame(deadline, "start")
        if src == "timeout":
            self._die(SandboxCrash("sandbox task did not start in time", kind=ErrorKind.SANDBOX))
        if not isinstance(frame, replies.Ready):
            self._die(SandboxCrash(f"sandbox task did not start (sent {type(frame).__name__})", kind=ErrorKind.SANDBOX))
        if self._guarded and (":" not in frame.guard.fp or frame.guard.beat != 0):
            self._die(SandboxCrash("sandbox task started without its audit hook", kind=ErrorKind.SANDBOX))
        if self.cgroup is not None and len(self.cgroup.members()) != 1:
            self._die(SandboxCrash("sandbox task did not enter its cgroup", kind=ErrorKind.SANDBOX))
        self._fingerprint = frame.guard.fp

    def _frame(self, deadline: float, op: str) -> tuple[str, Any]:
        """The next decoded frame of the task ("resp"), or ("timeout", None). Everything else
        (the task's end, a forbidden report, garbage, frames that do not fit) ends the task."""
        w = self.worker
        while True:
            try:
                src, payload = w.next_frame(deadline)
            except framing.FrameError as exc:
                self._die(SandboxCrash(f"{op}: garbage on the result pipe ({exc})", kind=ErrorKind.SANDBOX))
            if src == "timeout":
                return src, None
            if src == "eof":
                self._die(SandboxCrash(f"{op}: the sandbox worker died"))
            if src == "status":
                try:
                    status = replies.decode_status_frame(payload)
                except replies.ReplyError as exc:  # pragma: no cover - the zygote runs no environment code
                    self._die(SandboxCrash(f"{op}: bad status from the worker ({exc})", kind=ErrorKind.SANDBOX))
                if isinstance(status, replies.Forked):
                    w.task_pid, w.task_pidns = status.pid, status.pidns
                    continue
                if isinstance(status, replies.TaskEnd):
                    self._die(self._cause(status, op))
                self._die(SandboxCrash(f"{op}: unexpected status from the worker ({type(status).__name__})", kind=ErrorKind.SANDBOX))
            try:
                frame = replies.decode_task_frame(payload)
            except replies.ReplyError as exc:
                self._die(SandboxCrash(f"{op}: the reply does not fit the schema: {exc}", kind=ErrorKind.SANDBOX))
            if isinstance(frame, replies.Forbidden):
                self._forbidden = frame
                self._die(SandboxCrash(f"{op}: forbidden: {self._forbidden_text()}", kind=ErrorKind.FORBIDDEN))
            return "resp", frame

    def _forbidden_text(self) -> str:
        f = self._forbidden
        if f is None:
            return "a forbidden operation"
        return " ".join(x for x in (f.event, f.detail) if x) or "a forbidden operation"

    def _finish_cgroup(self) -> None:
        """Read what the task used from its cgroup and remove it (the task is gone)."""
        cg, self.cgroup = self.cgroup, None
        if cg is not None:
            self.usage = cg.usage()
            if self.pool.cgroups is not None:
                self.pool.cgroups.release(cg)

    def _cause(self, end: replies.TaskEnd, op: str) -> SandboxError:
        """Why the task process ended, from the zygote's trusted report (and its cgroup's counters)."""
        code, sig = end.exit, end.signal
        if self.cgroup is not None:
            self.usage = self.cgroup.usage()
        if self.usage is not None and self.usage.oom_kills:
            limit = self.pool.cgroups.memory_bytes >> 20 if self.pool.cgroups is not None else 0
            return SandboxCrash(f"{op}: out of memory (the task's cgroup limit of {limit} MiB)", kind=ErrorKind.MEMORY)
        if code == CGROUP_EXIT:
            return SandboxCrash(f"{op}: the task could not enter its cgroup", kind=ErrorKind.SANDBOX)
        if code == FORBIDDEN_EXIT:
            if self._forbidden is None:  # the hook's report may still be in the pipe
                for payload in self.worker.drain_resp():
                    try:
                        frame = replies.decode_task_frame(payload)
                    except replies.ReplyError:
                        continue
                    if isinstance(frame, replies.Forbidden):
                        self._forbidden = frame
            return SandboxCrash(f"{op}: forbidden: {self._forbidden_text()}", kind=ErrorKind.FORBIDDEN)
        if code == MEMORY_EXIT:
            return SandboxCrash(f"{op}: out of memory", kind=ErrorKind.MEMORY)
        if sig == signal.SIGSYS:
            return SandboxCrash(f"{op}: forbidden: a system call blocked by the seccomp filter (SIGSYS)", kind=ErrorKind.FORBIDDEN)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return SandboxCrash(f"{op}: CPU time limit ({self.pool.config.cpu_s}s) exceeded", kind=ErrorKind.TIMEOUT)
        if sig:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            hint = " (e.g. a C stack overflow from deep recursion)" if sig == signal.SIGSEGV else ""
            return SandboxCrash(f"{op}: the environment process was killed by {name}{hint}")
        if end.error:
            return SandboxCrash(f"{op}: {end.error[:300]}", kind=ErrorKind.SANDBOX)
        return SandboxCrash(f"{op}: the environment process exited with code {code}")

    def _die(self, exc: SandboxError) -> NoReturn:
        """Kill the worker, give it back for replacement, and raise ``exc``."""
        if not self.dead:
            self.dead = True
            self.death = exc
            self.worker.kill()
            self._finish_cgroup()
            self.pool._release(self.worker, recycle=True)
        raise exc

    def _check_reply(self, frame: Any, op: str) -> replies.Reply:
        """The reply to the current command, with an intact audit hook; anything else kills the task."""
        if not isinstance(frame, replies.Reply) or frame.seq != self.seq:
            self._die(SandboxCrash(f"{op}: unexpected frame on the result pipe (forged or out of order)", kind=ErrorKind.SANDBOX))
        if frame.guard.fp != self._fingerprint or frame.guard.beat != self.seq:
            if not self._guarded or frame.guard.fp.partition(":")[0] != self._fingerprint.partition(":")[0]:
                why = "a reply not written by the task's I/O thread (forged)"
            elif frame.guard.fp != self._fingerprint:
                why = "its closure, code or tables were rewritten"
            else:
                why = "it no longer answers"
            self._die(SandboxCrash(f"{op}: forbidden: the audit hook was tampered with ({why})", kind=ErrorKind.FORBIDDEN))
        if self.worker.resp_pending():
            self._die(SandboxCrash(f"{op}: extra data on the result pipe after the reply", kind=ErrorKind.SANDBOX))
        return frame

    def call(self, op: str, *, timeout: float | None = None, **args: Any) -> Any:
        """Send one command; return the task's successful reply data (a :mod:`.replies` Struct)."""
        if self.dead:
            raise SandboxCrash(f"{op}: the session is dead ({self.death})", kind=getattr(self.death, "kind", "crash"))
        if self.ended:
            raise SandboxError(f"{op}: the session is closed")
        if op == "parse" and self.code_ran:
            raise SandboxError("parse: answered only by a task in which no environment code has run (open a new task)")
        if op not in ("parse", "ping"):
            self.code_ran = True
        self.seq += 1
        deadline, overall = self._limit(timeout)
        w = self.worker
        what = self.label if overall else op
        limit = (self.timeout_s if overall else timeout) or 3600.0
        try:
            sent = w.send({"seq": self.seq, "op": op, **args}, deadline)
        except SandboxCrash:  # the task closed its end: its end report says why
            src, frame = self._frame(min(deadline, time.monotonic() + _TASK_END_TIMEOUT_S), op)
            self._die(SandboxCrash(f"{op}: the task closed its command pipe", kind=ErrorKind.SANDBOX))
        if not sent:
            self._die(StepTimeout(f"{what} exceeded its {limit:.1f}s wall-clock limit"))
        src, frame = self._frame(deadline, op)
        if src == "timeout":
            self._die(StepTimeout(f"{what} exceeded its {limit:.1f}s wall-clock limit"))
        reply = self._check_reply(frame, op)
        if reply.ok:
            try:
                return replies.decode_data(op, reply)
            except replies.ReplyError as exc:
                self._die(SandboxCrash(f"{op}: the reply does not fit the schema: {exc}", kind=ErrorKind.SANDBOX))
        err = reply.error
        if err is None:
            self._die(SandboxCrash(f"{op}: a failed reply without an error", kind=ErrorKind.SANDBOX))
        # the task may only blame the environment, never claim a sandbox fault
        kind = err.kind if err.kind in _TASK_ERROR_KINDS else ErrorKind.CRASH.value
        self.tainted = True
        exc = EnvError(err.message + where_in_environment(err.traceback), kind=kind)
        exc.traceback = err.traceback
        raise exc

    def end(self) -> None:
        """End the task cleanly (the zygote kills leftovers) and give the worker back; the worker
        is recycled after an environment error (``tainted``) or ``max_tasks_per_worker`` tasks."""
        if self.dead or self.ended:
            return
        self.ended = True
        w = self.worker
        try:
            self.seq += 1
            deadline = time.monotonic() + _TASK_END_TIMEOUT_S
            if not w.send({"seq": self.seq, "op": "end"}, deadline):
                raise SandboxCrash("end: not accepted")
            got_reply = False
            while True:
                src, payload = w.next_frame(deadline)
                if src in ("timeout", "eof"):
                    raise SandboxCrash(f"end: {src}")
                if src == "resp":
                    frame = replies.decode_task_frame(payload)
                    if got_reply or not isinstance(frame, replies.Reply) or frame.seq != self.seq or not frame.ok:
                        raise SandboxCrash("end: unexpected frame")
                    if frame.guard.fp != self._fingerprint or frame.guard.beat != self.seq:
                        raise SandboxCrash("end: the audit hook was tampered with")
                    got_reply = True
                else:
                    status = replies.decode_status_frame(payload)
                    if isinstance(status, replies.TaskEnd):
                        if not got_reply or status.exit != 0 or w.resp_pending():
                            raise SandboxCrash("end: task ended abnormally")
                        break
                    if not isinstance(status, replies.Forked):
                        raise SandboxCrash("end: unexpected status")
        except (SandboxError, framing.FrameError, replies.ReplyError, OSError):
            self.dead = True
            w.kill()
            self._finish_cgroup()
            self.pool._release(w, recycle=True)
            return
        w.end_task()
        self._finish_cgroup()
        w.tasks += 1
        self.pool._release(w, recycle=self.tainted or w.tasks >= self.pool.config.max_tasks_per_worker)

    def abort(self) -> None:
        """Kill the task's worker (used when the caller gives up on it)."""
        if not (self.dead or self.ended):
            self.dead = True
            self.worker.kill()
            self._finish_cgroup()
            self.pool._release(self.worker, recycle=True)

    def __enter__(self) -> "Task":
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None and not isinstance(exc[1], (SandboxError,)):
            self.abort()
        else:
            self.end()


class SandboxPool:
    """Pre-forked isolated workers for model-written environments (thread-safe).

    ``isolate=False`` runs workers without namespaces, uid drop, rlimits or audit hook; it exists
    for the benchmark's baseline. ``audit_hook=False`` keeps every OS layer but not the hook; it
    exists to test that the OS layers contain hostile code on their own. Both show in
    :attr:`layers`.
    """

    def __init__(
        self, config: SandboxConfig | None = None, *, isolate: bool = True, audit_hook: bool = True, python: str | None = None
    ) -> None:
        self.config = config or SandboxConfig()
        self.isolate = isolate
        self.audit_hook = audit_hook
        self.python = python or sys.executable
        self._cond = threading.Condition()
        self._closed = False
        self._workers = [_Worker(self, i) for i in range(self.config.workers)]
        self._idle: deque[_Worker] = deque()
        self.recycled = 0
        self.layers: dict[str, bool] = {}
        self._lease: UidLease | None = None
        #: a cgroup per task (memory and pids for the task as a whole), where the kernel offers it
        self.cgroups: TaskCgroups | None = None
        if isolate:
            self.cgroups = TaskCgroups(
                memory_bytes=(self.config.memory_mb + self.config.tmp_size_mb) << 20, pids_max=self.config.max_processes
            )
        if isolate and os.geteuid() == 0:
            try:  # uids no other live pool holds: RLIMIT_NPROC and signals stay per pool
                self._lease = lease_uids(self.config.uid_base, self.config.workers)
            except OSError as exc:
                raise IsolationError(f"no sandbox uids for this pool: {exc}") from None
        #: the uid of each worker (distinct from every other live pool's when running as root)
        self.uids: list[int] = self._lease.uids if self._lease else [self.config.uid_base + i for i in range(self.config.workers)]
        _live_pools.add(self)
        try:
            for w in self._workers:
                w.spawn()
            hellos = [w.wait_hello() for w in self._workers]
        except BaseException:
            self.close()
            raise
        self._idle.extend(self._workers)
        self.layers = dict(SandboxLayers.intersect(h.layers for h in hellos))
        self.layer_details: dict[str, str] = {}
        for h in hellos:
            self.layer_details.update({str(k): str(v) for k, v in h.detail.items()})
        self.layers["cgroup"] = bool(self.cgroups is not None and self.cgroups.available)
        if self.cgroups is not None:
            self.layer_details["cgroup"] = self.cgroups.detail
        if isolate and self.layer_details.get("under_tmp"):
            self.close()
            raise IsolationError(under_tmp_message(self.layer_details["under_tmp"]))
        missing = SandboxLayers(self.layers).missing()
        if missing:
            msg = "sandbox isolation layers missing on this machine: " + ", ".join(
                f"{m} ({self.layer_details[m]})" if m in self.layer_details else m for m in missing
            )
            if self.config.require_isolation:
                self.close()
                raise IsolationError(msg + " (sandbox.require_isolation is set)")
            if isolate and not self.layers.get("seccomp") and not self.config.allow_without_seccomp:
                # the kernel layer fails closed: an isolated pool without it refuses to run
                self.close()
                raise IsolationError(no_seccomp_message(self.layer_details.get("seccomp", "")))
            if isolate:
                log.warning("%s; running with the rest", msg)
            else:
                log.info("isolation disabled by the caller (isolate=False)")
        self.missing_layers = missing

    @property
    def guarded(self) -> bool:
        """Do tasks run with the audit hook (so its fingerprint and heartbeat are checked)?"""
        return bool(self.isolate and self.audit_hook and self.layers.get("audit_hook"))

    # -- workers --------------------------------------------------------------------------

    def _acquire(self, timeout: float | None) -> _Worker:
        timeout = self.config.acquire_timeout_s if timeout is None else timeout
        with self._cond:
            if not self._cond.wait_for(lambda: self._closed or bool(self._idle), timeout):
                raise PoolExhausted(f"no sandbox worker became free within {timeout:.1f}s")
            if self._closed:
                raise PoolExhausted("the sandbox pool is closed")
            w = self._idle.popleft()
        try:
            if not w.alive():
                w.kill()
                w.spawn()
            w.wait_hello()
        except BaseException:
            self._release(w, recycle=True)
            raise
        return w

    def _release(self, w: _Worker, *, recycle: bool) -> None:
        with self._cond:
            closed = self._closed
        if closed:
            w.kill()
            return
        if recycle or not w.alive():
            w.kill()
            self.recycled += 1
            try:
                w.spawn()  # warms up in the background; hello is awaited at the next acquire
            except OSError as exc:
                log.error("could not restart sandbox worker %s: %s", w.slot, exc)
        with self._cond:
            if self._closed:
                w.kill()
                return
            self._idle.append(w)
            self._cond.notify()

    def task(self, *, timeout_s: float | None = None, acquire_timeout_s: float | None = None, cpu_s: int | None = None) -> Task:
        """A fresh task process on a free worker; ``timeout_s`` bounds the task's whole life."""
        w = self._acquire(acquire_timeout_s)
        t = Task(self, w, timeout_s)
        t.start(cpu_s or self.config.cpu_s)
        return t

    def open_session(
        self, source: str, *, step_timeout_s: float | None = None, acquire_timeout_s: float | None = None,
        max_turns: int | None = None,
    ) -> Session:
        """Load ``source`` in a task and hold it for one multi-turn episode (or several);
        ``max_turns`` caps the environment's own max_turns (the turn budget)."""
        return Session(self, source, step_timeout_s=step_timeout_s, acquire_timeout_s=acquire_timeout_s, max_turns=max_turns)

    # -- life cycle -------------------------------------------------------------------------

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers' first processes (for tests and diagnostics)."""
        return [w.proc.pid for w in self._workers if w.proc is not None]

    def close(self) -> None:
        """Kill every worker (sessions still open are dead afterwards)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._idle.clear()
            self._cond.notify_all()
        for w in self._workers:
            w.kill()
        if self.cgroups is not None:
            self.cgroups.close()
        if self._lease is not None:
            self._lease.release()
        _live_pools.discard(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - safety net
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
