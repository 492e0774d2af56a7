"""Shared helpers for the sandbox tests: a fast test config, and probes of the machine's state
(processes running as sandbox uids, files the red-team programs try to leave behind)."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

from spade_engine.config import SandboxConfig

ENVS = Path(__file__).parent / "envs"
REDTEAM = Path(__file__).parent / "redteam"
MARKER = "spade_redteam"


def fast_config(**kw) -> SandboxConfig:
    """Short limits so the suite stays quick on 2 busy cores."""
    base = dict(
        workers=2,
        step_timeout_s=2.0,
        import_timeout_s=4.0,
        validate_timeout_s=20.0,
        memory_mb=384,
        cpu_s=8,
        acquire_timeout_s=120.0,
        max_tasks_per_worker=50,
    )
    base.update(kw)
    return SandboxConfig(**base)


def example_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(ENVS.glob("*.py"))}


def sandbox_processes(pool_or_cfg) -> list[int]:
    """Pids of live (non-zombie) processes running as one of a pool's sandbox uids (``pool.uids``,
    which it leased; for a config, the uids from its ``uid_base`` on)."""
    if hasattr(pool_or_cfg, "uids"):
        uids = set(pool_or_cfg.uids)
    else:
        uids = set(range(pool_or_cfg.uid_base, pool_or_cfg.uid_base + pool_or_cfg.workers))
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = d.joinpath("status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "-1").split()[0])
        state = fields.get("State", "").strip()[:1]
        if uid in uids and state != "Z":
            out.append(int(d.name))
    return out


def wait_no_sandbox_processes(pool_or_cfg, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = sandbox_processes(pool_or_cfg)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def marker_files() -> list[str]:
    """Files named like the red-team markers anywhere an escaped write could land."""
    found = []
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/root", os.getcwd(), str(Path(__file__).parent)):
        found.extend(glob.glob(os.path.join(d, MARKER + "*")))
    return found
