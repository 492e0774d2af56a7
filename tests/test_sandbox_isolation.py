"""The OS layers on their own: with the audit hook switched off, hostile code that the hook
would have stopped (fork bombs, ctypes, sockets, writes, signals) is still contained by the uid
drop, the rlimits, the namespaces and the read-only file system. Runs as root, like CI."""

from __future__ import annotations

import os
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
    assert wait_no_sandbox_processes(cfg) == []


def run(pool, body: str) -> str:
    with pool.open_session(probe_env(body)) as s:
        return s.reset(seed=0)[0]


def test_the_hook_is_really_off_and_every_os_layer_on(bare):
    assert bare.layers["audit_hook"] is False
    assert all(v for k, v in bare.layers.items() if k != "audit_hook"), bare.layer_details


def test_fork_bomb_is_capped_by_rlimit_nproc_and_cleaned_up(bare, cfg):
    body = """
    import time
    pids, err = [], ""
    try:
        for _ in range(500):
            pid = os.fork()
            if pid == 0:
                time.sleep(3600)
                os._exit(0)
            pids.append(pid)
    except OSError as e:
        err = type(e).__name__
    out = f"{len(pids)} {err} uid={os.getuid()}"
    """
    out = run(bare, body)
    forked, err, uid = out.split()
    assert int(forked) < cfg.max_processes and err == "BlockingIOError"
    assert uid == f"uid={cfg.uid_base}" or uid == f"uid={cfg.uid_base + 1}"
    assert len(sandbox_processes(cfg)) <= cfg.workers  # the sleeping children died with the task


def test_ctypes_system_runs_unprivileged_in_a_private_tmp(bare):
    body = """
    import ctypes
    libc = ctypes.CDLL(None)
    libc.system(b"id -u > /tmp/spade_redteam_ctypes; touch /root/spade_redteam_ctypes /var/tmp/spade_redteam_ctypes 2>/dev/null")
    out = open("/tmp/spade_redteam_ctypes").read().strip()
    """
    uid = int(run(bare, body))
    assert uid >= 2_000_000_090
    assert marker_files() == []  # /tmp inside was a private tmpfs; the rest is read-only


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


def test_network_is_unreachable(bare):
    body = """
    import socket
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2)
        out = "CONNECTED"
    except OSError as e:
        out = str(e)
    out += " " + ",".join(n for _, n in socket.if_nameindex())
    """
    out = run(bare, body)
    assert "CONNECTED" not in out and "unreachable" in out.lower()
    assert out.split()[-1] == "lo"


def test_secrets_homes_and_other_processes_are_out_of_reach(bare):
    body = """
    res = [repr(sorted(os.environ))]
    res.append(repr(os.listdir("/root")))
    try:
        res.append(open("/proc/1/environ").read())
    except OSError as e:
        res.append(type(e).__name__)
    res.append(repr(sorted(p for p in os.listdir("/proc") if p.isdigit())))
    out = " | ".join(res)
    """
    out = run(bare, body)
    assert SECRET not in out and "SPADE_ISOLATION_SECRET" not in out
    env_keys, root_listing, proc1, pids = out.split(" | ")
    assert "spade_redteam" not in root_listing and ".bashrc" not in root_listing  # homes hidden
    assert proc1 in ("PermissionError", "") or SECRET not in proc1
    visible = eval(pids)  # noqa: S307 - a list literal we built above
    assert len(visible) == 2 and "1" in visible  # only the zygote (PID 1) and this task


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
