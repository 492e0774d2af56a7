"""The embedded default event log: one SQLite file (WAL mode) per run.

Layout of ``events.sqlite``:

* ``events(seq INTEGER PRIMARY KEY, event_id TEXT UNIQUE, type, body BLOB)``: ``body`` is the
  canonical JSON envelope (key, time, version... live there); offset = seq - 1;
* ``consumer_offsets(grp, partition, next_offset)``: committed cursors of consumer groups;
* ``dead_letters``: undecodable input with its reason;
* ``meta``: the run id and the log format version.

Several processes may append and read at once: WAL lets readers run beside one writer, appends
take the write lock with ``BEGIN IMMEDIATE`` and wait up to ``busy_timeout`` for it.

Opened with ``read_only=True`` (the commands that only read: ``status``, ``events tail``,
``audit``...), a log is never written: the connection is a SQLite ``mode=ro`` URI, no schema is
created, the journal mode is left as it is, and a log whose tables are partly missing is an error,
not repaired. A log with no ``-wal`` file beside it was closed by its last writer, so its main
file holds every event: it is read as ``immutable`` (no ``-wal``/``-shm`` files are created, and a
copy on read-only media can be read). Once a ``-wal`` file appears (a writer opened the log
meanwhile) the next read goes through it, so ``follow`` sees the new events. (A read already under
way when a writer starts keeps reading the main file; SQLite copies WAL pages into it only at a
checkpoint, after about 1000 pages or when the writer closes, so such a read is rarely concurrent
with a change, and it never changes the log.)
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..codec import encode_envelope
from ..envelope import Envelope, utc_now
from ...errors import SpadeError, disk_full, is_disk_full
from ..errors import EventLogError, MalformedEvent
from ..log import Cursor, DeadLetter, Record

if TYPE_CHECKING:  # pragma: no cover
    from .group import SqliteGroupConsumer

__all__ = ["SqliteEventLog", "LOG_FORMAT_VERSION", "LOG_FILENAME"]

LOG_FORMAT_VERSION = 1
LOG_FILENAME = "events.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS consumer_offsets (
    grp TEXT NOT NULL,
    partition INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (grp, partition)
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY,
    received_at TEXT NOT NULL,
    reason TEXT NOT NULL,
    source TEXT NOT NULL,
    raw BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_TABLES = ("events", "consumer_offsets", "dead_letters", "meta")


class SqliteEventLog:
    """:class:`~spade_engine.events.log.EventLog` on a SQLite file in WAL mode."""

    PARTITION = 0
    backend = "sqlite"

    def __init__(
        self, path: str | Path, run_id: str, *, create: bool = True, read_only: bool = False, busy_timeout_s: float = 30.0
    ):
        if read_only and create:
            raise ValueError("a read-only event log is never created: pass create=False")
        self.path = Path(path)
        self.run_id = run_id
        #: opened for reading only: nothing is ever written (see the module docstring)
        self.read_only = read_only
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        if not self.path.exists() and not create:
            raise EventLogError(f"no event log at {self.path}")
        if read_only:
            try:
                self._open_read_only()
            except BaseException:
                self.close()
                raise
            return
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        else:
            self._check_not_emptied()
        conn = self._conn()
        try:
            if not create and self._schema_complete(conn):
                self._check_meta(conn, run_id)  # opening an existing log writes nothing
                return
            with self._write_txn(conn):
                for stmt in _SCHEMA.strip().split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                row = conn.execute("SELECT value FROM meta WHERE name='run_id'").fetchone()
                if row is None:
                    conn.execute("INSERT INTO meta(name, value) VALUES ('run_id', ?)", (run_id,))
                    conn.execute(
                        "INSERT INTO meta(name, value) VALUES ('format_version', ?)", (str(LOG_FORMAT_VERSION),)
                    )
                elif row[0] != run_id:
                    raise EventLogError(f"{self.path} holds run {row[0]!r}, not {run_id!r}")
                fmt = conn.execute("SELECT value FROM meta WHERE name='format_version'").fetchone()
                if fmt is not None and int(fmt[0]) > LOG_FORMAT_VERSION:
                    raise EventLogError(
                        f"{self.path} uses log format {fmt[0]}, newer than this engine reads "
                        f"({LOG_FORMAT_VERSION}); upgrade spade-engine"
                    )
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None

    def _open_read_only(self) -> None:
        """Check an existing log for reading: not emptied, every table there, this run, a format
        this engine reads. Writes nothing, and repairs nothing."""
        self._check_not_emptied()
        conn = self._conn()
        try:
            tables = self._tables(conn)
            missing = [t for t in _TABLES if t not in tables]
            if missing:
                raise EventLogError(
                    f"event log {self.path} is incomplete: it has no {', '.join(missing)} table"
                    f"{'s' if len(missing) > 1 else ''}, so it is not a whole spade event log; a read-only command "
                    "repairs nothing and nothing was changed. Restore the run from a copy, or recover its events with "
                    "`spade-engine events export --salvage`"
                )
            self._check_meta(conn, self.run_id)
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None

    def _check_not_emptied(self) -> None:
        """An existing log (``create=False``) that is an empty file, or a database without the
        log's tables, is an error, never a fresh log: a run's log emptied or replaced (a copy
        gone wrong) must not turn into a run that "never started" while its archive remains."""
        wal = self.path.with_name(self.path.name + "-wal")
        size = self.path.stat().st_size
        if size == 0 and not (wal.exists() and wal.stat().st_size > 0):
            raise EventLogError(self._emptied("0 bytes"))
        try:
            probe = self._connect_read_only()[0]
            try:
                tables = self._tables(probe)
            finally:
                probe.close()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        if not {"events", "meta"} <= tables:
            raise EventLogError(self._emptied(f"{size} bytes, no events table"))

    def _emptied(self, what: str) -> str:
        return (f"event log {self.path} is empty ({what}): the run's log was emptied or replaced, nothing was changed; "
                "restore it from a copy, or `spade-engine events import` an export of the run into another data "
                "directory (`events export --salvage` recovers what a damaged log still holds)")

    @staticmethod
    def _tables(conn: sqlite3.Connection) -> set[str]:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    @classmethod
    def _schema_complete(cls, conn: sqlite3.Connection) -> bool:
        return set(_TABLES) <= cls._tables(conn)

    def _check_meta(self, conn: sqlite3.Connection, run_id: str) -> None:
        row = conn.execute("SELECT value FROM meta WHERE name='run_id'").fetchone()
        if row is not None and row[0] != run_id:
            raise EventLogError(f"{self.path} holds run {row[0]!r}, not {run_id!r}")
        fmt = conn.execute("SELECT value FROM meta WHERE name='format_version'").fetchone()
        if fmt is not None and int(fmt[0]) > LOG_FORMAT_VERSION:
            raise EventLogError(
                f"{self.path} uses log format {fmt[0]}, newer than this engine reads ({LOG_FORMAT_VERSION}); upgrade spade-engine"
            )

    # -- connections ---------------------------------------------------------------------------

    @property
    def _wal(self) -> Path:
        return self.path.with_name(self.path.name + "-wal")

    def _connect_read_only(self) -> tuple[sqlite3.Connection, bool]:
        """A ``mode=ro`` connection, and whether it is ``immutable`` (no ``-wal`` file: the main
        file holds everything, read without creating ``-wal``/``-shm`` files)."""
        immutable = not self._wal.exists()
        self._local.stamp = self._file_stamp() if immutable else None
        uri = self.path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
        conn = sqlite3.connect(uri, uri=True, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False)
        return conn, immutable

    def _file_stamp(self) -> tuple[int, int, int] | None:
        """The main file's (inode, size, mtime): an immutable reading of it holds while these do."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self.read_only and self._local.immutable and (
            self._wal.exists() or self._file_stamp() != self._local.stamp
        ):
            # a writer opened the log since (its WAL is there), or wrote and closed it (its last
            # close checkpointed into the main file and removed the WAL): read afresh, through the
            # WAL when there is one (the old connection stays open for a read still under way, and
            # is closed by close())
            conn = None
        if conn is None:
            try:
                if self.read_only:
                    conn, self._local.immutable = self._connect_read_only()
                else:
                    conn = sqlite3.connect(
                        self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
                    )
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_s * 1000)}")
            except sqlite3.DatabaseError as exc:
                raise self._error(exc) from None
            self._local.conn = conn
            with self._conns_lock:
                self._all_conns.append(conn)
        return conn

    def _error(self, exc: sqlite3.DatabaseError) -> SpadeError:
        msg = str(exc)
        if is_disk_full(exc):
            return disk_full(f"the event log {self.path}", exc)
        if "locked" in msg or "busy" in msg:
            return EventLogError(f"event log {self.path} is locked by another process ({msg})")
        if "not a database" in msg or "malformed" in msg or "corrupt" in msg:
            return EventLogError(
                f"event log {self.path} is corrupt or not a spade event log ({msg}); "
                "`spade-engine events export RUN --salvage` recovers every intact event"
            )
        return EventLogError(f"event log {self.path}: {msg}")

    class _Txn:
        def __init__(self, conn: sqlite3.Connection):
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type, exc, tb) -> None:
            if exc_type is None:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error:
                    if self.conn.in_transaction:
                        try:
                            self.conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    raise
            elif self.conn.in_transaction:
                # SQLite has already rolled back after some errors (a full disk: SQLITE_FULL); a
                # failing ROLLBACK must never hide the error that caused it
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass

    def _write_txn(self, conn: sqlite3.Connection) -> "SqliteEventLog._Txn":
        if self.read_only:
            raise EventLogError(f"event log {self.path} is open read-only: nothing can be written to it here")
        return SqliteEventLog._Txn(conn)

    # -- writing -------------------------------------------------------------------------------

    def append(self, envelopes: Iterable[Envelope]) -> int:
        envs = envelopes if isinstance(envelopes, (list, tuple)) else list(envelopes)
        run_id = self.run_id
        for env in envs:
            if env.run_id != run_id:
                raise MalformedEvent(f"event {env.event_id} belongs to run {env.run_id!r}, not {run_id!r}")
        encode = encode_envelope
        return self._insert([(env.event_id, env.type, encode(env)) for env in envs])

    def append_raw(self, items: Iterable[tuple[Envelope, bytes]]) -> int:
        """Append envelopes with their already-encoded bytes (import keeps bytes exactly)."""
        rows = []
        for env, raw in items:
            if env.run_id != self.run_id:
                raise MalformedEvent(f"event {env.event_id} belongs to run {env.run_id!r}, not {self.run_id!r}")
            rows.append((env.event_id, env.type, raw))
        return self._insert(rows)

    def _insert(self, rows: list[tuple]) -> int:
        if not rows:
            return 0
        conn = self._conn()
        try:
            with self._write_txn(conn):
                before = conn.total_changes
                conn.executemany(
                    "INSERT OR IGNORE INTO events(event_id, type, body) VALUES (?, ?, ?)",
                    rows,
                )
                return conn.total_changes - before
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None

    # -- reading -------------------------------------------------------------------------------

    def _start(self, cursor: Mapping[int, int] | None) -> int:
        return int((cursor or {}).get(self.PARTITION, 0))

    def read(self, cursor: Mapping[int, int] | None = None, *, limit: int | None = None) -> Iterator[Record]:
        offset = self._start(cursor)
        remaining = limit
        page = 2000
        conn = self._conn()
        while remaining is None or remaining > 0:
            n = page if remaining is None else min(page, remaining)
            try:
                rows = conn.execute(
                    "SELECT seq, body FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (offset, n)
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._error(exc) from None
            for seq, body in rows:
                yield Record(self.PARTITION, seq - 1, None, body)
            if len(rows) < n:
                return
            offset = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)

    def follow(
        self,
        cursor: Mapping[int, int] | None = None,
        *,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        poll_interval: float = 0.05,
    ) -> Iterator[Record]:
        position: Cursor = {self.PARTITION: self._start(cursor)}
        last_seen = time.monotonic()
        while stop is None or not stop.is_set():
            got = False
            for rec in self.read(position):
                position[self.PARTITION] = rec.offset + 1
                got = True
                yield rec
                if stop is not None and stop.is_set():
                    return
            now = time.monotonic()
            if got:
                last_seen = now
            elif idle_timeout is not None and now - last_seen >= idle_timeout:
                return
            if not got:
                if stop is not None:
                    stop.wait(poll_interval)
                else:
                    time.sleep(poll_interval)

    def end_cursor(self) -> Cursor:
        try:
            (seq,) = self._conn().execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        return {self.PARTITION: int(seq)}

    def __len__(self) -> int:
        return self.end_cursor()[self.PARTITION]

    # -- consumer groups -----------------------------------------------------------------------

    def commit(self, group: str, cursor: Mapping[int, int]) -> None:
        conn = self._conn()
        now = utc_now()
        try:
            with self._write_txn(conn):
                conn.executemany(
                    "INSERT INTO consumer_offsets(grp, partition, next_offset, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(grp, partition) DO UPDATE SET next_offset=excluded.next_offset, "
                    "updated_at=excluded.updated_at",
                    [(group, int(p), int(o), now) for p, o in cursor.items()],
                )
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None

    def committed(self, group: str) -> Cursor:
        try:
            rows = self._conn().execute(
                "SELECT partition, next_offset FROM consumer_offsets WHERE grp = ?", (group,)
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        return {int(p): int(o) for p, o in rows}

    def groups(self) -> dict[str, Cursor]:
        """Every consumer group with its committed cursor."""
        out: dict[str, Cursor] = {}
        for grp, p, o in self._conn().execute("SELECT grp, partition, next_offset FROM consumer_offsets"):
            out.setdefault(grp, {})[int(p)] = int(o)
        return out

    def group_consumer(
        self, group: str, *, session_timeout_s: float = 10.0, client_id: str = "", max_records: int = 100
    ) -> "SqliteGroupConsumer":
        """The single member of consumer group ``group``: a
        :class:`~spade_engine.events.sqlite.group.SqliteGroupConsumer` (one partition, so one
        member; ``session_timeout_s`` and ``client_id`` have no meaning here)."""
        from .group import SqliteGroupConsumer

        return SqliteGroupConsumer(self, group, max_records=max_records)

    def reopen_args(self) -> dict[str, str]:
        """What another process needs to open this log (:func:`~spade_engine.events.backends.reopen_log`)."""
        args = {"path": str(self.path), "run_id": self.run_id}
        if self.read_only:
            args["read_only"] = "1"
        return args

    def has_event(self, event_id: str) -> bool:
        """Whether an event with this id is recorded."""
        try:
            row = self._conn().execute("SELECT 1 FROM events WHERE event_id = ?", (event_id,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        return row is not None

    # -- statistics and dead letters -----------------------------------------------------------

    def count_by_type(self) -> dict[str, int]:
        try:
            rows = self._conn().execute("SELECT type, COUNT(*) FROM events GROUP BY type ORDER BY type").fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None
        return {t: int(n) for t, n in rows}

    def scan_counts(self) -> tuple[dict[str, int], None]:
        """:meth:`count_by_type`: every stored event was decoded before it was stored."""
        return self.count_by_type(), None

    def dead_letter(self, raw: bytes, reason: str, *, source: str = "") -> None:
        conn = self._conn()
        try:
            with self._write_txn(conn):
                conn.execute(
                    "INSERT INTO dead_letters(received_at, reason, source, raw) VALUES (?, ?, ?, ?)",
                    (utc_now(), reason, source, bytes(raw)),
                )
        except sqlite3.DatabaseError as exc:
            raise self._error(exc) from None

    def dead_letters(self) -> list[DeadLetter]:
        rows = self._conn().execute(
            "SELECT reason, raw, received_at, source FROM dead_letters ORDER BY id"
        ).fetchall()
        return [DeadLetter(reason=r, raw=bytes(b), received_at=t, source=s) for r, b, t, s in rows]

    def close(self) -> None:
        with self._conns_lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.ProgrammingError:  # pragma: no cover - closed from another thread
                pass
        self._local = threading.local()

    def __enter__(self) -> "SqliteEventLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
