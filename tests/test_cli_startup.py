"""The command line starts without importing the engine, and its help reads at 80 columns.

``--version`` and ``--help`` import none of the heavy libraries (torch, transformers, SQLAlchemy,
FastAPI, FAISS): every command's module is imported only when that command runs
(``spade_engine/cli_app.py``). The start-up time itself is a figure of ``bench/startup.py``, not a
test. Help pages at 80 columns: no line longer than the terminal, no description cut short.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from spade_engine.cli import _Commands, app

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "sqlalchemy", "sqlmodel", "alembic", "fastapi", "faiss", "numpy", "pyarrow", "kafka")


def _imported(*argv: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """Top-level modules a fresh ``python -m spade_engine.cli ARGV`` imports (from -X importtime)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "spade_engine.cli", *argv], capture_output=True,
                          text=True, env=env, timeout=120)
    names = set()
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", line)
        if m:
            names.add(m.group(1).split(".")[0])
    return names, done


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["version"]])
def test_version_and_help_import_none_of_the_engine(argv):
    names, done = _imported(*argv)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "spade_engine" in names and "typer" in names, "the measurement saw the imports"
    assert not names & set(HEAVY), f"{argv} imported {sorted(names & set(HEAVY))}"
    if argv == ["--version"]:
        assert done.stdout == "spade-engine 0.1.0\n"


def test_a_command_imports_what_it_needs_only():
    names, done = _imported("config", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not names & {"torch", "transformers", "fastapi", "faiss"}, sorted(names & set(HEAVY))


def test_help_lists_every_command_with_its_whole_short_help():
    res = subprocess.run([sys.executable, "-m", "spade_engine.cli", "--help"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80"), timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("Usage: spade-engine [OPTIONS] COMMAND")
    for name, lazy in _Commands.lazy.items():
        assert re.search(rf"^  {re.escape(name)} +{re.escape(lazy.short_help)}$", res.stdout, re.M), name
    assert re.search(r"^  version +Print the spade-engine version\.$", res.stdout, re.M)


def _pages():
    """Every help page: the root, each command, each group and its commands."""
    root = typer.main.get_command(app)
    yield [], root
    for name in list(root.commands):
        cmd = root.commands[name]  # reading it imports it
        yield [name], cmd
        for sub in list(getattr(cmd, "commands", {})):
            yield [name, sub], cmd.commands[sub]


def test_every_help_page_fits_80_columns_and_cuts_no_description():
    runner = CliRunner()
    pages = 0
    for prefix, cmd in _pages():
        res = runner.invoke(app, [*prefix, "--help"], terminal_width=80, env={"COLUMNS": "80"})
        assert res.exit_code == 0, (prefix, res.output)
        section = ""
        for line in res.output.splitlines():
            assert len(line) <= 80, f"{prefix}: {line!r}"
            section = line if line and not line.startswith(" ") else section
            if section == "Commands:":  # a command's short help is never cut with an ellipsis
                assert not line.rstrip().endswith(("...", "\u2026")), f"{prefix}: a description was cut: {line!r}"
        # each option's description starts at a column that leaves it at least 40 characters
        # (a boxed table once squeezed them into about 20)
        for line in res.output.splitlines():
            m = re.match(r"^  (-\S.*?)  +(\S.*)$", line)
            if m:
                assert m.start(2) <= 40, f"{prefix}: squeezed: {line!r}"
        pages += 1
    assert pages > 30


def test_an_unknown_command_is_a_clear_error():
    res = CliRunner().invoke(app, ["strat"])
    assert res.exit_code == 2 and "No such command 'strat'" in res.output
