"""Moving a run to and from JSON Lines: one canonical envelope per line.

Export writes the stored bytes of each event, so export -> import -> export is byte-for-byte
identical. Import is all-or-nothing by default: every line is checked first (valid JSON, all
envelope fields, a known event type whose payload decodes) and any bad line is reported with its
line number; with ``skip_invalid`` the good lines are imported and the bad ones counted and kept in
the dead-letter store.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from .codec import decode_envelope, encode_envelope
from .envelope import Envelope
from .errors import EventError, MalformedEvent
from .log import EventLog

__all__ = ["export_jsonl", "parse_jsonl", "ImportReport", "ImportFailed", "BadLine"]


@dataclass(frozen=True)
class BadLine:
    line_no: int
    reason: str
    raw: bytes


@dataclass
class ImportReport:
    """What an import found: good envelopes (with their bytes) grouped by run, and bad lines."""

    good: list[tuple[Envelope, bytes]] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)

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


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    for i, line in enumerate(stream, start=1):
        line = line.rstrip(b"\r\n")
        if line.strip():
            yield i, line


def parse_jsonl(lines: Iterable[tuple[int, bytes]] | BinaryIO) -> ImportReport:
    """Check every line; keep the original bytes of canonical lines (re-encode the others)."""
    if hasattr(lines, "read"):
        lines = _lines(lines)  # type: ignore[arg-type]
    report = ImportReport()
    for line_no, raw in lines:  # type: ignore[union-attr]
        try:
            env = decode_envelope(raw)
            env.event()  # known type, decodable payload (upcast if old)
        except (MalformedEvent, EventError) as exc:
            report.bad.append(BadLine(line_no, str(exc), raw))
            continue
        canonical = encode_envelope(env)
        report.good.append((env, raw if raw == canonical else canonical))
    return report
