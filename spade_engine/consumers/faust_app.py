"""The faust-streaming driver: run projections over a run's Kafka topic as a faust worker.

Kafka-mode counterpart of :class:`~spade_engine.consumers.runner.EmbeddedRunner`; it calls the
same :class:`~spade_engine.consumers.projection.Projection` objects. One faust app per run
(``spade-projections-<run_id>``, which is also its Kafka consumer group) with one agent on the
run's topic ``spade.<run_id>`` (raw bytes, created by the event log, never by faust).

Commit after processing: the agent's stream does not ack events by itself. Applied events are
kept pending until the projections have flushed their state with the cursor (every
``flush_every`` events, after ``flush_interval_s`` seconds, and on shutdown); only then are they
acked, and faust commits acked offsets. A crash therefore re-delivers at most the unflushed tail,
which the idempotent projections ignore; records below a projection's snapshot cursor are skipped.
Records that do not decode (or belong to another run) go to the run's dead-letter topic with the
reason in headers.

``FaustRunner(...).run()`` blocks in a faust ``Worker`` until SIGINT/SIGTERM, or with
``idle_exit_s`` until no record arrived for that long since it got its partitions (then it stops
itself the same way).
:func:`supervise_stats` (what ``spade-engine consumers run --backend kafka`` uses) runs the worker
in a child process and restarts it when it dies, when its event loop stops ticking, or when it
stops committing while records wait (see :class:`~spade_engine.consumers.faust_health.WorkerHealth`).
SIGINT and SIGTERM stop both, even when the supervisor was started with SIGINT ignored (as a shell
starts a background job), and the stop is bounded: the worker gets :data:`STOP_GRACE_S`, then
SIGKILL, and no broker call is waited on. A worker whose supervisor was killed stops itself.
Repeated log records (aiokafka's reconnect errors while the broker is down) are held back to one
per kind every 10 s, with a count.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import faust

from ..events.codec import decode_envelope
from ..events.envelope import utc_now
from ..events.errors import MalformedEvent
from ..events.kafka.topics import dlq_topic_for, topic_for
from ..events.log import Cursor, Record, advance
from .faust_health import WorkerHealth
from .projection import Projection

__all__ = ["STOP_BOUND_S", "FaustRunner", "RepeatFilter", "app_id_for", "make_app", "supervise_stats"]

log = logging.getLogger(__name__)

#: the log backend (:mod:`spade_engine.events.backends`) whose topics faust reads: the one that
#: registers ``consumer_driver="faust"``; the supervisor's lag check reopens the run's log through it
BACKEND = "kafka"
STOP_GRACE_S = 20.0  # a stopping worker's graceful shutdown, before SIGKILL
KILL_WAIT_S = 10.0  # for a SIGKILLed worker to be gone
CLOSE_WAIT_S = 5.0  # for the supervisor's lag-check client to close
STOP_BOUND_S = STOP_GRACE_S + KILL_WAIT_S + CLOSE_WAIT_S
"""The longest ``supervise_stats`` takes to return after SIGINT or SIGTERM."""


def app_id_for(run_id: str) -> str:
    """The faust app id (= Kafka consumer group) of a run's projections."""
    return f"spade-projections-{run_id}"


class _State:
    """What the agent and the flush timer share (both run in the worker's event loop)."""

    def __init__(self, projections: Sequence[Projection]):
        self.projections = list(projections)
        self.cursors: dict[str, Cursor] = {p.name: dict(p.position()) for p in self.projections}
        self.pending: list[Any] = []
        self.stream: Any = None
        self.last_flush = time.monotonic()
        self.last_record = time.monotonic()
        self.applied = 0
        self.dead = 0


def make_app(
    bootstrap: str,
    run_id: str,
    projections: Sequence[Projection],
    *,
    flush_every: int = 1000,
    flush_interval_s: float = 1.0,
    idle_exit_s: float | None = None,
    datadir: str | None = None,
    on_tick: Callable[[], None] | None = None,
    on_assigned: Callable[[], None] | None = None,
) -> tuple[faust.App, _State]:
    """A faust app running ``projections`` over ``run_id``'s topic; returns (app, shared state).

    ``on_tick`` is called from the worker's event loop at least every 0.5 s (a heartbeat: it stops
    when the loop is blocked); ``on_assigned`` whenever the worker is given its partitions."""
    app = faust.App(
        app_id_for(run_id),
        broker=f"kafka://{bootstrap}",
        store="memory://",
        autodiscover=False,
        web_enabled=False,
        topic_replication_factor=1,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=flush_every,
        broker_commit_interval=flush_interval_s,
        datadir=datadir or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"faust-{app_id_for(run_id)}"),
        producer_acks=-1,
        stream_wait_empty=False,
        # a worker that died or hung leaves the group quickly, so a replacement gets the partitions
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,  # pending (unflushed) events are re-delivered, not waited for
    )
    topic = app.topic(
        topic_for(run_id), key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    dlq = app.topic(dlq_topic_for(run_id), key_serializer="raw", value_serializer="raw")
    state = _State(projections)

    async def flush() -> None:
        for proj in state.projections:
            proj.flush(state.cursors[proj.name])
        pending, state.pending = state.pending, []
        for event in pending:
            await state.stream.ack(event)
        state.last_flush = time.monotonic()

    async def dead_letter(message: Any, reason: str) -> None:
        headers = [
            ("reason", reason.encode()),
            ("source", f"{message.topic}/{message.partition}@{message.offset}".encode()),
            ("received_at", utc_now().encode()),
            ("source_topic", message.topic.encode()),
            ("source_partition", str(message.partition).encode()),
            ("source_offset", str(message.offset).encode()),
        ]
        fut = await dlq.send(value=message.value or b"", headers=headers)
        await fut
        state.dead += 1

    @app.agent(topic)
    async def project(stream: Any) -> None:
        stream = stream.noack()
        state.stream = stream
        async for event in stream.events():
            msg = event.message
            state.last_record = time.monotonic()
            raw = msg.value or b""
            try:
                env = decode_envelope(raw)
                if env.run_id != run_id:
                    raise MalformedEvent(f"event {env.event_id} belongs to run {env.run_id!r}, not {run_id!r}")
            except MalformedEvent as exc:
                await dead_letter(msg, str(exc))
                await stream.ack(event)
                continue
            rec = Record(msg.partition, msg.offset, env, raw)
            fed = False
            for proj in state.projections:
                cur = state.cursors[proj.name]
                if rec.offset < cur.get(rec.partition, 0):
                    continue  # already in the projection's snapshot
                proj.apply(rec)
                state.cursors[proj.name] = advance(cur, rec)
                fed = True
            state.applied += fed
            state.pending.append(event)
            if len(state.pending) >= flush_every or time.monotonic() - state.last_flush >= flush_interval_s:
                await flush()

    @app.timer(interval=min(flush_interval_s, 0.5))
    async def flush_when_quiet() -> None:
        if on_tick is not None:
            on_tick()
        if state.pending and time.monotonic() - state.last_flush >= flush_interval_s:
            await flush()
        if idle_exit_s is not None and not state.pending and time.monotonic() - state.last_record >= idle_exit_s:
            log.info("no record for %.1fs: stopping", idle_exit_s)
            os.kill(os.getpid(), signal.SIGTERM)  # the worker's own graceful shutdown path

    @app.on_partitions_assigned.connect
    async def after_rebalance(sender: Any, assigned: Any = None, **kwargs: Any) -> None:
        # idle is counted from when the worker holds its partitions: joining the group can take
        # longer than ``idle_exit_s`` on a loaded machine, and no record can arrive before it
        state.last_record = time.monotonic()
        if on_assigned is not None:
            on_assigned()

    @app.on_partitions_revoked.connect
    async def before_rebalance(sender: Any, revoked: Any = None, **kwargs: Any) -> None:
        if state.pending and state.stream is not None:
            await flush()  # commit what was processed before partitions move

    state.flush = flush  # type: ignore[attr-defined]
    return app, state


class RepeatFilter(logging.Filter):
    """Let one record per (logger, level, message template) through every ``window_s`` seconds.

    While the broker is down, aiokafka logs the same connection error every few milliseconds
    (hundreds of kilobytes a minute). The first record of a kind passes; the next one after the
    window passes with a count of what was held back in between.
    """

    def __init__(self, window_s: float = 10.0):
        super().__init__()
        self.window_s = window_s
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = time.monotonic()
        last, held = self._seen.get(key, (float("-inf"), 0))
        if now - last < self.window_s:
            self._seen[key] = (last, held + 1)
            return False
        if held:
            record.msg = f"{record.getMessage()} [{held} more like this in the last {now - last:.0f}s]"
            record.args = ()
        self._seen[key] = (now, 0)
        return True


class _Worker(faust.Worker):
    """faust's worker with :class:`RepeatFilter` on the root logger's handlers, and without its
    terminal spinner (which writes cursor escape codes into the log stream)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spinner = None

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        repeats = RepeatFilter()
        for handler in logger.handlers:
            handler.addFilter(repeats)


class FaustRunner:
    """Run projections over a run's topic in a faust worker in this process (blocking)."""

    def __init__(
        self,
        bootstrap: str,
        run_id: str,
        projections: Sequence[Projection],
        *,
        flush_every: int = 1000,
        flush_interval_s: float = 1.0,
        idle_exit_s: float | None = None,
        loglevel: str = "warning",
        on_tick: Callable[[], None] | None = None,
        on_assigned: Callable[[], None] | None = None,
    ):
        self.bootstrap = bootstrap
        self.run_id = run_id
        self.loglevel = loglevel
        self.app, self.state = make_app(
            bootstrap,
            run_id,
            projections,
            flush_every=flush_every,
            flush_interval_s=flush_interval_s,
            idle_exit_s=idle_exit_s,
            on_tick=on_tick,
            on_assigned=on_assigned,
        )

    def run(self) -> int:
        """Start the worker; return how many records were applied when it stops."""
        state, app = self.state, self.app

        @app.on_before_shutdown.connect
        async def _final_flush(sender: Any, **kwargs: Any) -> None:
            for proj in state.projections:
                proj.flush(state.cursors[proj.name])

        # the worker talks on stderr: stdout stays for the command's own output
        worker = _Worker(
            app, loglevel=self.loglevel, quiet=True, redirect_stdouts=False, stdout=sys.stderr, stderr=sys.stderr
        )
        try:
            worker.execute_from_commandline()
        except SystemExit:
            pass
        finally:
            try:
                asyncio.get_event_loop_policy().set_event_loop(asyncio.new_event_loop())
            except Exception:  # noqa: BLE001 - best effort for callers that run more loops
                pass
        return state.applied


def _exit_with_parent(parent: int, grace_s: float = 15.0) -> None:
    """Stop this process when its parent (the supervisor) is gone: gracefully first, then hard.

    A supervisor killed with SIGKILL cannot stop its worker; without this the worker would run
    on, orphaned, retrying a broker nobody watches."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)  # the worker's graceful shutdown
        time.sleep(grace_s)
        os._exit(1)  # it hung (e.g. committing to a broker that is down): what is flushed is kept

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _child(
    bootstrap: str,
    run_id: str,
    snapshot: str,
    idle_exit_s: float | None,
    applied: Any,
    beat: Any,
    ready: Any,
    parent: int,
) -> None:
    from .stats import RunStatsProjection

    _exit_with_parent(parent)

    # CLOCK_MONOTONIC: one clock for all processes (Linux)
    def tick() -> None:
        beat.value = time.monotonic()

    def assigned() -> None:
        ready.value = time.monotonic()

    runner = FaustRunner(
        bootstrap,
        run_id,
        [RunStatsProjection(run_id, snapshot)],
        idle_exit_s=idle_exit_s,
        on_tick=tick,
        on_assigned=assigned,
    )
    applied.value = runner.run()
    # faust has stopped: the projection is flushed and its offsets committed. What is left, the
    # teardown of an interpreter holding faust and aiokafka, only costs time (seconds on a loaded
    # machine) that the supervisor would spend waiting for this process to be gone.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _stop(proc: Any, *, hard: bool) -> None:
    """Stop a worker process: SIGKILL at once when ``hard`` (it is wedged), else SIGTERM (its
    graceful shutdown) and SIGKILL when that does not finish in :data:`STOP_GRACE_S`."""
    if proc.is_alive() and hard:
        proc.kill()
        proc.join(KILL_WAIT_S)
    if proc.is_alive():
        proc.terminate()
        proc.join(STOP_GRACE_S)
    if proc.is_alive():
        proc.kill()
        proc.join(KILL_WAIT_S)


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a worker is spawned, hide this process's ``__main__`` from multiprocessing.

    A spawned child first re-imports its parent's main module (as ``__mp_main__``). Under
    ``spade-engine`` that is the whole CLI, every command with its dependencies: most of a
    worker's start, and more than ten seconds of it on a loaded machine. The worker needs none
    of it; its target is importable on its own. (With no ``__spec__`` and no ``__file__`` on
    ``__main__``, multiprocessing imports nothing, as it does for an interactive parent.)"""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class _StopSignals:
    """SIGINT and SIGTERM while the supervisor runs: the first one raises KeyboardInterrupt in the
    main thread (its graceful stop); later ones are ignored while that stop runs, so they cannot
    break it off halfway and leave the worker behind.

    The handlers are installed even where SIGINT was ignored when the process started (a shell
    without job control starts background jobs so). Python then never installs its own, and the
    supervisor would ignore Ctrl-C and ``kill -INT`` for good, while its faust worker (which sets
    its own handlers) stopped on them and was restarted. Inside :meth:`deferred`, a signal is
    held back until the block ends (a worker half started cannot be stopped)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received: int | None = None
        self._deferring = False
        self._pending = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            log.warning("faust supervisor: %s again: already stopping", signal.Signals(signum).name)
            return
        self.received = signum
        if self._deferring:
            self._pending = True
            return
        raise KeyboardInterrupt

    def install(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt


def _close_bounded(client: Any, timeout_s: float) -> bool:
    """``client.close()`` in a daemon thread, waited on for ``timeout_s`` at most; True if it closed.

    A client whose broker is gone or slow is left to the process's exit instead."""

    def close() -> None:
        try:
            client.close()
        except Exception as exc:  # noqa: BLE001 - shutting down: nothing to do about it
            log.debug("faust supervisor: closing the lag-check client failed: %s", exc)

    t = threading.Thread(target=close, name="close-lag-check", daemon=True)
    t.start()
    t.join(timeout_s)
    return not t.is_alive()


def supervise_stats(
    bootstrap: str,
    run_id: str,
    snapshot: str,
    *,
    idle_exit_s: float | None = None,
    stall_s: float = 60.0,
    start_s: float = 180.0,
    check_every_s: float = 5.0,
    max_restarts: int = 20,
) -> tuple[int, int]:
    """Run the stats projection's faust worker in a child process and keep it healthy.

    The worker is restarted when it dies; when its event loop stops ticking for ``stall_s``
    seconds; or when the run's topic has records past the group's committed offsets and those
    offsets have not moved for ``stall_s`` seconds while it holds its partitions (aiokafka can
    hang in an offset commit after the broker is killed and restarted). A worker still starting
    (not ticking yet, or not given its partitions yet) is judged against ``start_s`` instead. A
    restarted worker resumes from the committed offsets and its snapshot; idempotent projections
    make re-delivery harmless. SIGINT and SIGTERM stop the worker gracefully and return within
    :data:`STOP_BOUND_S`; a worker whose supervisor vanished stops by itself.
    Returns (records applied, restarts).
    """
    import multiprocessing as mp

    from ..events.backends import reopen_log
    from ..events.errors import EventLogError
    from ..events.log import EventLog

    ctx = mp.get_context("spawn")
    group = app_id_for(run_id)
    applied_total = 0
    restarts = 0
    watch: EventLog | None = None
    checking: threading.Thread | None = None  # the lag check in flight, if any

    def lag_and_committed() -> tuple[int, dict[int, int]] | None:
        nonlocal watch
        try:
            w = watch
            if w is None:
                w = watch = reopen_log(BACKEND, {"bootstrap": bootstrap, "run_id": run_id, "connect_timeout_s": 3})
            end = w.end_cursor()
            committed = w.committed(group)
        except EventLogError:
            if watch is not None:
                watch.close()
            watch = None
            return None  # the broker is unavailable: nothing to judge now
        return sum(max(0, o - committed.get(p, 0)) for p, o in end.items()), committed

    def bounded_check(timeout_s: float = 20.0) -> tuple[int, dict[int, int]] | None:
        """``lag_and_committed`` with a wall-clock bound: a client wedged by a broker restart is
        abandoned (a fresh one is made next time) instead of freezing the supervisor."""
        nonlocal watch, checking
        box: list[Any] = []
        checking = t = threading.Thread(target=lambda: box.append(lag_and_committed()), daemon=True)
        t.start()
        t.join(timeout_s)
        if t.is_alive():
            log.warning("faust supervisor: the broker did not answer the lag check in %.0fs", timeout_s)
            watch = None  # abandoned, not closed: closing could block as well
            return None
        return box[0] if box else None

    def stalled(proc: Any, beat: Any, ready: Any) -> bool:
        """Watch a running worker until it exits (False) or is judged stalled (True)."""
        health = WorkerHealth(stall_s=stall_s, start_s=start_s, started_at=time.monotonic())
        while True:
            proc.join(check_every_s)
            if not proc.is_alive():
                return False
            b, r = beat.value, ready.value
            state = bounded_check() if health.needs_check(b, r) else None
            verdict = health.judge(time.monotonic(), b, r, state)
            log.debug("faust supervisor: worker %s beat %.1f ready %.1f state %s best %d",
                      proc.pid, b, r, state, health.best)
            if verdict is not None:
                log.warning("faust worker %s: %s: restarting", proc.pid, verdict)
                return True

    signals = _StopSignals().install()
    proc: Any = None
    try:
        while True:
            applied = ctx.RawValue("q", 0)  # no locks: a killed worker must not leave one held
            beat = ctx.RawValue("d", 0.0)
            ready = ctx.RawValue("d", 0.0)
            proc = ctx.Process(
                target=_child, args=(bootstrap, run_id, snapshot, idle_exit_s, applied, beat, ready, os.getpid())
            )
            with signals.deferred(), _main_module_hidden():
                proc.start()
            hard = stalled(proc, beat, ready)
            _stop(proc, hard=hard)
            applied_total += applied.value
            exitcode, proc = proc.exitcode, None
            if not hard and exitcode == 0:
                state = bounded_check()
                if idle_exit_s is None or state is None or state[0] == 0:
                    return applied_total, restarts
            restarts += 1
            if restarts > max_restarts:
                raise EventLogError(f"the faust worker of {run_id} failed {restarts} times; giving up")
            time.sleep(1.0)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop the worker gracefully, then return
        if proc is not None:
            _stop(proc, hard=False)
            applied_total += applied.value
        return applied_total, restarts
    finally:
        # no broker call is waited on while stopping: a client still in a lag check holds its
        # lock (it is abandoned to the process's exit); an idle one gets CLOSE_WAIT_S to close
        if watch is not None and (checking is None or not checking.is_alive()):
            _close_bounded(watch, CLOSE_WAIT_S)
        signals.restore()  # last: a second Ctrl-C while closing is still ignored
