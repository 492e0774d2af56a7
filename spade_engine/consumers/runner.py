"""The embedded consumer runner: feeds projections from an EventLog at their committed cursors.

Used with the SQLite log by ``spade-engine start`` and ``replay``; it works with any EventLog
(including Kafka), while :mod:`spade_engine.consumers.faust_app` is the streaming driver for
Kafka deployments. Both call the same projection functions.

Order of durability: a projection flushes its state with the cursor first, then the runner commits
the consumer group offset. After a crash between the two, the projection's own ``position()``
wins (it is never behind what it holds), and re-delivered events are no-ops (idempotent apply).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence

from ..errors import disk_full, is_disk_full
from ..events.errors import EventLogError
from ..events.log import Cursor, EventLog, advance, earliest
from .projection import Projection

log = logging.getLogger(__name__)

__all__ = ["EmbeddedRunner", "group_name"]


def group_name(projection: Projection) -> str:
    return f"projection:{projection.name}"


class EmbeddedRunner:
    """Run projections over one log in this process.

    ``catch_up()`` applies everything now in the log and returns; ``run(stop)`` keeps following.
    Flushes every ``flush_every`` records or ``flush_interval_s`` seconds, and at the end of each
    call; with ``lazy_flush`` a ``catch_up`` that applied fewer records since the last flush, within
    the interval, leaves the flush to a later call or to :meth:`flush` (a caller that catches up
    after every event, as the engine does, then flushes projections and commits offsets about every
    ``flush_interval_s`` instead of once per event).
    ``run`` rides out an unavailable log (:class:`EventLogError`, e.g. a Kafka broker restarting)
    for up to ``retry_for_s`` seconds, resuming from the cursors it has applied.
    """

    def __init__(
        self,
        log: EventLog,
        projections: Sequence[Projection],
        *,
        flush_every: int = 5000,
        flush_interval_s: float = 1.0,
        commit_offsets: bool = True,
        retry_for_s: float = 300.0,
        retry_backoff_s: float = 1.0,
        lazy_flush: bool = False,
    ):
        self.log = log
        self.projections = list(projections)
        self.flush_every = flush_every
        self.flush_interval_s = flush_interval_s
        self.commit_offsets = commit_offsets
        self.retry_for_s = retry_for_s
        self.retry_backoff_s = retry_backoff_s
        self.lazy_flush = lazy_flush
        self._unflushed = 0  # records applied since the last flush
        self._last_flush = time.monotonic()
        self.cursors: dict[str, Cursor] = {}
        for proj in self.projections:
            # the projection's own snapshot is authoritative; the group offset is for tooling
            self.cursors[proj.name] = dict(proj.position())
        self.applied = 0

    def start_cursor(self) -> Cursor:
        """The earliest position any projection needs: where a read for :meth:`feed` starts."""
        if not self.cursors:
            return {}
        start: Mapping[int, int] = functools.reduce(earliest, self.cursors.values())
        return dict(start)

    def _due(self) -> bool:
        return self._unflushed >= self.flush_every or time.monotonic() - self._last_flush >= self.flush_interval_s

    def _feed(self, records: Iterable, *, lazy: bool = False) -> int:
        n = 0
        for rec in records:
            for proj in self.projections:
                cur = self.cursors[proj.name]
                if rec.offset < cur.get(rec.partition, 0):
                    continue
                proj.apply(rec)
                self.cursors[proj.name] = advance(cur, rec)
            n += 1
            self.applied += 1
            self._unflushed += 1
            if self._due():
                self.flush()
        if self._unflushed and (not lazy or self._due()):
            self.flush()
        return n

    def flush(self) -> None:
        """Write every projection's state with its cursor, then commit the group offsets. A full
        disk is :class:`~spade_engine.errors.DiskFull` naming the projection (not a traceback
        of the database driver)."""
        self._unflushed = 0
        self._last_flush = time.monotonic()
        for proj in self.projections:
            cur = self.cursors[proj.name]
            try:
                proj.flush(cur)
            except Exception as exc:
                if is_disk_full(exc):
                    raise disk_full(f"the {proj.name} projection", exc) from exc
                raise
            if self.commit_offsets and cur:
                self.log.commit(group_name(proj), cur)

    def feed(self, records: Iterable) -> int:
        """Apply records someone else read from at most :meth:`start_cursor` (the engine reads once
        for its run state and its projections); records a projection already has are skipped.
        Flushes as :meth:`catch_up` does; returns how many were read."""
        return self._feed(records, lazy=self.lazy_flush)

    def catch_up(self) -> int:
        """Apply every record now in the log; return how many were read."""
        return self._feed(self.log.read(self.start_cursor()), lazy=self.lazy_flush)

    def run(
        self,
        stop: threading.Event | None = None,
        *,
        poll_interval: float = 0.05,
        idle_timeout: float | None = None,
    ) -> int:
        """Follow the log until ``stop`` is set (or ``idle_timeout`` seconds pass without a record).

        The log is followed in windows that end after ``flush_interval_s`` without a record, so
        what was applied just before a quiet period is flushed and committed then, not at the
        next record.
        """
        start = self.applied
        idle_since = time.monotonic()
        failing_since: float | None = None
        while stop is None or not stop.is_set():
            window = self.flush_interval_s
            if idle_timeout is not None:
                window = max(0.0, min(window, idle_timeout - (time.monotonic() - idle_since)))
            try:
                n = self._feed(
                    self.log.follow(self.start_cursor(), stop=stop, poll_interval=poll_interval, idle_timeout=window)
                )
            except EventLogError as exc:
                # the log is unreachable (a broker restarting): keep what was applied in memory,
                # retry from the runner's own cursors, give up after ``retry_for_s`` of failures
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since >= self.retry_for_s:
                    raise
                log.warning("event log unavailable, retrying: %s", exc)
                if stop is not None:
                    stop.wait(self.retry_backoff_s)
                else:
                    time.sleep(self.retry_backoff_s)
                idle_since = time.monotonic()
                continue
            failing_since = None
            if n:
                idle_since = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                break
        if self.applied > start:
            self.flush()
        return self.applied - start
