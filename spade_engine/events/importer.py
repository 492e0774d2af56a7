"""Applying a parsed JSON Lines file (:func:`~.jsonl.parse_jsonl`) to the run logs: every run of
the file, or none.

Order of work, so that bad input never leaves anything behind:

1. every line is checked (:mod:`.jsonl`); a bad line stops the import before any log is opened
   (unless ``skip_invalid``);
2. every run the file names is looked up: an existing run's log is opened (never created) and
   every event id of the file that it already holds is compared with the stored event. The same
   id with other content is an error naming the line and the run (with ``skip_invalid``, that line
   is a bad line like any other);
3. only then are logs written: runs this import creates first, existing runs last. If a write
   fails (disk full, broker gone), the runs this import created are removed again; events
   already appended to an existing run stay (a log is append-only), and the error names those
   runs: importing the same file again finishes the job, because appends are idempotent on
   ``event_id``.

With ``skip_invalid`` each bad line is kept as a dead letter in the run it names: a run this
import writes, or an existing run of the data directory (opened for its dead letters only). A
line whose run id cannot be read (not JSON, no importable ``run_id``), or that names a run which
neither exists nor gets a valid event from the file, goes to the file's first run (the run of
its first valid line), its reason saying why it is there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .backends import log_backend
from .codec import decode_envelope, encode_envelope
from .envelope import Envelope
from .errors import EventError, MalformedEvent
from .jsonl import BadLine, ImportFailed, ImportReport
from .log import EventLog

__all__ = ["ImportConflict", "ImportWriteFailed", "RunImported", "apply_import"]


class ImportConflict(EventError):
    """An event id of the file is already in its run's log with other content."""


class ImportWriteFailed(EventError):
    """Writing the imported events failed part way (see the module docstring for what is left)."""


@dataclass(frozen=True)
class RunImported:
    run_id: str
    events: int
    new: int
    created: bool


@dataclass
class _Target:
    run_id: str
    items: list[tuple[Envelope, bytes]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    exists: bool = False
    log: EventLog | None = None


def _stored_conflicts(log: EventLog, target: _Target) -> list[tuple[int, str]]:
    """``(line, event_id)`` of the target's events the log holds with other content."""
    wanted = {env.event_id: i for i, (env, _) in enumerate(target.items) if log.has_event(env.event_id)}
    if not wanted:
        return []
    found: list[tuple[int, str]] = []
    for rec in log.read():
        try:
            stored = rec.envelope
        except MalformedEvent:
            continue
        i = wanted.pop(stored.event_id, None)
        if i is None:
            continue
        if encode_envelope(stored) != encode_envelope(decode_envelope(target.items[i][1])):
            found.append((target.lines[i], stored.event_id))
        if not wanted:
            break
    return found


def apply_import(
    report: ImportReport,
    *,
    backend: str,
    data_dir: Path,
    bootstrap: str | None,
    skip_invalid: bool,
    source: str,
    on_run: Callable[[RunImported], None] | None = None,
) -> list[RunImported]:
    """Write the good events of ``report`` into their runs' logs, all runs or none (see the
    module docstring). Raises :class:`~.jsonl.ImportFailed` for bad lines (without
    ``skip_invalid``), :class:`ImportConflict`, or :class:`ImportWriteFailed`."""
    if report.bad and not skip_invalid:
        raise ImportFailed(report)
    be = log_backend(backend)
    targets: dict[str, _Target] = {}
    for (env, raw), line_no in zip(report.good, report.line_nos):
        t = targets.setdefault(env.run_id, _Target(env.run_id))
        t.items.append((env, raw))
        t.lines.append(line_no)
    existing = set(be.list_runs(data_dir=data_dir, bootstrap=bootstrap)) if targets else set()
    opened: list[EventLog] = []
    try:
        conflicts: list[tuple[int, str, str]] = []
        for t in targets.values():
            t.exists = t.run_id in existing
            if t.exists:
                t.log = be.open(t.run_id, data_dir=data_dir, bootstrap=bootstrap, create=False, partitions=3)
                opened.append(t.log)
                conflicts += [(line, eid, t.run_id) for line, eid in _stored_conflicts(t.log, t)]
        if conflicts:
            conflicts.sort()
            if not skip_invalid:
                line, eid, run_id = conflicts[0]
                more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
                raise ImportConflict(
                    f"line {line}: event_id {eid} is already in run {run_id} with different content{more}; "
                    "nothing was imported"
                )
            bad_lines = {line for line, _, _ in conflicts}
            for line, eid, run_id in conflicts:
                t = targets[run_id]
                i = t.lines.index(line)
                report.bad.append(
                    BadLine(line, f"event_id {eid} is already in run {run_id} with different content", t.items[i][1], run_id)
                )
            for t in targets.values():
                keep = [i for i, line in enumerate(t.lines) if line not in bad_lines]
                t.items = [t.items[i] for i in keep]
                t.lines = [t.lines[i] for i in keep]
            report.bad.sort(key=lambda b: b.line_no)
        if not any(t.items for t in targets.values()):
            raise EventError("no valid events to import")
        return _write(targets, be, data_dir, bootstrap, report, source, on_run, existing)
    finally:
        for log in opened:
            try:
                log.close()
            except Exception:  # noqa: BLE001 - closing must not hide the import's own error
                pass


def dead_letter_runs(report: ImportReport, written: list[str], existing: set[str]) -> dict[str, list[tuple[BadLine, str]]]:
    """``{run_id: [(bad line, its dead letter's reason)]}``: each bad line goes to the run it
    names when this import writes that run or it exists, else to ``written[0]`` (the file's first
    run), saying why (see the module docstring)."""
    out: dict[str, list[tuple[BadLine, str]]] = {}
    for bad in report.bad:
        reason = f"import line {bad.line_no}: {bad.reason}"
        run_id = bad.run_id
        if run_id is None or (run_id not in written and run_id not in existing):
            why = "its run id cannot be read" if run_id is None else f"it names run {run_id}, which this import does not write"
            run_id, reason = written[0], f"{reason} (kept in the file's first run: {why})"
        out.setdefault(run_id, []).append((bad, reason))
    return out


def _write(targets, be, data_dir, bootstrap, report, source, on_run, existing) -> list[RunImported]:
    order = [t for t in targets.values() if t.items and not t.exists] + [t for t in targets.values() if t.items and t.exists]
    letters = dead_letter_runs(report, [t.run_id for t in targets.values() if t.items], existing)
    created: list[str] = []
    appended: list[str] = []
    done: list[RunImported] = []
    current = ""
    try:
        for t in order:
            current = t.run_id
            log = t.log
            if log is None:
                created.append(t.run_id)
                log = t.log = be.open(t.run_id, data_dir=data_dir, bootstrap=bootstrap, create=True, partitions=3)
            try:
                new = log.append_raw(t.items)
                for bad, reason in letters.pop(t.run_id, []):
                    log.dead_letter(bad.raw, reason, source=source)
            finally:
                if not t.exists:
                    log.close()
                    t.log = None
            if t.exists:
                appended.append(t.run_id)
            done.append(RunImported(t.run_id, len(t.items), new, not t.exists))
        for run_id, bads in letters.items():  # existing runs that only get dead letters
            current = run_id
            log = be.open(run_id, data_dir=data_dir, bootstrap=bootstrap, create=False, partitions=3)
            try:
                for bad, reason in bads:
                    log.dead_letter(bad.raw, reason, source=source)
            finally:
                log.close()
    except Exception as exc:  # noqa: BLE001 - undo, then report in one line
        undone = []
        if be.remove is not None:
            for run_id in created:
                try:
                    be.remove(run_id, data_dir=data_dir, bootstrap=bootstrap)
                    undone.append(run_id)
                except Exception:  # noqa: BLE001
                    pass
        left = [r for r in created if r not in undone]
        what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, EventError) else str(exc)
        parts = [f"importing into run {current} failed: {what}"]
        if undone:
            parts.append(f"the runs this import created were removed ({', '.join(undone)})")
        if left or appended:
            parts.append(
                f"runs {', '.join(left + appended)} hold part of the file: import it again to finish "
                "(events already present are skipped)"
            )
        else:
            parts.append("nothing was imported")
        raise ImportWriteFailed("; ".join(parts)) from None
    if on_run is not None:
        for r in done:
            on_run(r)
    return done
