"""Salvage a damaged embedded log: every intact event of an ``events.sqlite`` that SQLite itself
refuses to read (a truncated copy, a torn file), and what was lost.

SQLite cannot open a database whose b-tree is cut, so this reads the file format directly
(https://www.sqlite.org/fileformat2.html): the page size from the 100-byte header; every complete
page, with the newest committed copy of a page from the write-ahead log (``-wal``) in place of the
main file's; the cells of every table-leaf page, their payloads followed through overflow pages.
A row of the ``events`` table is a record ``(NULL: the rowid seq, event_id TEXT, type TEXT, body
BLOB)``; it counts when its body decodes as an envelope of the run with that event id and type.
Nothing is written to the damaged file.

:func:`salvage_log` returns the events in log order (offset = seq - 1) and a :class:`Salvage`
report: the offsets missing between the first and last event found (lost), the events whose body
was cut off (an overflow page missing), and whether the file ends inside a page (truncated).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..codec import decode_envelope
from ..errors import EventLogError, MalformedEvent
from ..log import Record

__all__ = ["Salvage", "salvage_log"]

_MAGIC = b"SQLite format 3\x00"
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_TABLE_LEAF = 0x0D


@dataclass
class Salvage:
    """What :func:`salvage_log` recovered and what it could not."""

    records: list[Record] = field(default_factory=list)
    #: offsets with no intact event between the first and the last one recovered
    lost: list[int] = field(default_factory=list)
    #: offsets of events whose body was cut off (a missing or damaged overflow page)
    cut: list[int] = field(default_factory=list)
    #: rows that looked like events but did not decode as envelopes of the run
    undecodable: int = 0
    pages: int = 0
    page_size: int = 0
    #: bytes after the last whole page (a file cut inside a page), 0 when it ends on a page edge
    trailing_bytes: int = 0
    wal_pages: int = 0

    @property
    def events(self) -> int:
        return len(self.records)

    def summary(self) -> str:
        """One line: what was recovered and what was lost."""
        if not self.records:
            head = "no intact event"
        else:
            head = f"{self.events} intact events (offsets {self.records[0].offset}-{self.records[-1].offset})"
        parts = [head]
        if self.lost:
            parts.append(f"lost {len(self.lost)} events between them (offsets {_ranges(self.lost)})")
        if self.cut:
            parts.append(f"{len(self.cut)} events cut off (offsets {_ranges(self.cut)})")
        if self.undecodable:
            parts.append(f"{self.undecodable} rows that are not events of the run")
        if self.trailing_bytes:
            parts.append(f"the file ends {self.trailing_bytes} bytes into page {self.pages + 1} (truncated): events "
                         "after the last one recovered, if any, are lost")
        if self.wal_pages:
            parts.append(f"{self.wal_pages} pages read from the write-ahead log")
        return "; ".join(parts)


def _ranges(offsets: list[int], limit: int = 8) -> str:
    out: list[str] = []
    start = prev = offsets[0]
    for o in offsets[1:] + [None]:
        if o is not None and o == prev + 1:
            prev = o
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if o is not None:
            start = prev = o
    return ", ".join(out[:limit]) + (f", ... ({len(out) - limit} more ranges)" if len(out) > limit else "")


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """An SQLite varint at ``i``: (value, next index)."""
    v = 0
    for k in range(8):
        b = buf[i + k]
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, i + k + 1
    return (v << 8) | buf[i + 8], i + 9


def _wal_pages(path: Path, page_size: int) -> dict[int, bytes]:
    """The newest committed copy of each page in the write-ahead log (frames of the log's current
    salt, up to its last commit frame)."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if len(data) < 32:
        return {}
    magic, _, size, _, salt1, salt2 = struct.unpack(">IIIIII", data[:24])
    if magic not in _WAL_MAGIC or size != page_size:
        return {}
    pages: dict[int, bytes] = {}
    pending: dict[int, bytes] = {}
    i = 32
    while i + 24 + page_size <= len(data):
        pgno, commit, s1, s2 = struct.unpack(">IIII", data[i:i + 16])
        if (s1, s2) != (salt1, salt2):
            break
        pending[pgno] = data[i + 24:i + 24 + page_size]
        if commit:  # a commit frame: everything since the last one is committed
            pages.update(pending)
            pending = {}
        i += 24 + page_size
    return pages


def _record(payload: bytes) -> list[object] | None:
    """The values of a record, ``None`` when it is not a well-formed record."""
    try:
        header_len, i = _varint(payload, 0)
        types = []
        while i < header_len:
            t, i = _varint(payload, i)
            types.append(t)
        pos = header_len
        values: list[object] = []
        for t in types:
            if t == 0:
                values.append(None)
            elif 1 <= t <= 6:
                n = (1, 2, 3, 4, 6, 8)[t - 1]
                values.append(int.from_bytes(payload[pos:pos + n], "big", signed=True))
                pos += n
            elif t == 7:
                values.append(struct.unpack(">d", payload[pos:pos + 8])[0])
                pos += 8
            elif t in (8, 9):
                values.append(t - 8)
            elif t >= 12:
                n = (t - 12) // 2
                chunk = payload[pos:pos + n]
                if len(chunk) != n:
                    return None
                values.append(bytes(chunk) if t % 2 == 0 else chunk.decode("utf-8"))
                pos += n
            else:
                return None
        return values
    except (IndexError, UnicodeDecodeError, struct.error):
        return None


def _cells(page: bytes, pgno: int, usable: int, get_page) -> Iterator[tuple[int, bytes | None]]:
    """``(rowid, payload)`` of every cell of a table-leaf page; payload ``None`` when its overflow
    chain is broken."""
    base = 100 if pgno == 1 else 0
    if len(page) < base + 8 or page[base] != _TABLE_LEAF:
        return
    ncells = int.from_bytes(page[base + 3:base + 5], "big")
    x = usable - 35
    m = ((usable - 12) * 32 // 255) - 23
    for c in range(ncells):
        try:
            ptr = int.from_bytes(page[base + 8 + 2 * c:base + 10 + 2 * c], "big")
            size, i = _varint(page, ptr)
            rowid, i = _varint(page, i)
        except IndexError:
            continue
        if rowid >= 1 << 63:
            rowid -= 1 << 64
        if size <= x:
            yield rowid, page[i:i + size]
            continue
        k = m + (size - m) % (usable - 4)
        local = k if k <= x else m
        out = bytearray(page[i:i + local])
        nxt = int.from_bytes(page[i + local:i + local + 4], "big")
        seen: set[int] = set()
        while len(out) < size and nxt and nxt not in seen:
            seen.add(nxt)
            over = get_page(nxt)
            if over is None:
                break
            nxt = int.from_bytes(over[:4], "big")
            out += over[4:usable][: size - len(out)]
        yield rowid, (bytes(out) if len(out) == size else None)


def salvage_log(path: str | Path, run_id: str) -> Salvage:
    """Every intact event of the embedded log at ``path`` (see the module docstring)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EventLogError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) < 100 or not data.startswith(_MAGIC):
        raise EventLogError(f"{path} has no SQLite header ({len(data)} bytes): nothing can be salvaged from it")
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise EventLogError(f"{path}: its header names page size {page_size}, not an SQLite page size")
    usable = page_size - data[20]
    n_pages = len(data) // page_size
    wal = _wal_pages(path.with_name(path.name + "-wal"), page_size)

    def get_page(pgno: int) -> bytes | None:
        if pgno in wal:
            return wal[pgno]
        if 1 <= pgno <= n_pages:
            return data[(pgno - 1) * page_size:pgno * page_size]
        return None

    report = Salvage(pages=n_pages, page_size=page_size, trailing_bytes=len(data) % page_size, wal_pages=len(wal))
    found: dict[int, Record] = {}
    cut: set[int] = set()
    for pgno in sorted(set(range(1, n_pages + 1)) | set(wal)):
        page = get_page(pgno)
        if page is None:
            continue
        for rowid, payload in _cells(page, pgno, usable, get_page):
            if rowid < 1 or rowid in found:
                continue
            if payload is None:
                cut.add(rowid)
                continue
            values = _record(payload)
            if not values or len(values) != 4 or values[0] is not None or not isinstance(values[1], str) \
                    or not isinstance(values[2], str) or not isinstance(values[3], bytes):
                continue  # a row of another table (offsets, dead letters, meta, the schema)
            try:
                env = decode_envelope(values[3])
            except MalformedEvent:
                report.undecodable += 1
                continue
            if env.run_id != run_id or env.event_id != values[1] or env.type != values[2]:
                report.undecodable += 1
                continue
            found[rowid] = Record(0, rowid - 1, env, values[3])
            cut.discard(rowid)
    report.records = [found[r] for r in sorted(found)]
    report.cut = sorted(r - 1 for r in cut if r not in found)
    if found:
        first, last = min(found), max(found)
        report.lost = [r - 1 for r in range(first, last + 1) if r not in found and r not in cut]
        if first > 1:
            report.lost = [r - 1 for r in range(1, first) if r not in cut] + report.lost
    return report
