"""Dated results pages under ``docs/results/``, written from a benchmark's own JSON.

``write_results(kind, result, argv=...)`` writes ``docs/results/<date>-<kind>.json`` (the JSON
line the benchmark printed, with the command, commit and machine added) and
``docs/results/<date>-<kind>.md`` (a page: what was run, where, and the figures, rendered from
that JSON by the benchmark's ``render`` function). Pages are never written by hand: rerun the
benchmark with ``--report`` to replace them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """The command, commit, date and machine of this run."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = 0.0
    return {
        "command": "python3 " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv)),
        "commit": commit + ("+local changes" if dirty else ""),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} CPUs, {mem:.0f} GiB RAM, {platform.machine()}, Python {platform.python_version()}",
    }


def load_result(path: Path, bench: str) -> dict[str, Any]:
    """The result a benchmark printed, read back for ``--report-from``: a results JSON
    (``docs/results/...json``), or a log of the benchmark whose last JSON line is its result."""
    text = path.read_text()
    try:
        result = json.loads(text)
    except ValueError:
        lines = [ln for ln in text.splitlines() if ln.startswith("{")]
        if not lines:
            raise SystemExit(f"error: {path} holds no JSON line of bench/{bench}.py") from None
        result = json.loads(lines[-1])
    if not isinstance(result, dict):
        raise SystemExit(f"error: {path} holds no result of bench/{bench}.py")
    return result


def results_stem(date: str, kind: str) -> str:
    """``<date>-<kind>``, the name of a results page's files; a ``kind`` that already begins with
    a date (``--report-name 2026-12-05-learning``) is not given a second one."""
    undated = re.sub(r"^\d{4}-\d{2}-\d{2}-", "", kind) or kind
    return f"{date}-{undated}"


def write_results(kind: str, result: dict[str, Any], render: Callable[[dict[str, Any]], str], *,
                  argv: list[str] | None = None, out: Path = RESULTS, extra_files: dict[str, bytes] | None = None) -> Path:
    """Write the JSON and the page of one run; returns the page's path. A result that carries its
    own ``provenance`` (a benchmark records it when it starts, so a page written later from its
    JSON names the command and commit that measured it) keeps it. The files are named by
    :func:`results_stem`."""
    out.mkdir(parents=True, exist_ok=True)
    data = {**result, "provenance": result.get("provenance") or provenance(argv)}
    stem = results_stem(data["provenance"]["date"], kind)
    kind = stem[len(data["provenance"]["date"]) + 1:]
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    for name, blob in (extra_files or {}).items():
        (out / f"{stem}{name}").write_bytes(blob)
    p = data["provenance"]
    head = (f"# {kind} ({p['date']})\n\n"
            f"- command: `{p['command']}`\n- commit: `{p['commit'] or 'unknown'}`\n- machine: {p['machine']}\n"
            f"- data: [{stem}.json]({stem}.json)\n\n")
    page = out / f"{stem}.md"
    page.write_text(head + render(data).rstrip() + "\n")
    return page


def add_report_options(ap: argparse.ArgumentParser, kind: str) -> None:
    """A benchmark's ``--report`` (write ``docs/results/<date>-<kind>.{json,md}`` when it ends) and
    ``--report-from JSON`` (write that page from a saved result; nothing is run)."""
    ap.add_argument("--report", action="store_true", help=f"write docs/results/<date>-{kind}.{{json,md}}")
    ap.add_argument("--report-from", type=Path, default=None, metavar="JSON",
                    help="write the results page from a saved result (a results JSON or a log of this script) and stop")


def report_from(path: Path | None, kind: str, bench: str, render: Callable[[dict[str, Any]], str]) -> bool:
    """``--report-from``: with a ``path``, write ``kind``'s page from the result saved there (of
    ``bench/<bench>.py``), say where, and return True (the benchmark stops); else False."""
    if path is None:
        return False
    print(f"results page {write_results(kind, load_result(path, bench), render)}", flush=True)
    return True


def finish(result: dict[str, Any], kind: str, render: Callable[[dict[str, Any]], str], *, report: bool) -> None:
    """A benchmark's end: with ``report`` (``--report``, never for a smoke run) the results page,
    then the result as the LAST line of output, one JSON object."""
    if report:
        print(f"results page {write_results(kind, result, render)}", flush=True)
    print(json.dumps(result), flush=True)
