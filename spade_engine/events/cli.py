"""`spade-engine events ...`: inspect, count, export, import a run's log, and print its schemas."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.text import Text

from ..cli_app import command_group
from ..cli_common import (
    BackendOpt,
    BootstrapOpt,
    DataDirOpt,
    RunArg,
    handle_errors,
    locate,
    new_run_place,
    open_run,
)
from ..errors import SpadeError
from .catalogue import EVENT_TYPES
from .schema import json_schemas
from ..textout import is_terminal, json_line_bytes, json_text, note, print_json, say, styled, table
from .importer import RunImported, apply_import
from .jsonl import DEFAULT_MAX_EVENT_BYTES, ImportFailed, export_jsonl, parse_jsonl
from .log import Record
from .store import DataDir, resolve_data_dir

app = command_group(help="Inspect and move a run's event log.", no_args_is_help=True)


def summarize(rec: Record) -> str:
    """A one-line human summary of an event's payload (escape it before printing: skills, hints
    and error kinds are model-written)."""
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
            f"regret={_num(p.get('regret'), '.3f')} win_plain={_num(p.get('win_rate_plain'), '.2f')} "
            f"designer_reward={_num(p.get('designer_reward'), '.3f')}"
        )
    if t == "HintWritten":
        hint = str(p.get("hint", ""))
        return hint[:60] + ("..." if len(hint) > 60 else "")
    if t == "PolicyUpdated":
        return f"version={p.get('version')} step={p.get('step')}"
    if t == "PolicyLoaded":
        return f"version={p.get('version')} as {p.get('served_as')} in {_num(p.get('seconds'), '.2f')}s by {p.get('producer_role')}"
    if t == "RunStopped":
        return f"reason={p.get('reason')}"
    if t == "RunStarted":
        policy = p.get("policy")
        kind = policy.get("kind", "") if isinstance(policy, dict) else ""
        return f"seed={p.get('seed')} policy={kind} resumed={p.get('resumed')}"
    if t == "EvaluationCompleted":
        return f"{p.get('suite')}/{p.get('task')} accuracy={_num(p.get('accuracy'), '.3f')} items={p.get('items')}"
    return ""


def _num(v: object, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


def event_line(rec: Record) -> Text:
    """One line per event: position, time, type, key, summary; every value escaped."""
    e = rec.envelope
    return styled(
        (f"{rec.partition}:{rec.offset:>7}", "dim"), " ", (e.occurred_at, "dim"), " ", (f"{e.type:<21}", "bold cyan"), " ",
        (f"{e.key:<24}", "magenta"), " ", (summarize(rec), None),
    )


def _print_record(rec: Record, as_json: bool) -> None:
    if as_json:  # the stored bytes, with U+2028/U+2029/U+0085 and C1 controls as \u escapes
        sys.stdout.buffer.write(json_line_bytes(rec.raw) + b"\n")
        sys.stdout.flush()
        return
    say(event_line(rec))


def check_types(types: list[str] | None) -> set[str]:
    """The ``--type`` filter, each name a known event type."""
    wanted = set(types or [])
    unknown = sorted(wanted - set(EVENT_TYPES))
    if unknown:
        names = ", ".join(repr(t) for t in unknown)
        raise SpadeError(f"unknown event type {names}; known: {', '.join(EVENT_TYPES)}")
    return wanted


@app.command("tail")
@handle_errors
def tail(
    run: RunArg = None,
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many of the last events to show first.")] = 20,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events (Ctrl-C stops).")] = False,
    type_: Annotated[Optional[list[str]], typer.Option("--type", "-t", help="Only these event types.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the canonical JSON envelopes, one per line.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Show the last events of a run, one line each, and with --follow keep showing new ones."""
    wanted = check_types(type_)
    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    try:
        end = log.end_cursor()
        start = {p: max(0, o - lines) for p, o in end.items()} if not wanted else {}
        recent: list[Record] = []
        for rec in log.read(start):
            if wanted and rec.envelope.type not in wanted:
                continue
            recent.append(rec)
        if len(end) > 1:
            # several partitions (Kafka) are read one after another: the newest events of the run
            # are the latest by time across them (stable: each partition keeps its own order)
            recent.sort(key=lambda r: r.envelope.occurred_at)
        for rec in recent[-lines:] if lines > 0 else []:
            _print_record(rec, as_json)
        if follow:
            try:
                for rec in log.follow(end):
                    if not wanted or rec.envelope.type in wanted:
                        _print_record(rec, as_json)
            except KeyboardInterrupt:
                pass
    finally:
        log.close()


@app.command("count")
@handle_errors
def count(
    run: RunArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object instead of a table.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Count a run's events by type (a table on a terminal, TSV in a pipe). On Kafka every record
    is decoded: records that do not decode are not counted, and are reported."""
    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    try:
        counts, bad = log.scan_counts()
    finally:
        log.close()
    if bad:
        p, o, reason = bad[0]
        more = f"; and {len(bad) - 1} more" if len(bad) > 1 else ""
        note(styled(
            ("warning:", "yellow"), " ",
            (f"{len(bad)} record(s) of run {run_id} do not decode and are not counted (kept as dead letters: "
             f"spade-engine events dead-letters {run_id}); partition {p} offset {o}: {reason}{more}", None),
        ))
    if as_json:
        doc: dict[str, object] = {"run_id": run_id, "counts": counts, "total": sum(counts.values())}
        if bad is not None:  # a backend that scanned its records
            doc["undecodable"] = len(bad)
        print_json(doc, sort_keys=True)
        return
    rows = [(t, counts.get(t, 0)) for t in sorted(set(EVENT_TYPES) | set(counts))]
    table(["type", "count"], [*rows, ("total", sum(counts.values()))], title=f"events in {run_id}", right=["count"])


@app.command("export")
@handle_errors
def export(
    run: RunArg = None,
    out_file: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write here instead of standard output.")] = None,
    salvage: Annotated[bool, typer.Option("--salvage", help="Read a damaged embedded log (truncated, corrupt) page by page: export every intact event and say what was lost.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Export a run as JSON Lines (one canonical envelope per line) to stdout or --out FILE.

    With --salvage, a log SQLite refuses (a truncated copy) is read from its pages: the intact
    events are exported in log order and a summary on stderr says which offsets were lost; the
    file itself is not changed. Import the result into a fresh data directory to go on."""
    if salvage:
        _salvage(run, out_file, data_dir, backend, bootstrap)
        return
    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
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
    note(f"exported {n} events of {run_id}")


def _salvage(run: str | None, out_file: Path | None, data_dir: Path | None, backend: str | None, bootstrap: str | None) -> None:
    from .backends import log_backend
    from .sqlite.salvage import salvage_log

    root = resolve_data_dir(data_dir)
    where = locate(run, root, backend, bootstrap)
    if not log_backend(where.backend).in_data_dir:
        raise SpadeError(f"--salvage reads an embedded log file; run {where.run_id} lives on {where.backend}: "
                         "`events export` reads it as it is")
    report = salvage_log(DataDir(root).log_path(where.run_id), where.run_id)

    def write(fh: Any) -> None:
        for rec in report.records:
            fh.write(rec.raw)
            fh.write(b"\n")

    if out_file is None:
        write(sys.stdout.buffer)
        sys.stdout.buffer.flush()
    else:
        tmp = out_file.with_name(out_file.name + ".part")
        with open(tmp, "wb") as fh:
            write(fh)
        tmp.replace(out_file)
    note(f"salvaged {where.run_id}: {report.summary()}")


@app.command("import")
@handle_errors
def import_(
    file: Annotated[str, typer.Argument(help="JSON Lines file to import, or - for standard input.")],
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Import the valid lines; count the bad ones and keep them as dead letters.")
    ] = False,
    max_event_bytes: Annotated[
        int, typer.Option("--max-event-bytes", envvar="SPADE_IMPORT_MAX_EVENT_BYTES", min=1,
                          help="Refuse a line (one event) longer than this many bytes.")
    ] = DEFAULT_MAX_EVENT_BYTES,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Import JSON Lines envelopes into their runs' logs: every run of the file or none (unless
    --skip-invalid).

    Events already in the log (same event_id, same content) are skipped, so importing twice is
    harmless; the same event_id with other content is an error naming the line.
    """
    b, boot = new_run_place(backend, bootstrap)
    root = resolve_data_dir(data_dir)
    if file == "-":
        report = parse_jsonl(sys.stdin.buffer, max_event_bytes=max_event_bytes)
    else:
        path = Path(file)
        if not path.is_file():
            raise SpadeError(f"{path} does not exist" if not path.exists() else f"{path} is not a file")
        with open(path, "rb") as fh:
            report = parse_jsonl(fh, max_event_bytes=max_event_bytes)
    if report.bad and not skip_invalid:
        for bad in report.bad[1:20]:  # the first one is the error line
            note(styled(("line", "red"), " ", (f"{bad.line_no}: {bad.reason}", None)))
        raise ImportFailed(report)

    def done(r: RunImported) -> None:
        created = " (new run)" if r.created else ""
        note(f"run {r.run_id}{created}: {r.new} new events ({r.events - r.new} already present)")

    apply_import(
        report, backend=b, data_dir=root, bootstrap=boot, skip_invalid=skip_invalid,
        source=str(file), on_run=done,
    )
    if report.repeats:
        note(f"{report.repeats} line(s) repeat an earlier line exactly (imported once)")
    if report.bad:
        note(styled((f"skipped {len(report.bad)} invalid line(s)", "yellow"), " (kept as dead letters)"))


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


def _bytes_fields(name: str, value: bytes | None) -> dict[str, object]:
    """``{name: text}`` for UTF-8 bytes, else ``{name + "_base64": ...}`` (so nothing is lost)."""
    if value is None:
        return {name: None}
    try:
        return {name: value.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_base64": base64.b64encode(value).decode("ascii")}


def _preview(value: bytes | None, n: int | None) -> str:
    if value is None:
        return "-"
    text = value.decode("utf-8", errors="backslashreplace")
    return text if n is None or len(text) <= n else text[:n] + "..."


@app.command("dead-letters")
@handle_errors
def dead_letters(
    run: RunArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per dead letter and line.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """List input that could not be decoded, with the reason it was rejected and where it came
    from. On Kafka the run's topic is scanned first, so every undecodable record is listed (from
    the dead-letter topic, with its original record key)."""
    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    try:
        log.scan_counts()  # where records are decoded on read, this sends the undecodable ones to the dead letters
        letters = log.dead_letters()
    finally:
        log.close()
    if as_json:
        for d in letters:
            doc = {"received_at": d.received_at, "source": d.source, "reason": d.reason,
                   **_bytes_fields("key", d.key), **_bytes_fields("raw", d.raw)}
            sys.stdout.write(json_text(doc) + "\n")
        sys.stdout.flush()
    else:
        width = 80 if is_terminal() else None
        table(
            ["received_at", "source", "key", "reason", "raw"],
            [(d.received_at, d.source, _preview(d.key, width), d.reason, _preview(d.raw, width)) for d in letters],
        )
    note(f"{len(letters)} dead letter(s) in {run_id}")
