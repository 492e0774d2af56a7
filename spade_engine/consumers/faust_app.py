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
``idle_exit_s`` until no record arrived for that long (then it stops itself the same way).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

import faust

from ..events.codec import decode_envelope
from ..events.envelope import utc_now
from ..events.errors import MalformedEvent
from ..events.kafka_log import dlq_topic_for, topic_for
from ..events.log import Cursor, Record, advance
from .projection import Projection

__all__ = ["make_app", "FaustRunner", "app_id_for"]

log = logging.getLogger(__name__)


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
) -> tuple[faust.App, _State]:
    """A faust app running ``projections`` over ``run_id``'s topic; returns (app, shared state)."""
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
        stream_wait_empty=False,  # pending (unflushed) events are re-delivered, not waited for
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
        if state.pending and time.monotonic() - state.last_flush >= flush_interval_s:
            await flush()
        if idle_exit_s is not None and not state.pending and time.monotonic() - state.last_record >= idle_exit_s:
            log.info("no record for %.1fs: stopping", idle_exit_s)
            os.kill(os.getpid(), signal.SIGTERM)  # the worker's own graceful shutdown path

    @app.on_partitions_revoked.connect
    async def before_rebalance(sender: Any, revoked: Any = None, **kwargs: Any) -> None:
        if state.pending and state.stream is not None:
            await flush()  # commit what was processed before partitions move

    state.flush = flush  # type: ignore[attr-defined]
    return app, state


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
        )

    def run(self) -> int:
        """Start the worker; return how many records were applied when it stops."""
        state, app = self.state, self.app

        @app.on_before_shutdown.connect
        async def _final_flush(sender: Any, **kwargs: Any) -> None:
            for proj in state.projections:
                proj.flush(state.cursors[proj.name])

        # the worker talks on stderr: stdout stays for the command's own output
        worker = faust.Worker(
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
