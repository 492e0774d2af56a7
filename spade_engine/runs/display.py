"""What a run looks like on a terminal or in a pipe: the stats table, the live panel's lines, a
progress line, durations and ETAs, and the commands to run next (used by ``start`` and ``status``)."""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..cli_common import out
from ..textout import is_terminal, plain, tsv_row

__all__ = [
    "render_stats", "print_stats", "stats_rows", "progress_line", "panel_lines", "eta", "duration", "next_commands",
    "stopped_summary",
]


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _band(stats: dict[str, Any]) -> str:
    """"in band [LOW, HIGH]: SHARE" with the band the statistics were computed for."""
    share = stats["band_share"]
    low, high = stats["band"]
    return f"in band [{low:g}, {high:g}]: " + ("-" if share is None else f"{share:.0%}")


def _accepted(stats: Mapping[str, Any]) -> str:
    """"N accepted" for the designed environments, with the accepted seeds apart (a seed archive
    is validated too, and its 56 seeds would hide a designer that wrote none)."""
    seeds = stats["accepted_seeds"]
    designed = stats["accepted"] - seeds
    return f"{designed} accepted" + (f" (+{seeds} seeds)" if seeds else "")


def stopped_summary(stats: Mapping[str, object], reason: str, trained: str = "") -> str:
    """What follows "stopped" in a stopped run's one-line summary: the reason, its environments,
    how many were accepted, its plays and mean regret, then ``trained`` (the policy updates)."""
    return (f" ({reason}): {stats['roots']} environments, {_accepted(stats)}, {stats['plays']} plays, "
            f"mean regret {_fmt(stats['mean_regret'])}{trained}.")


def stats_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    """The head of a run summary as (label, value) rows (values hold model-written skill and
    error-kind names: print them escaped)."""
    kinds = ", ".join(f"{k} {v}" for k, v in stats["invalid_kinds"].items()) or "-"
    return [
        ("proposals", f"{stats['proposals']} ({stats['roots']} new, {stats['repairs']} repairs)"),
        ("validity", f"{stats['valid']} valid / {stats['invalid']} invalid  {kinds}"),
        ("novelty", f"{_accepted(stats)}, {stats['duplicates']} duplicates, mean novelty {_fmt(stats['mean_novelty'])}"),
        ("plays", f"{stats['plays']} plays{_replays(stats)}, {stats['estimated']} environments estimated"),
        ("regret", f"mean regret {_fmt(stats['mean_regret'])}, mean win rate {_fmt(stats['mean_win_rate'], '.2f')}, "
                   f"{_band(stats)}"),
        ("policy", str(stats["policy_version"])),
    ]


def _replays(stats: dict[str, Any]) -> str:
    return f" ({stats['replays']} level replays)" if stats.get("replays") else ""


_SKILL_COLUMNS = ("skill", "envs", "estimated", "difficulty", "win rate", "regret")


def _skill_rows(stats: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (name, str(s["envs"]), str(s["estimated"]), _fmt(s["last_difficulty"], ".2f"), _fmt(s["mean_win_rate"], ".2f"),
         _fmt(s["mean_regret"]))
        for name, s in stats["skills"].items()
    ]


def render_stats(stats: dict[str, Any], *, title: str = "", extra: str | Sequence[str] = "") -> Any:
    """A rich renderable summarising a run's statistics (``RunState.stats()``); every value is
    plain text (skill names and error kinds come from the designer). ``extra``: lines under the
    tables (each shown escaped, on its own line)."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for label, value in stats_rows(stats):
        head.add_row(label, plain(value))
    skills = Table(show_edge=False, box=None, header_style="bold cyan")
    for col in _SKILL_COLUMNS:
        skills.add_column(col, justify="right" if col != "skill" else "left")
    for row in _skill_rows(stats):
        skills.add_row(*(plain(c) for c in row))
    parts: list[Any] = [head]
    if stats["skills"]:
        parts += [Text(""), skills]
    for line in [extra] if isinstance(extra, str) else extra:
        if line:
            parts.append(plain(line, "dim"))
    return Panel(Group(*parts), title=plain(title or stats["run_id"]), border_style="cyan")


def print_stats(stats: dict[str, Any], *, title: str = "", extra: str = "") -> None:
    """A run summary on stdout: the panel on a terminal; in a pipe or file TSV: ``run``, the head
    rows and ``state`` as label/value lines, a blank line, then the per-skill table."""
    if is_terminal():
        out.print(render_stats(stats, title=title, extra=extra))
        return
    lines = [("run", title or stats["run_id"]), *stats_rows(stats)]
    if extra:
        lines.append(("state", extra))
    rows = [tsv_row(r) for r in lines]
    if stats["skills"]:
        rows += ["", tsv_row(_SKILL_COLUMNS), *(tsv_row(r) for r in _skill_rows(stats))]
    sys.stdout.write("\n".join(rows) + "\n")
    sys.stdout.flush()


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta(done: int, bound: int | None, elapsed_s: float, done_at_start: int = 0) -> str:
    """The time left for a bounded run at the pace of the environments made since this start
    (``-`` until one is made, or for an unbounded run)."""
    made = done - done_at_start
    if not bound or made <= 0 or done >= bound:
        return "-" if not bound or done < bound else "0s"
    return duration(elapsed_s / made * (bound - done))


def progress_line(stats: dict[str, Any], elapsed_s: float, bound: int | None, done_at_start: int = 0) -> str:
    """One line of progress for a run without a terminal (``start`` in a pipe or a log file):
    N of M environments, the counts, and for a bounded run the ETA."""
    of = f"/{bound}" if bound else ""
    left = f"; ETA {eta(stats['roots'], bound, elapsed_s, done_at_start)}" if bound else ""
    return (
        f"[{elapsed_s:5.0f}s] {stats['roots']}{of} environments ({stats['proposals']} proposals, {stats['repairs']} repairs): "
        f"{stats['valid']} valid, {stats['invalid']} invalid, {_accepted(stats)}, {stats['duplicates']} duplicates; "
        f"{stats['plays']} plays, {stats['estimated']} estimated; mean regret {_fmt(stats['mean_regret'])}, "
        f"{_band(stats)}{left}"
    )


def panel_lines(stats: dict[str, Any], elapsed_s: float, bound: int | None, *, done_at_start: int = 0, now_doing: str = "",
                timings: str = "") -> list[str]:
    """The live panel's lines under the tables: what the model is doing now, N of M environments
    with the ETA, time and where it went."""
    if bound:
        head = f"{stats['roots']} of {bound} environments, ETA {eta(stats['roots'], bound, elapsed_s, done_at_start)}"
    else:
        head = f"{stats['roots']} environments (unbounded)"
    lines = [f"now: {now_doing}"] if now_doing else []
    lines.append(f"{head}  ·  {duration(elapsed_s)} elapsed" + (f"  ·  {timings}" if timings else "") + "  ·  Ctrl-C stops cleanly")
    return lines


def next_commands(run_id: str, *, reason: str, bound: int | None, data_dir: Path | None) -> list[str]:
    """What to run after ``start`` stopped: resume (with the bound the run had, or a larger one
    once it reached it), and look at the run (status, dashboard, audit, replay)."""
    d = f" -d {data_dir}" if data_dir else ""
    if reason == "max_envs" and bound is not None:
        resume = f"  more:       spade-engine start --run {run_id} --max-envs {bound * 2}{d}   (or --forever)"
    else:
        limit = f" --max-envs {bound}" if bound is not None else " --forever"
        resume = f"  resume:     spade-engine start --run {run_id}{limit}{d}"
    return [
        "next:",
        resume,
        f"  summary:    spade-engine status {run_id}{d}",
        f"  watch:      spade-engine dashboard {run_id}{d}",
        f"  report:     spade-engine audit {run_id}{d}",
        f"  rebuild:    spade-engine replay {run_id} --verify{d}",
    ]
