"""The OS layers on their own: with the audit hook switched off, hostile code that the hook
would have stopped (fork bombs, ctypes, sockets, writes, signals) is still contained by the uid
drop, the rlimits, the namespaces and the read-only file system. Runs as root, like CI."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import uuid

import pytest
from sandbox_support import fast_config, marker_files, sandbox_processes, wait_no_sandbox_processes

from spade_engine.sandbox import EnvError, SandboxCrash, SandboxPool

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="the OS layers need root (CI and this machine run as root)"),
]

SECRET = f"spade-isolation-secret-{uuid.uuid4().hex}"


def probe_env(body: str) -> str:
    """An environment whose reset() runs ``body`` (which sets ``out``) and returns ``out``."""
    return (
        "import os, sys\nclass ProbeEnv:\n    def reset(self, seed=None):\n        out = ''\n"
        + textwrap.indent(textwrap.dedent(body), " " * 8)
        + "\n        return str(out), {}\n    def step(self, action):\n        return 'x', 0.0, True, False, {}\n"
    )


@pytest.fixture(scope="module")
def cfg():
    return fast_config(uid_base=2_000_000_090, step_timeout_s=10.0, max_processes=16)


@pytest.fixture(scope="module")
def bare(cfg):
    os.environ["SPADE_ISOLATION_SECRET"] = SECRET
    canary = subprocess.Popen(["sleep", "3600"])
    p = SandboxPool(cfg, audit_hook=False)
    yield p
    p.close()
    canary_alive = canary.poll() is None
    canary.kill()
    canary.wait()
    os.environ.pop("SPADE_ISOLATION_SECRET", None)
    assert canary_alive
    assert wait_no_sandbox_processes(p) == []


def run(pool, body: str) -> str:
    with pool.open_session(probe_env(body)) as s:
        return s.reset(seed=0)[0]


def test_the_hook_is_really_off_and_every_os_layer_on(bare):
    assert bare.layers["audit_hook"] is False
    assert all(v for k, v in bare.layers.items() if k != "audit_hook"), bare.layer_details


def test_a_fork_bomb_is_stopped_at_its_first_fork_by_the_task_filter(bare, cfg):
    """A task is one process: its first fork kills it (the per-task seccomp filter), whatever
    primitive reaches it, and nothing is left running."""
    body = """
    import time
    for _ in range(500):
        pid = os.fork()
        if pid == 0:
            time.sleep(3600)
            os._exit(0)
    out = "forked"
    """
    with pytest.raises(SandboxCrash) as exc:
        run(bare, body)
    assert exc.value.kind == "forbidden" and "seccomp" in str(exc.value)
    assert len(sandbox_processes(bare)) <= cfg.workers


def test_a_thread_bomb_is_capped_by_the_process_limits(bare, cfg):
    """Threads stay allowed, within RLIMIT_NPROC and the task cgroup's pids.max."""
    body = """
    import threading, time
    n, err = 0, ""
    try:
        for _ in range(500):
            threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
            n += 1
    except RuntimeError as e:
        err = "RuntimeError"
    out = f"{n} {err} uid={os.getuid()}"
    """
    started, err, uid = run(bare, body).split()
    assert int(started) < cfg.max_processes and err == "RuntimeError"
    assert int(uid.removeprefix("uid=")) in bare.uids
    assert len(sandbox_processes(bare)) <= cfg.workers  # the threads died with the task


def test_ctypes_system_is_stopped_by_the_kernel_filter(bare):
    """With the hook off, ctypes works; system() starts a process, which kills the task (no new
    processes in a task), and the shell never runs."""
    body = """
    import ctypes
    libc = ctypes.CDLL(None)
    status = libc.system(b"id -u > /tmp/spade_redteam_ctypes; touch /root/spade_redteam_ctypes /var/tmp/spade_redteam_ctypes")
    out = f"{status}"
    """
    with pytest.raises(SandboxCrash) as exc:
        run(bare, body)
    assert exc.value.kind == "forbidden" and "seccomp" in str(exc.value)
    assert marker_files() == []


SYSCALLS_X86_64 = {"ptrace": 101, "mount": 165, "unshare": 272, "setns": 308, "keyctl": 250, "bpf": 321,
                   "perf_event_open": 298, "io_uring_setup": 425, "clone": 56, "pivot_root": 155, "init_module": 175}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="raw system call numbers of x86_64")
@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("execve", "os.execv('/bin/true', ['true'])"),
        ("socket(AF_INET)", "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM)"),
        ("socket(AF_NETLINK)", "import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)"),
        ("socketpair(AF_INET)", "import ctypes; ctypes.CDLL(None).socketpair(2, 1, 0, (ctypes.c_int * 2)())"),
        ("unshare(CLONE_NEWUSER)", "import ctypes; ctypes.CDLL(None).syscall(272, 0x10000000)"),
        ("clone(CLONE_NEWUSER)", "import ctypes; ctypes.CDLL(None).syscall(56, 0x10000000 | 17, 0, 0, 0, 0)"),
        ("clone(CLONE_NEWNET)", "import ctypes; ctypes.CDLL(None).syscall(56, 0x40000000 | 17, 0, 0, 0, 0)"),
        ("setns", "import ctypes; ctypes.CDLL(None).syscall(308, 0, 0)"),
        ("ptrace", "import ctypes; ctypes.CDLL(None).syscall(101, 16, 1, 0, 0)"),
        ("mount", "import ctypes; ctypes.CDLL(None).syscall(165, b'none', b'/tmp', b'tmpfs', 0, 0)"),
        ("pivot_root", "import ctypes; ctypes.CDLL(None).syscall(155, b'/tmp', b'/tmp')"),
        ("keyctl", "import ctypes; ctypes.CDLL(None).syscall(250, 0, -3, 0, 0, 0)"),
        ("bpf", "import ctypes; ctypes.CDLL(None).syscall(321, 0, 0, 0)"),
        ("perf_event_open", "import ctypes; ctypes.CDLL(None).syscall(298, 0, 0, -1, -1, 0)"),
        ("io_uring_setup", "import ctypes; ctypes.CDLL(None).syscall(425, 1, (ctypes.c_char * 120)())"),
        ("init_module", "import ctypes; ctypes.CDLL(None).syscall(175, 0, 0, b'')"),
    ],
)
def test_the_kernel_filter_kills_the_task(bare, name, call):
    """The seccomp layer on its own (no audit hook): each call kills the task as forbidden."""
    with pytest.raises(SandboxCrash) as exc:
        run(bare, call)
    assert exc.value.kind == "forbidden" and "seccomp" in str(exc.value), name
    assert bare.layers["seccomp"] and "rules" in bare.layer_details["seccomp"]


def test_the_kernel_filter_lets_ordinary_code_run(bare):
    body = """
    import socket, threading
    a, b = socket.socketpair()
    a.send(b"x")
    got = b.recv(1)
    seen = []
    t = threading.Thread(target=lambda: seen.append(1))
    t.start(); t.join()
    before = os.nice(0)
    out = f"{got!r} {seen} {os.nice(1) - before}"
    """
    assert run(bare, body) == "b'x' [1] 1"  # socketpairs, threads, its own priority


def test_writes_outside_tmp_fail(bare):
    repo = os.getcwd()
    body = f"""
    res = []
    for path in ("/root/spade_redteam_w", "/var/tmp/spade_redteam_w", "/dev/shm/spade_redteam_w", {repo!r} + "/spade_redteam_w", "/etc/spade_redteam_w"):
        try:
            open(path, "w").write("x")
            res.append("WROTE " + path)
        except OSError as e:
            res.append(type(e).__name__)
    out = " ".join(res)
    """
    out = run(bare, body)
    assert "WROTE" not in out
    assert marker_files() == []


def test_the_network_namespace_has_no_interface_but_lo(bare):
    # the worker lists its interfaces before its filter is installed (a netlink socket, which a
    # task may not open): none but lo; tasks have no /proc/net to look at
    assert bare.layers["net_namespace"]
    assert run(bare, "out = str(os.path.exists('/proc/net/dev'))") == "False"
    # and no socket of a network family can even be made (seccomp), so nothing connects anywhere
    with pytest.raises(SandboxCrash) as exc:
        run(bare, "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)")
    assert exc.value.kind == "forbidden"


def test_secrets_homes_and_other_processes_are_out_of_reach(bare):
    body = """
    res = [repr(sorted(os.environ))]
    res.append(repr(os.listdir("/root")))
    try:
        res.append(open("/proc/1/environ").read())
    except OSError as e:
        res.append(type(e).__name__)
    res.append(repr(sorted(os.listdir("/proc"))))
    res.append(repr([os.getppid(), os.getpid()]))
    out = " | ".join(res)
    """
    out = run(bare, body)
    assert SECRET not in out and "SPADE_ISOLATION_SECRET" not in out
    env_keys, root_listing, proc1, proc, pids = out.split(" | ")
    assert "spade_redteam" not in root_listing and ".bashrc" not in root_listing  # homes hidden
    assert proc1 in ("PermissionError", "FileNotFoundError", "") or SECRET not in proc1
    assert proc1 == "FileNotFoundError" and proc == "[]"  # no /proc at all: no other process is visible
    ppid, pid = eval(pids)  # noqa: S307 - a list literal we built above
    assert ppid == 1 and pid < 100  # its own PID namespace: its parent, the zygote, is PID 1


def test_signals_cannot_reach_the_engine_or_the_worker(bare):
    body = """
    import signal
    res = []
    for target in (os.getppid(), 1, -1):
        try:
            os.kill(target, signal.SIGKILL)
            res.append("sent")
        except OSError as e:
            res.append(type(e).__name__)
    out = " ".join(res)
    """
    run(bare, body)  # the session survived: the zygote (PID 1 of the namespace) ignores it
    with bare.open_session(probe_env("out = 'still here'")) as s:
        assert s.reset(seed=0)[0] == "still here"


def test_memory_is_capped(bare):
    with pytest.raises((EnvError, SandboxCrash)) as exc:
        run(bare, "out = len(bytearray(2 * 1024**3))")
    assert exc.value.kind == "memory"
