"""``.ci/stress``: the test command N times beside CPU hogs, failing when any run fails, and
leaving no hog behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _stress(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_inner.py"
    test.write_text(body)
    env = {**os.environ, "STRESS_LOGS": str(tmp_path / "logs")}
    return subprocess.run([str(ROOT / ".ci" / "stress"), *args, "--", str(test), "-q"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stress_reports_each_run_and_fails_when_a_run_fails(tmp_path) -> None:
    ok = _stress(tmp_path, "def test_ok():\n    assert 1 + 1 == 2\n", "2", "1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("stress: 2 run(s) of 'python3 -m pytest") and "beside 1 CPU hog(s)" in lines[0]
    assert [ln.split(":")[0] for ln in lines[1:3]] == ["run 1", "run 2"] and all("1 passed" in ln for ln in lines[1:3])
    assert lines[-1] == "stress: 0 of 2 run(s) failed"
    hogs = [int(p) for p in (tmp_path / "logs" / "hogs.pids").read_text().split()]
    assert len(hogs) == 1 and not _alive(hogs[0])  # the hog it started is stopped when it ends
    bad = _stress(tmp_path, "def test_bad():\n    assert 1 + 1 == 3\n", "1", "1")
    assert bad.returncode == 1 and "exit 1" in bad.stdout and "1 failed" in bad.stdout
    assert bad.stdout.splitlines()[-1] == "stress: 1 of 1 run(s) failed"
    assert (tmp_path / "logs" / "run-1.log").read_text().count("assert 1 + 1 == 3") >= 1
    assert not any(_alive(int(p)) for p in (tmp_path / "logs" / "hogs.pids").read_text().split())
