"""``.ci/run`` tests a clone under $HOME in a folder with spaces, with the package installed from
that clone, and cleans up after itself.

The mechanics only: the installs are skipped (``SPADE_CI_SETUP=0``) and the README's test command
is replaced by a small one (``SPADE_CI_TEST_COMMAND``). The script reinstalls the package of the
``python3`` it finds first on PATH, so it runs here with a throwaway virtual environment first on
PATH (the machine's interpreter is never touched); the environment sees the installed
dependencies (``--system-site-packages``) and holds only spade-engine itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

WHERE = "import os, spade_engine; print('installed', os.path.dirname(os.path.dirname(spade_engine.__file__)))"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A virtual environment over this interpreter's packages, without spade-engine installed."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    where = tmp_path_factory.mktemp("ci venv") / "venv"
    subprocess.run([str(base), "-m", "venv", "--system-site-packages", str(where)], check=True, timeout=300)
    return where


def _ci_run(venv: Path, command: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", SPADE_CI_SETUP="0", SPADE_CI_TEST_COMMAND=command)
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([str(ROOT / ".ci" / "run")], capture_output=True, text=True, timeout=600, env=env, cwd="/")


def _installed(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python3"), "-c", WHERE], capture_output=True, text=True, cwd="/", check=True)
    return Path(out.stdout.split("installed ", 1)[1].strip())


def test_ci_runs_the_tests_in_a_clone_with_spaces_under_home_and_removes_it(venv) -> None:
    command = (f'(cd / && python3 -c "{WHERE}") && echo "cwd $PWD" && '
               "python3 -m pytest -q -n 0 -p no:cacheprovider tests/test_memory.py -k 'codec or empty_memory'")
    res = _ci_run(venv, command)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    cwd = Path(next(ln for ln in lines if ln.startswith("cwd "))[4:])
    installed = Path(next(ln for ln in lines if ln.startswith("installed "))[10:])
    assert installed == cwd, "the package under test is the clone's, not this checkout's"
    assert cwd.name == "spade-engine" and cwd.parent.parent == Path.home(), cwd
    assert " " in cwd.parent.name and cwd.parent.name.startswith("spade ci clone.")
    assert "2 passed" in res.stdout, res.stdout
    assert not cwd.parent.exists(), "the clone is removed"
    assert _installed(venv) == ROOT, "the package is installed from the checkout again"


def test_ci_fails_when_the_tests_fail_and_still_cleans_up(venv) -> None:
    res = _ci_run(venv, 'echo "cwd $PWD"; exit 3')
    assert res.returncode == 3, res.stdout + res.stderr
    cwd = Path(next(ln for ln in res.stdout.splitlines() if ln.startswith("cwd "))[4:])
    assert not cwd.parent.exists()
    assert _installed(venv) == ROOT


def test_ci_ends_with_the_readme_test_command() -> None:
    """What CI runs when nothing replaces it is the README's test command, literally (the docs'
    tests check that the README shows it)."""
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert lines[-1] == "python3 -m pytest"
    assert "python3 -m pytest" in (ROOT / "README.md").read_text()
