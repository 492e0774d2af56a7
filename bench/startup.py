#!/usr/bin/env python3
"""Benchmark of the command line's start-up: how long ``spade-engine --version``, ``--help`` and
a command's own help take, each a fresh interpreter (``python -m spade_engine.cli ...``), as a user
runs them.

Baselines measured in the same run: a bare interpreter (``python -c pass``, the floor) and one
that imports every command's module (what every command cost before commands were imported lazily:
torch, transformers, SQLAlchemy, FastAPI...). Figures are the median and the worst of ``--reps``
runs per command (the first run of each warms the page cache and is not counted).

Last line: one JSON object with ``version_s``, ``help_s``, ``status_help_s``, ``start_help_s``,
``baseline_python_s``, ``baseline_all_imports_s`` and ``help_speedup`` (all imports / --help).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ALL_IMPORTS = (
    "import typer; from spade_engine.cli import app; "
    "cmd = typer.main.get_command(app); [cmd.commands[n] for n in list(cmd.commands)]"
)


def timed(argv: list[str], reps: int) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    times = []
    for i in range(reps + 1):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        if i:  # the first run warms the page cache
            times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7, help="runs per command (after one warm-up run)")
    args = ap.parse_args()
    py = sys.executable
    cases = {
        "version": [py, "-m", "spade_engine.cli", "--version"],
        "help": [py, "-m", "spade_engine.cli", "--help"],
        "status_help": [py, "-m", "spade_engine.cli", "status", "--help"],
        "start_help": [py, "-m", "spade_engine.cli", "start", "--help"],
        "baseline_python": [py, "-c", "pass"],
        "baseline_all_imports": [py, "-c", ALL_IMPORTS],
    }
    result: dict[str, float] = {}
    for name, argv in cases.items():
        median, worst = timed(argv, args.reps)
        print(f"{name:22s} median {median:6.3f} s  worst {worst:6.3f} s  ({' '.join(argv[1:])})")
        result[f"{name}_s"] = round(median, 4)
        result[f"{name}_worst_s"] = round(worst, 4)
    result["help_speedup"] = round(result["baseline_all_imports_s"] / result["help_s"], 2)
    result["reps"] = args.reps
    print(json.dumps(result))


if __name__ == "__main__":
    main()
