"""Helpers for tests that run consumer processes: starting the supervised faust worker, deadline
waits, and reading the stats projection's snapshot file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def wait_until(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` until it is truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def read_snapshot(path: Path) -> dict:
    """The stats projection's snapshot file, or ``{}`` while it is missing or half-written."""
    try:
        return json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}


def counted(path: Path) -> int:
    """How many events the stats snapshot at ``path`` has counted so far."""
    return sum(read_snapshot(path).get("state", {}).get("counts", {}).values())


ROOT = Path(__file__).resolve().parent.parent


# exec the rest of the command line with SIGINT ignored, as a shell without job control starts a
# background job (`cmd &`): an ignored signal stays ignored across exec, and Python then installs
# no KeyboardInterrupt handler of its own
SIGINT_IGNORED = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.executable, sys.argv[1:])",
    sys.executable,
]


def start_supervisor(
    bootstrap: str, run_id: str, data: Path, err: Path, *extra: str, sigint_ignored: bool = False
) -> subprocess.Popen:
    """``spade-engine consumers run RUN --backend kafka`` (the supervised faust worker) as a process.

    Its stderr goes to the file ``err``, never to a pipe: while the broker is down the worker logs
    every failed reconnect, and an undrained pipe would fill up and block it in a write. With
    ``sigint_ignored`` it starts with SIGINT ignored, as a background job of a shell does (the
    same process: ``pid`` is the supervisor's)."""
    with open(err, "w") as fh:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [*(SIGINT_IGNORED if sigint_ignored else [sys.executable]),
             "-m", "spade_engine.cli", "consumers", "run", run_id, "--backend", "kafka",
             "--bootstrap", bootstrap, "--data-dir", str(data), *extra],
            stdout=subprocess.DEVNULL, stderr=fh, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
