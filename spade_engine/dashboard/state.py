"""The dashboard's live state: two background threads that follow a run's log.

* the *tail* thread reads new records from the end of the log (as it was at startup) and
  publishes them to the live feed and the SSE hub at once, so the append -> browser lag is one
  poll interval plus one read, whatever the projections cost;
* the *projector* thread drives the projections of :class:`~spade_engine.dashboard.views.RunView`
  from their snapshots to the tail, flushes the archive every ``flush_interval_s`` (and the
  full-state snapshots once the log is quiet or every ``snapshot_interval_s``, so a restarted dashboard
  resumes where this one stopped), and at most every ``summary_interval_s`` publishes a
  ``summary`` (counters, and a version number the page uses to refetch charts and tables).

The chart series (:meth:`LiveState.curves`, :meth:`LiveState.series_rows`) are computed from a
copy of the difficulty state outside the projections' lock and cached.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from ..events.cli import summarize
from ..events.log import Cursor, EventLog, Record, advance
from .curves import env_curves
from .sse import Hub
from .views import RunView

__all__ = ["LiveState", "feed_item"]


def feed_item(rec: Record) -> dict[str, Any]:
    """One line of the live event feed."""
    env = rec.envelope
    try:
        text = summarize(rec)
    except Exception:  # noqa: BLE001 - a malformed payload still shows up in the feed
        text = ""
    return {
        "partition": rec.partition,
        "offset": rec.offset,
        "type": env.type,
        "key": env.key,
        "occurred_at": env.occurred_at,
        "producer": env.producer,
        "summary": text,
    }


def _total(cursor: Mapping[int, int]) -> int:
    return int(sum(cursor.values()))


class LiveState:
    """Follows one run's log in a thread and keeps the dashboard's state current."""

    def __init__(
        self,
        log: EventLog,
        view: RunView,
        hub: Hub | None = None,
        *,
        feed_size: int = 300,
        batch: int = 500,
        poll_interval_s: float = 0.02,
        flush_interval_s: float = 1.0,
        snapshot_interval_s: float = 120.0,
        idle_snapshot_s: float = 2.0,
        summary_interval_s: float = 0.5,
        max_windows: int = 200,
        window: int | None = None,
    ):
        self.log = log
        self.view = view
        self.hub = hub or Hub()
        self.batch = batch
        self.poll_interval_s = poll_interval_s
        self.flush_interval_s = flush_interval_s
        self.snapshot_interval_s = snapshot_interval_s
        self.idle_snapshot_s = idle_snapshot_s
        self.max_windows = max_windows
        self.summary_interval_s = summary_interval_s
        self.lock = threading.RLock()  # projections (the projector writes, requests read)
        self._feed_lock = threading.Lock()  # the feed only, so the tail never waits on projections
        self.feed: deque[dict[str, Any]] = deque(maxlen=feed_size)
        self.cursor: Cursor = view.position()
        self.version = 0  # bumped whenever projections changed (the page refetches charts)
        self.error: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started_at = time.time()
        self._rate: deque[tuple[float, int]] = deque(maxlen=50)
        self._rows_cache: tuple[int, float, list[dict[str, Any]]] | None = None
        self._rows_cost_s = 0.0
        self._rows_lock = threading.Lock()
        #: rolling-mean width (environments) of the charts unless a request asks for another
        self.window = window or view.difficulty.window
        self._curves_cache: OrderedDict[int, tuple[int, float, dict[str, Any], float]] = OrderedDict()
        # The feed starts with the last events now in the log, read directly; the follower feeds
        # it only from here on, while it catches the projections up from their snapshots.
        self.tail_start: Cursor = dict(log.end_cursor())
        start = {p: max(0, o - feed_size) for p, o in self.tail_start.items()}
        recent = [feed_item(r) for r in log.read(start)]
        recent.sort(key=lambda f: (f["occurred_at"], f["partition"], f["offset"]))
        self.feed.extend(recent[-feed_size:])
        self.tail_cursor: Cursor = dict(self.tail_start)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> "LiveState":
        self._threads = [
            threading.Thread(target=self._tail, name="dashboard-tail", daemon=True),
            threading.Thread(target=self._project, name="dashboard-projector", daemon=True),
        ]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        with self.lock:
            self.view.flush(self.cursor)
        self.hub.close()

    @property
    def caught_up(self) -> bool:
        return all(self.cursor.get(p, 0) >= o for p, o in self.tail_start.items())

    # -- the tail: new events to the feed, as soon as they are in the log ------------------------

    def tail_step(self) -> int:
        """Publish one batch of new records to the feed; return how many there were."""
        records = list(self.log.read(self.tail_cursor, limit=self.batch))
        if not records:
            return 0
        fresh = [feed_item(r) for r in records]
        with self._feed_lock:
            self.feed.extend(fresh)
        self.hub.publish("events", fresh)
        cursor = self.tail_cursor
        for rec in records:
            cursor = advance(cursor, rec)
        self.tail_cursor = cursor
        return len(records)

    def _tail(self) -> None:
        while not self._stop.is_set():
            try:
                n = self.tail_step()
            except Exception as exc:  # noqa: BLE001 - keep serving what we have, say why
                self.error = f"feed: {exc.__class__.__name__}: {exc}"
                self._stop.wait(1.0)
                continue
            if n < self.batch:
                self._stop.wait(self.poll_interval_s)

    # -- the projector: the projections, from their snapshots to the tail -----------------------

    def step(self) -> int:
        """Apply one batch of records to the projections; return how many there were."""
        records = list(self.log.read(self.cursor, limit=self.batch))
        if not records:
            return 0
        with self.lock:
            cursor = self.cursor
            for rec in records:
                self.view.apply(rec)
                cursor = advance(cursor, rec)
            self.cursor = cursor
            self.version += 1
        self._rate.append((time.monotonic(), _total(cursor)))
        return len(records)

    def _project(self) -> None:
        last_flush = last_heavy = last_summary = last_record = time.monotonic()
        published_version = -1
        dirty = heavy_dirty = False
        while not self._stop.is_set():
            try:
                n = self.step()
            except Exception as exc:  # noqa: BLE001 - keep serving what we have, say why
                self.error = f"projections: {exc.__class__.__name__}: {exc}"
                self._stop.wait(1.0)
                continue
            self.error = None
            now = time.monotonic()
            if n:
                dirty = heavy_dirty = True
                last_record = now
            # the archive (what the browser queries) flushes often; the full-state snapshots of
            # memory and difficulty (only needed for a restart: whole-state JSON, costly on big
            # runs) once the log has been quiet for idle_snapshot_s, or every snapshot_interval_s
            quiet = now - last_record >= self.idle_snapshot_s
            if (dirty and (n == 0 or now - last_flush >= self.flush_interval_s)) or (
                heavy_dirty and (quiet or now - last_heavy >= self.snapshot_interval_s)
            ):
                heavy = heavy_dirty and (quiet or now - last_heavy >= self.snapshot_interval_s)
                view = self.view
                with self.lock:
                    names = {view.archive.name, view.counts.name} | ({view.memory.name} if heavy else set())
                    view.flush_only(self.cursor, names)
                    self.version += 1
                if heavy:  # a full JSON snapshot: written outside the lock (only this thread mutates it)
                    view.flush_only(self.cursor, {view.difficulty.name})
                last_flush, dirty = now, False
                if heavy:
                    last_heavy, heavy_dirty = now, False
            if self.version != published_version and (n == 0 or now - last_summary >= self.summary_interval_s):
                self.hub.publish("summary", self.summary())
                published_version = self.version
                last_summary = now
            if n < self.batch:
                self._stop.wait(self.poll_interval_s)

    # -- reading ---------------------------------------------------------------------------------

    def events_per_s(self) -> float:
        if len(self._rate) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._rate[0], self._rate[-1]
        if time.monotonic() - t1 > 5:
            return 0.0
        return round((n1 - n0) / (t1 - t0), 1) if t1 > t0 else 0.0

    def summary(self) -> dict[str, Any]:
        """Live counters: events by type, environments by verdict, progress of the follower."""
        with self.lock:
            counts = dict(self.view.counts.counts)
            cursor = dict(self.cursor)
            version = self.version
        rows = [r for r in self.series_rows() if r["skill"] == "*"]
        latest = rows[-1] if rows else {}
        rolling = self.curves()
        return {
            "run_id": self.log.run_id,
            "version": version,
            "cursor": cursor,
            "applied": _total(cursor),
            "log_end_at_start": _total(self.tail_start),
            "caught_up": self.caught_up,
            "events_per_s": self.events_per_s(),
            "counts": counts,
            "events": sum(counts.values()),
            "verdicts": self.view.verdicts(),
            "policy_versions": counts.get("PolicyUpdated", 0),
            "latest_window": latest,
            "window": rolling["window"],
            "latest": rolling["latest"].get("*", {}),
            "stopped": counts.get("RunStopped", 0) > 0,
            "error": self.error,
        }

    def series_rows(self) -> list[dict[str, Any]]:
        """The difficulty rows (chart windows of :meth:`window_size`).

        Recomputing is O(environments): while events arrive the rows are refreshed at most every
        five times what the last computation took (instant on small runs, seconds on 1M events).
        """
        now = time.monotonic()
        with self._rows_lock:
            cached = self._rows_cache
            age = 5 * self._rows_cost_s
            if cached is not None and (cached[0] == self.version or now - cached[1] < age):
                return cached[2]
            with self.lock:  # a consistent shallow copy; the rows are computed without the lock
                version = self.version
                size = self.window_size()
                series = copy.copy(self.view.difficulty)
                series.envs = dict(series.envs)
            rows = series.rows(size)
            self._rows_cost_s = time.monotonic() - now
            self._rows_cache = (version, now, rows)
            return rows

    def curves(self, window: int | None = None) -> dict[str, Any]:
        """The per-environment curves with rolling means of ``window`` environments (default:
        the dashboard's ``window``), cached like :meth:`series_rows`, one entry per window asked."""
        size = window or self.window
        now = time.monotonic()
        with self._rows_lock:
            cached = self._curves_cache.get(size)
            if cached is not None and (cached[0] == self.version or now - cached[1] < 5 * cached[3]):
                self._curves_cache.move_to_end(size)
                return cached[2]
            with self.lock:
                version = self.version
                envs = dict(self.view.difficulty.envs)
            value = env_curves(envs, size)
            self._curves_cache[size] = (version, now, value, time.monotonic() - now)
            self._curves_cache.move_to_end(size)
            while len(self._curves_cache) > 8:
                self._curves_cache.popitem(last=False)
            return value

    def window_size(self) -> int:
        """Environments per chart window: the series' own, or larger so at most ``max_windows``."""
        base = self.view.difficulty.window
        n = len(self.view.difficulty.envs)
        return max(base, -(-n // self.max_windows))

    def recent(self, after: int | None = None) -> list[dict[str, Any]]:
        with self._feed_lock:
            items = list(self.feed)
        if after is not None:
            items = [i for i in items if i["offset"] > after]
        return items
