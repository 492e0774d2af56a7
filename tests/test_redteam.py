"""The red-team suite: hostile environment programs (tests/redteam/*.py, each declaring the
verdict it must get on its first line) validated in the real sandbox.

Every test asserts the verdict AND that the engine is intact: this process and its process group
alive (a canary child in the group survives), its environment unchanged and not leaked into any
report, no file left outside the sandbox's private temp dir, no process left running as a
sandbox uid beyond the workers' zygotes, and the pool still validating a good environment. After
the module, closing the pool leaves no sandbox process at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from sandbox_support import ENVS, REDTEAM, fast_config, marker_files, sandbox_processes, wait_no_sandbox_processes

from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.validator import ErrorKind, Validator

pytestmark = pytest.mark.sandbox

SECRET = f"spade-redteam-secret-{uuid.uuid4().hex}"
PROGRAMS = sorted(REDTEAM.glob("*.py"))
GOOD = (ENVS / "arithmetic_env.py").read_text()


def expected(path) -> set[str]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path.name} must start with '# expect: <verdict>'"
    verdicts = {v.strip() for v in first.split(":", 1)[1].split("|")}
    assert verdicts <= {k.value for k in ErrorKind} | {"valid"}
    return verdicts


@pytest.fixture(scope="module")
def cfg():
    return fast_config(uid_base=2_000_000_080)


@pytest.fixture(scope="module")
def canary():
    """A child in the engine's own process group: killing the group would kill it."""
    os.environ["SPADE_REDTEAM_SECRET"] = SECRET  # before any worker starts
    proc = subprocess.Popen(["sleep", "3600"])
    yield proc
    proc.kill()
    proc.wait()
    os.environ.pop("SPADE_REDTEAM_SECRET", None)


@pytest.fixture(scope="module")
def pool(cfg, canary):
    p = SandboxPool(cfg)
    yield p
    p.close()
    assert wait_no_sandbox_processes(p) == [], "sandbox processes left after the pool closed"


@pytest.fixture(scope="module")
def validator(pool):
    return Validator(pool, turn_limit=8)


def test_suite_is_big_enough():
    assert len(PROGRAMS) >= 25


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_hostile_program(path, validator, pool, cfg, canary):
    env_before = dict(os.environ)
    pid = os.getpid()
    report = validator.validate(path.read_text())
    verdict = "valid" if report.valid else report.error_kind
    assert verdict in expected(path), f"{path.name}: {verdict} at {report.failed_check}: {report.detail}"
    # the engine is intact
    assert os.getpid() == pid and canary.poll() is None
    assert dict(os.environ) == env_before
    assert SECRET not in json.dumps(report.to_dict())
    assert marker_files() == []
    assert len(sandbox_processes(pool)) <= cfg.workers, "a process outlived its task"
    # and the pool still works
    assert validator.validate(GOOD).valid


@pytest.mark.skipif(os.geteuid() != 0, reason="the point is that we run as root")
def test_fork_bomb_containment_does_not_rely_on_the_hook_alone(pool):
    """As root, RLIMIT_NPROC would be ignored: the uid drop is what makes it hold."""
    assert pool.layers["uid_drop"] and pool.layers["rlimit_nproc"] and pool.layers["pid_namespace"]


def test_environment_variables_are_scrubbed(pool):
    with pool.open_session((REDTEAM / "env_vars_dump.py").read_text()) as s:
        obs, _ = s.reset(seed=1)
    assert SECRET not in obs and "SPADE_REDTEAM_SECRET" not in obs
    assert "'HOME', '/tmp'" in obs and "PYTHONHASHSEED" in obs


def test_import_time_side_effects_stay_inside_the_task(pool):
    with pool.open_session((REDTEAM / "import_side_effects.py").read_text()) as s:
        s.reset(seed=1)
    assert "SPADE_REDTEAM_INJECTED" not in os.environ
    assert not os.path.exists("/tmp/spade_redteam_import")


def test_threads_die_with_the_episode(pool, cfg):
    with pool.open_session((REDTEAM / "outliving_threads.py").read_text()) as s:
        for seed in range(3):
            s.reset(seed=seed)
    assert len(sandbox_processes(pool)) <= cfg.workers
