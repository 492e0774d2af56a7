"""`spade-engine events ...`: inspect, count, export, import a run's log, and print its schemas."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..cli_common import (
    BackendOpt,
    BootstrapOpt,
    DataDirOpt,
    RunArg,
    bootstrap_or_env,
    check_backend,
    console,
    handle_errors,
    open_run,
    out,
)
from ..errors import SpadeError
from .catalogue import EVENT_TYPES
from .schema import json_schemas
from .jsonl import ImportFailed, export_jsonl, parse_jsonl
from .log import Record
from .store import open_event_log, resolve_data_dir

app = typer.Typer(help="Inspect and move a run's event log.", no_args_is_help=True)


def summarize(rec: Record) -> str:
    """A one-line human summary of an event's payload."""
    p = rec.envelope.payload
    t = rec.envelope.type
    if t == "EnvironmentProposed":
        return f"skill={p.get('skill')} difficulty={p.get('difficulty')} attempt={p.get('attempt', 0)}"
    if t == "EnvironmentValidated":
        verdict = "valid" if p.get("valid") else f"invalid ({p.get('error_kind')}: {p.get('failed_check')})"
        nov = p.get("novelty")
        return verdict + (f" novelty={nov:.3f}" if isinstance(nov, (int, float)) else "")
    if t == "RolloutCompleted":
        return f"hinted={p.get('hinted')} reward={p.get('episode_reward')} turns={len(p.get('turns', []))}"
    if t == "RegretEstimated":
        return (
            f"regret={p.get('regret'):.3f} win_plain={p.get('win_rate_plain'):.2f} "
            f"designer_reward={p.get('designer_reward'):.3f}"
        )
    if t == "HintWritten":
        hint = str(p.get("hint", ""))
        return hint[:60] + ("..." if len(hint) > 60 else "")
    if t == "PolicyUpdated":
        return f"version={p.get('version')} step={p.get('step')}"
    if t == "RunStopped":
        return f"reason={p.get('reason')}"
    if t == "RunStarted":
        return f"seed={p.get('seed')} policy={p.get('policy', {}).get('kind', '')} resumed={p.get('resumed')}"
    return ""


def _print_record(rec: Record, as_json: bool) -> None:
    if as_json:
        sys.stdout.buffer.write(rec.raw + b"\n")
        sys.stdout.flush()
        return
    e = rec.envelope
    out.print(
        f"[dim]{rec.partition}:{rec.offset:>7}[/] [dim]{e.occurred_at}[/] [bold cyan]{e.type:<21}[/] "
        f"[magenta]{e.key[:24]:<24}[/] {summarize(rec)}",
        highlight=False,
    )


@app.command("tail")
@handle_errors
def tail(
    run: RunArg = None,
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many of the last events to show first.")] = 20,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events (Ctrl-C stops).")] = False,
    type_: Annotated[Optional[list[str]], typer.Option("--type", "-t", help="Only these event types.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print raw canonical JSON envelopes.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Show the last events of a run, and with --follow keep showing new ones."""
    run_id, log = open_run(run, data_dir, backend, bootstrap)
    wanted = set(type_ or [])
    end = log.end_cursor()
    start = {p: max(0, o - lines) for p, o in end.items()} if not wanted else {}
    recent: list[Record] = []
    for rec in log.read(start):
        if wanted and rec.envelope.type not in wanted:
            continue
        recent.append(rec)
    for rec in recent[-lines:] if lines > 0 else []:
        _print_record(rec, as_json)
    if follow:
        try:
            for rec in log.follow(end):
                if not wanted or rec.envelope.type in wanted:
                    _print_record(rec, as_json)
        except KeyboardInterrupt:
            pass
    log.close()


@app.command("count")
@handle_errors
def count(
    run: RunArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object instead of a table.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Count a run's events by type."""
    run_id, log = open_run(run, data_dir, backend, bootstrap)
    counts = log.count_by_type()
    log.close()
    if as_json:
        print(json.dumps({"run_id": run_id, "counts": counts, "total": sum(counts.values())}, sort_keys=True))
        return
    table = Table(title=f"events in {run_id}")
    table.add_column("type")
    table.add_column("count", justify="right")
    for t in sorted(set(EVENT_TYPES) | set(counts)):
        table.add_row(t, str(counts.get(t, 0)))
    table.add_row("[bold]total[/]", f"[bold]{sum(counts.values())}[/]")
    out.print(table)


@app.command("export")
@handle_errors
def export(
    run: RunArg = None,
    out_file: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here instead of standard output.")] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Export a run as JSON Lines (one canonical envelope per line) to stdout or --out FILE."""
    run_id, log = open_run(run, data_dir, backend, bootstrap)
    try:
        if out_file is None:
            n = export_jsonl(log, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            tmp = out_file.with_name(out_file.name + ".part")
            with open(tmp, "wb") as fh:
                n = export_jsonl(log, fh)
            tmp.replace(out_file)
    finally:
        log.close()
    console.print(f"exported {n} events of {run_id}", highlight=False)


@app.command("import")
@handle_errors
def import_(
    file: Annotated[str, typer.Argument(help="JSON Lines file to import, or - for standard input.")],
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the valid lines; count the bad ones and keep them as dead letters.")
    ] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Import JSON Lines envelopes into their run's log (all-or-nothing unless --skip-invalid).

    Events already in the log (same event_id) are skipped, so importing twice is harmless.
    """
    b = check_backend(backend)
    if file == "-":
        report = parse_jsonl(sys.stdin.buffer)
    else:
        path = Path(file)
        if not path.exists():
            raise SpadeError(f"{path} does not exist")
        with open(path, "rb") as fh:
            report = parse_jsonl(fh)
    if report.bad and not skip_invalid:
        for bad in report.bad[:20]:
            console.print(f"[red]line {bad.line_no}:[/] {bad.reason}", highlight=False)
        raise ImportFailed(report)
    if not report.good:
        raise SpadeError("no valid events to import")
    root = resolve_data_dir(data_dir)
    total_new = 0
    for run_id in report.run_ids:
        log = open_event_log(run_id, data_dir=root, backend=b, bootstrap=bootstrap_or_env(bootstrap), create=True)
        try:
            items = [(env, raw) for env, raw in report.good if env.run_id == run_id]
            new = log.append_raw(items)
            for bad in report.bad:
                log.dead_letter(bad.raw, f"import line {bad.line_no}: {bad.reason}", source=str(file))
        finally:
            log.close()
        total_new += new
        console.print(f"run {run_id}: {new} new events ({len(items) - new} already present)", highlight=False)
    if report.bad:
        console.print(f"[yellow]skipped {len(report.bad)} invalid line(s)[/] (kept as dead letters)", highlight=False)


@app.command("schema")
@handle_errors
def schema(
    type_: Annotated[Optional[str], typer.Option("--type", "-t", help="Only this event type.")] = None,
) -> None:
    """Print the JSON Schema of every event type (envelope + payload), keyed by type."""
    schemas = json_schemas()
    if type_ is not None:
        if type_ not in schemas:
            raise SpadeError(f"unknown event type {type_!r}; known: {', '.join(schemas)}")
        schemas = {type_: schemas[type_]}
    sys.stdout.write(json.dumps(schemas, indent=2, sort_keys=True) + "\n")


@app.command("dead-letters")
@handle_errors
def dead_letters(
    run: RunArg = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """List input that could not be decoded, with the reason it was rejected."""
    run_id, log = open_run(run, data_dir, backend, bootstrap)
    letters = log.dead_letters()
    log.close()
    for d in letters:
        out.print(f"[dim]{d.received_at}[/] [yellow]{d.reason}[/] {d.raw[:80]!r}", highlight=False)
    console.print(f"{len(letters)} dead letter(s) in {run_id}", highlight=False)


