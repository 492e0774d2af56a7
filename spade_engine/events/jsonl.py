"""Moving a run to and from JSON Lines: one canonical envelope per line.

Export writes the stored bytes of each event, so export -> import -> export is byte-for-byte
identical. Import is all-or-nothing by default: every line is checked first (at most
``max_event_bytes`` long, valid JSON however deeply nested, all envelope fields, an importable
run id, a known event type whose payload decodes, an event id not given earlier in the file with
other content) and any bad line is reported with its line number; with ``skip_invalid`` the good
lines are imported and the bad ones counted and kept in the dead-letter store (of the run each
names, see :mod:`.importer`). Applying a parsed file to the logs, all runs or none, is
:mod:`.importer`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from .codec import decode_envelope, encode_envelope
from .envelope import Envelope
from .errors import EventError
from .log import EventLog
from .sizes import MAX_EVENT_BYTES

__all__ = [
    "export_jsonl", "parse_jsonl", "ImportReport", "ImportFailed", "BadLine", "DEFAULT_MAX_EVENT_BYTES",
    "check_run_id", "RUN_ID_RULE", "run_id_of",
]

#: the largest line (one event) an import accepts unless told otherwise (``--max-event-bytes``):
#: what every backend stores (:data:`~spade_engine.events.sizes.MAX_EVENT_BYTES`), so a run the
#: engine wrote (older engines wrote plays of tens of megabytes) exports and imports back as it is
DEFAULT_MAX_EVENT_BYTES = MAX_EVENT_BYTES
#: how much of a rejected line is kept as its dead letter
_KEPT_BYTES = 4096
#: a run id an import may create: it names a directory and a Kafka topic
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
RUN_ID_RULE = "1-200 letters, digits, '.', '_' or '-', not starting with '.'"
_EVENT_ID = re.compile(r"[\x21-\x7e]{1,128}")
_MAX_KEY_CHARS = 1024


def check_run_id(run_id: str) -> str | None:
    """Why ``run_id`` cannot be imported (``None`` if it can)."""
    if _RUN_ID.fullmatch(run_id) and not run_id.endswith(".dlq"):
        return None
    shown = run_id if len(run_id) <= 60 else f"{run_id[:40]}... ({len(run_id)} characters)"
    return f"run id {shown!r} is not importable ({RUN_ID_RULE})"


@dataclass(frozen=True)
class BadLine:
    line_no: int
    reason: str
    raw: bytes
    #: the (importable) run id the line names, when it can be read; where its dead letter goes
    run_id: str | None = None


_RUN_ID_FIELD = re.compile(rb'"run_id"\s*:\s*"([A-Za-z0-9._-]{1,200})"')


def run_id_of(raw: bytes) -> str | None:
    """The importable run id a bad line names, if one can be read: its ``run_id`` field when the
    line is a JSON object, else the first ``"run_id": "..."`` in its bytes (a cut or broken line)."""
    found: object = None
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict):
            found = doc.get("run_id")
    except (ValueError, RecursionError, UnicodeDecodeError):
        m = _RUN_ID_FIELD.search(raw)
        found = m.group(1).decode("ascii") if m else None
    if isinstance(found, str) and check_run_id(found) is None:
        return found
    return None


@dataclass
class ImportReport:
    """What an import found: good envelopes (with their bytes) grouped by run, and bad lines."""

    good: list[tuple[Envelope, bytes]] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    #: the line number of each good envelope (same order as ``good``)
    line_nos: list[int] = field(default_factory=list)
    #: lines that repeat an earlier line's event exactly (imported once)
    repeats: int = 0

    @property
    def run_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for env, _ in self.good:
            seen.setdefault(env.run_id, None)
        return list(seen)


class ImportFailed(EventError):
    """Import stopped: at least one line is invalid and ``--skip-invalid`` was not given."""

    def __init__(self, report: ImportReport):
        self.report = report
        first = report.bad[0]
        more = f" (and {len(report.bad) - 1} more bad line(s))" if len(report.bad) > 1 else ""
        super().__init__(
            f"line {first.line_no}: {first.reason}{more}; nothing was imported "
            "(use --skip-invalid to import the valid lines)"
        )


def export_jsonl(log: EventLog, out: BinaryIO) -> int:
    """Write every event of ``log`` as one line; return the count."""
    n = 0
    for rec in log.read():
        out.write(rec.raw)
        out.write(b"\n")
        n += 1
    return n


def _lines(stream: BinaryIO, max_bytes: int) -> Iterator[tuple[int, bytes, str | None]]:
    """``(line number, bytes, error)`` per non-blank line; a line longer than ``max_bytes`` is
    read past (never held whole) and comes with an error and only its first bytes."""
    line_no = 0
    while True:
        chunk = stream.readline(max_bytes + 2)
        if not chunk:
            return
        line_no += 1
        if not chunk.endswith(b"\n") and len(chunk) > max_bytes:
            size = len(chunk)
            while True:  # skip the rest of the oversized line, never holding it
                more = stream.readline(1 << 20)
                size += len(more)
                if not more or more.endswith(b"\n"):
                    size -= len(more) - len(more.rstrip(b"\r\n"))
                    break
            yield line_no, chunk[:_KEPT_BYTES], (
                f"event of {size:,} bytes is over the limit of {max_bytes:,} bytes (--max-event-bytes)"
            )
            continue
        line = chunk.rstrip(b"\r\n")
        if len(line) > max_bytes:
            yield line_no, line[:_KEPT_BYTES], (
                f"event of {len(line):,} bytes is over the limit of {max_bytes:,} bytes (--max-event-bytes)"
            )
        elif line.strip():
            yield line_no, line, None


def _check(raw: bytes) -> Envelope:
    """The envelope of one line, or an :class:`EventError` saying what is wrong with it."""
    try:
        env = decode_envelope(raw)
    except RecursionError:
        raise EventError("not valid JSON: nested too deeply") from None
    problem = check_run_id(env.run_id)
    if problem:
        raise EventError(problem)
    if not _EVENT_ID.fullmatch(env.event_id):
        raise EventError(f"event_id {env.event_id[:60]!r} is not 1-128 printable ASCII characters without spaces")
    if len(env.key) > _MAX_KEY_CHARS:
        raise EventError(f"key of {len(env.key)} characters is over the limit of {_MAX_KEY_CHARS}")
    try:
        env.event()  # known type, decodable payload (upcast if old)
    except RecursionError:
        raise EventError(f"{env.type} payload nested too deeply") from None
    return env


def parse_jsonl(
    lines: Iterable[tuple[int, bytes]] | BinaryIO, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> ImportReport:
    """Check every line; keep the original bytes of canonical lines (re-encode the others).

    Never raises for bad input: each bad line is a :class:`BadLine` with its reason, including
    a second line with an earlier line's ``event_id`` and other content (both line numbers named).
    """
    if hasattr(lines, "read"):
        items: Iterable[tuple[int, bytes, str | None]] = _lines(lines, max_event_bytes)  # type: ignore[arg-type]
    else:
        items = (
            (n, raw, f"event of {len(raw):,} bytes is over the limit of {max_event_bytes:,} bytes (--max-event-bytes)"
             if len(raw) > max_event_bytes else None)
            for n, raw in lines
        )
    report = ImportReport()
    first: dict[str, tuple[int, bytes]] = {}
    for line_no, raw, problem in items:
        if problem is not None:
            report.bad.append(BadLine(line_no, problem, raw, run_id_of(raw)))
            continue
        try:
            env = _check(raw)
            canonical = encode_envelope(env)
        except EventError as exc:
            report.bad.append(BadLine(line_no, str(exc), raw[:_KEPT_BYTES], run_id_of(raw)))
            continue
        except Exception as exc:  # noqa: BLE001 - hostile input must never end in a traceback
            report.bad.append(BadLine(line_no, f"cannot decode: {type(exc).__name__}: {exc}", raw[:_KEPT_BYTES], run_id_of(raw)))
            continue
        earlier = first.get(env.event_id)
        if earlier is not None:
            if earlier[1] == canonical:
                report.repeats += 1
            else:
                report.bad.append(BadLine(
                    line_no, f"event_id {env.event_id} is also on line {earlier[0]}, with different content", raw[:_KEPT_BYTES],
                    env.run_id,
                ))
            continue
        first[env.event_id] = (line_no, canonical)
        report.good.append((env, raw if raw == canonical else canonical))
        report.line_nos.append(line_no)
    return report
