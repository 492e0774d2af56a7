"""The suite's location-dependent parts, run again from clones where users clone: in a home
folder (which the sandbox's audit hook denies reading) and in a system folder the red-team probe
looks into (/srv, /opt or /var/tmp), each in a path with spaces.

A fresh clone under a home directory once failed ``host_files_probe`` (its verdict depended on
whether the checkout lay under a home the audit hook denies); CI clones elsewhere and never saw it.
This test copies the working tree (git's tracked and untracked, not ignored, files) into such a
folder and runs there, with the clone's own code first on ``sys.path``: the red-team programs that
touch paths, and ``validate`` of the probe through the clone's command line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

PATH_PROGRAMS = ["host_files_probe", "read_home", "write_outside_tmp", "write_via_symlink", "host_proc_probe"]


def _home_like() -> Path:
    """/home when this user may write there (a user's clone lies under /home/NAME), else $HOME."""
    home = Path("/home")
    if home.is_dir() and os.access(home, os.W_OK):
        return home
    return Path.home()


def _system_folder() -> Path:
    """A folder outside any home that the host-files probe lists (/srv, /opt, /var/tmp: the
    first this user may write to; /var/tmp is writable for everyone)."""
    for p in (Path("/srv"), Path("/opt"), Path("/var/tmp")):
        if p.is_dir() and os.access(p, os.W_OK):
            return p
    pytest.fail("none of /srv, /opt, /var/tmp is writable")


LOCATIONS = {"home": _home_like, "system": _system_folder}


def _files() -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("the clone test copies the working tree with `git ls-files`: run it from a git checkout")
    return [f for f in listed.decode().split("\0") if f]


@pytest.fixture(params=sorted(LOCATIONS))
def clone(request):
    base = LOCATIONS[request.param]() / f"spade clone {uuid.uuid4().hex[:8]}"
    dest = base / "my projects" / "spade-engine"
    try:
        for rel in _files():
            src = ROOT / rel
            if src.is_file():
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
        yield dest
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(clone)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_path_sensitive_parts_pass_from_clones_with_spaces_in_their_paths(clone):
    env = _env(clone)
    where = subprocess.run(
        [sys.executable, "-c", "import spade_engine, sys; sys.stdout.write(spade_engine.__file__)"],
        cwd=clone, env=env, capture_output=True, text=True, check=True,
    ).stdout
    assert where == str(clone / "spade_engine" / "__init__.py"), "the clone's own code must be the one under test"

    # the probe's verdict through the command line, from the clone and from this checkout: the same
    # whatever the location, and the one its first line expects
    verdicts = {}
    for where, cwd, run_env in (("clone", clone, env), ("checkout", ROOT, None)):
        done = subprocess.run(
            [sys.executable, "-m", "spade_engine.cli", "validate", "tests/redteam/host_files_probe.py", "--json"],
            cwd=cwd, env=run_env, capture_output=True, text=True, timeout=300,
        )
        report = json.loads(done.stdout.splitlines()[0])
        verdicts[where] = "valid" if report["valid"] else report["error_kind"]
        if where == "clone":
            assert str(clone / "pyproject.toml") in done.stdout, "the clone's probe reads the clone's own files"
    assert verdicts == {"clone": "forbidden", "checkout": "forbidden"}, verdicts

    # the red-team programs that touch paths, from the clone's own tests
    select = " or ".join(PATH_PROGRAMS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/test_redteam.py", "-k", select],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{len(PATH_PROGRAMS)} passed" in done.stdout, done.stdout[-2000:]
