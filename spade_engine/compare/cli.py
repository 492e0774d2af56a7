"""``spade-engine compare RUN_A RUN_B``: the two runs side by side (:mod:`.summary`), as a table,
``--json``, and ``--html FILE`` (plotly, offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, handle_errors, open_run, out
from ..textout import aside, note, table

__all__ = ["compare_command"]


def _plain(text: object) -> Any:
    from rich.text import Text

    return Text("".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text)))


def _f(v: object, d: int = 3) -> str:
    if v is None:
        return "-"
    return f"{v:.{d}f}" if isinstance(v, float) else str(v)


def _rows(c: Any) -> list[tuple[str, list[str], list[tuple[Any, ...]]]]:
    """The comparison as (title, columns, rows) tables: the runs side by side, then held-out
    accuracy paired on items."""
    a, b = c.a, c.b
    fa, fb, ca, cb = a.frontier, b.frontier, a.compute, b.compute
    run_rows = [
        ("run", a.run_id, b.run_id), ("policy", a.policy, b.policy), ("environment source", a.env_source, b.env_source),
        ("envs (accepted)", f"{ca.environments} ({ca.accepted})", f"{cb.environments} ({cb.accepted})"),
        ("plays", ca.plays, cb.plays), ("policy updates", ca.updates, cb.updates),
        ("completion tokens", ca.completion_tokens, cb.completion_tokens),
        ("  agent/hint/design", f"{ca.agent_tokens} / {ca.hint_tokens} / {ca.designer_tokens}",
         f"{cb.agent_tokens} / {cb.hint_tokens} / {cb.designer_tokens}"),
        ("tokens trained on", ca.trained_tokens, cb.trained_tokens), ("evaluation tokens", ca.eval_tokens, cb.eval_tokens),
        ("in frontier band", f"{_f(fa.in_band_share)} of {fa.estimated} {list(fa.band)}",
         f"{_f(fb.in_band_share)} of {fb.estimated} {list(fb.band)}"),
    ]
    tables = [("runs", ["", "A", "B"], run_rows)]
    acc = c.accuracy
    if acc is None:
        return tables
    suites = {r.suite for r in acc.tasks}
    one_suite = len(suites) == 1
    title = (f"held-out accuracy ({next(iter(suites))}" if one_suite else "held-out accuracy (") + \
        f", paired on items): A {acc.version_a} vs B {acc.version_b}"
    acc_rows = [
        (r.task if one_suite else r.label, r.items, _f(r.accuracy_a), _f(r.accuracy_b), f"{r.delta:+.3f}",
         f"{r.delta_low:+.2f}..{r.delta_high:+.2f}", f"{r.a_only}/{r.b_only}", _f(r.mcnemar_p))
        for r in acc.tasks
    ]
    acc_rows.append(("mean", sum(r.items for r in acc.tasks), _f(acc.macro_a), _f(acc.macro_b),
                     f"{(acc.macro_b or 0) - (acc.macro_a or 0):+.3f}", "", "", ""))
    return [*tables, (title, ["task", "items", "A", "B", "B-A", "95% CI", "A/B only", "p"], acc_rows)]


def _tables(c: Any) -> list[Any]:
    """The tables of :func:`_rows` as rich tables (a terminal)."""
    from rich import box
    from rich.table import Table

    tables = []
    for title, columns, rows in _rows(c):
        t = Table(title=_plain(title), box=box.SIMPLE_HEAD, show_edge=False)
        for i, col in enumerate(columns):
            first = i == 0
            t.add_column(col, justify="left" if first else "right", overflow="fold", no_wrap=not first,
                         min_width=10 if first and col == "task" else None)
        for row in rows:
            t.add_row(*(_plain(x) for x in row))
        tables.append(t)
    return tables


@handle_errors
def compare_command(
    run_a: Annotated[str, typer.Argument(help="Run A (id or unique prefix).")],
    run_b: Annotated[str, typer.Argument(help="Run B (id or unique prefix).")],
    version_a: Annotated[str, typer.Option("--version-a", help="Policy version of A to compare (latest: the newest A evaluated).")] = "latest",
    version_b: Annotated[str, typer.Option("--version-b", help="Policy version of B to compare (latest: the newest B evaluated).")] = "latest",
    html_out: Annotated[Optional[Path], typer.Option("--html", help="Also write the comparison as a self-contained HTML page (plotly, offline).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Compare two runs: held-out accuracy per task (EvaluationCompleted of each run's chosen
    version, paired on item ids, with the paired difference, its 95% interval and McNemar's test),
    frontier-band occupancy, and compute (completion tokens, plays, policy updates). Runs without
    evaluations are compared on frontier and compute, with a note saying why accuracy is not."""
    from .summary import compare_runs

    _, log_a = open_run(run_a, data_dir, backend, bootstrap, read_only=True)
    try:
        _, log_b = open_run(run_b, data_dir, backend, bootstrap, read_only=True)
        try:
            c = compare_runs(log_a, log_b, version_a=version_a, version_b=version_b)
        finally:
            log_b.close()
    finally:
        log_a.close()
    if html_out is not None:
        from .report import render_html

        html_out.parent.mkdir(parents=True, exist_ok=True)
        tmp = html_out.with_name(html_out.name + ".part")
        tmp.write_text(render_html(c), encoding="utf-8")
        tmp.replace(html_out)
    if as_json:
        print(json.dumps(c.to_dict(), sort_keys=True))
        return
    if not out.is_terminal:  # a pipe or file: one '# title' + TSV block per table, never wrapped
        for title, columns, rows in _rows(c):
            table(columns, rows, title=title, heading=True)
    else:
        for t in _tables(c):
            out.print(t)
    if c.accuracy is None:
        note(f"held-out accuracy not compared: {c.accuracy_note}")
    else:
        aside("A/B only: items right in one run only; p: McNemar's exact test on them (k = 1); 95% CI: of the paired "
              "per-item difference; mean: over tasks")
    if html_out is not None:
        aside(f"wrote {html_out}")
