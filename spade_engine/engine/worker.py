"""Distributed mode: each stage of the loop as a long-running role worker on the event log.

``spade-engine worker ROLE`` runs one of:

* ``designer``: records RunStarted and the seed archive's environments, proposes new environments
  up to ``--max-envs`` while fewer than ``--ahead`` environments are unfinished (so new proposals
  are steered by the regret estimates already in), and proposes repairs of rejected candidates,
  in batches of ``loop.designer_batch``; records RunStopped when every environment is finished.
  One designer per run.
* ``validator`` (group ``<run>.validator``): EnvironmentProposed -> EnvironmentValidated, with
  novelty against a private memory projection it keeps up to date from the log.
* ``rollout`` (group ``<run>.rollout``): accepted EnvironmentValidated -> HintWritten + the first
  round's RolloutCompleted plays; a round's RegretEstimated -> the next designed round's plays; an
  EnvironmentReplayed -> the replay round's plays.
* ``regret`` (group ``<run>.regret``): RolloutCompleted -> RegretEstimated once all plays of the
  round are in (its per-environment view is folded from the log, so a restarted worker
  rebuilds it).
* ``consumers``: the projections (archive, memory, difficulty, statistics): the faust driver on
  Kafka, the embedded runner on SQLite. ``trainer``: the replay-driven trainer in follow mode.

Every role calls the same per-stage code as the single-process loop: the stage table of
:mod:`.pipeline` (:func:`~.pipeline.next_stage`, :func:`~.pipeline.run_stage`,
:func:`~.pipeline.new_env`; a group role's inputs are :func:`~.pipeline.role_inputs`), so
``start`` and the workers make the same decisions from the same events.

Never twice, nothing lost: the group roles read their input through a consumer group
(:mod:`spade_engine.events.group`); an environment's events share a partition, so one member of
a group handles a given environment. A member commits an input only after its outputs were
appended (and acknowledged by the broker). If it dies in between, the input is re-delivered to the
member that takes over its partition, which first folds the log and skips the stages whose
outputs are already recorded. Outputs carry deterministic event ids (:func:`~.pipeline.output_event_id`,
a uuid5 of run, type, environment and play slot, the same in the single-process loop), so even a stage that is re-run (a member
killed after appending, before committing) appends nothing new: the log is idempotent on event id.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeGuard

from ..blobs import BlobStore
from ..config import EngineConfig
from ..errors import SpadeError
from ..events.catalogue import EventPayload, RunStopped
from ..events.codec import make_envelope
from .offload import fit_event
from ..events.log import EventLog, Record
from . import stages
from .level_replay import choose_replay
from .loop import Engine
from .pipeline import (
    STAGES,
    design_batch,
    load_latest_policy,
    missing_seeds,
    next_stage,
    output_event_id,
    role_inputs,
    run_stage,
)
from .stages import StageName, WorkerRole
from .state import EnvState, RunState

__all__ = [
    "ROLES",
    "GROUP_ROLES",
    "group_for",
    "Emitter",
    "WorkerStats",
    "GroupWorker",
    "ValidatorWorker",
    "RolloutWorker",
    "RegretWorker",
    "DesignerWorker",
    "MemoryFeed",
]

ROLES = ("designer", "validator", "rollout", "regret", "consumers", "trainer")
GROUP_ROLES = (WorkerRole.VALIDATOR, WorkerRole.ROLLOUT, WorkerRole.REGRET)


def group_for(run_id: str, role: str) -> str:
    """The consumer group of ``role`` on ``run_id``."""
    return f"spade.{run_id}.{role}"


def producer_name(role: str) -> str:
    return f"{role}@{socket.gethostname()}:{os.getpid()}"


@dataclass
class WorkerStats:
    """What a worker did (printed when it stops)."""

    inputs: int = 0
    skipped: int = 0
    appended: int = 0
    busy_s: float = 0.0


class Emitter:
    """Appends stage outputs with deterministic ids and folds them into the worker's view; large
    data moves to ``blobs`` first (:func:`~spade_engine.engine.offload.fit_event`)."""

    def __init__(self, log: EventLog, view: RunState, producer: str, stats: WorkerStats, blobs: BlobStore | None = None):
        self.log, self.view, self.producer, self.stats, self.blobs = log, view, producer, stats, blobs

    def __call__(self, payload: EventPayload, causation_id: str | None = None) -> str:
        payload = fit_event(payload, self.blobs)
        env = make_envelope(
            payload, run_id=self.log.run_id, producer=self.producer, causation_id=causation_id,
            event_id=output_event_id(self.log.run_id, payload),
        )
        self.stats.appended += self.log.append([env])
        self.view.add_envelope(env)
        return env.event_id


class MemoryFeed:
    """A private, in-process novelty memory (the archive's projection code) fed from the log.

    A background thread follows the log (one long-lived reader) and queues records; ``catch_up``
    applies what has arrived. Nothing is flushed to disk: a restarted worker folds the log again.
    """

    def __init__(self, log: EventLog, cfg: EngineConfig, *, poll_interval: float = 0.05):
        import queue

        from ..archive.memory import EnvironmentMemory

        self._dir = tempfile.TemporaryDirectory(prefix="spade-worker-memory-")
        self.memory = EnvironmentMemory.open(self._dir.name, cfg.memory)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.applied = 0
        for rec in log.read():  # everything recorded before the worker starts
            self.memory.apply(rec)
            self.applied += 1
        start = log.end_cursor()

        def follow() -> None:
            try:
                for rec in log.follow(start, stop=self._stop, poll_interval=poll_interval):
                    self._queue.put(rec)
            except BaseException as exc:  # noqa: BLE001 - surfaced by catch_up
                self._error = exc

        self._thread = threading.Thread(target=follow, name="memory-feed", daemon=True)
        self._thread.start()

    def catch_up(self) -> int:
        """Apply the records that arrived since the last call; return how many."""
        if self._error is not None:
            raise SpadeError(f"the memory feed stopped: {self._error}")
        n = 0
        while True:
            try:
                rec = self._queue.get_nowait()
            except Exception:  # queue.Empty
                break
            self.memory.apply(rec)
            n += 1
        self.applied += n
        return n

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._dir.cleanup()


# -- group roles -------------------------------------------------------------------------------


@dataclass
class GroupWorker:
    """A role reading ``inputs`` from its consumer group; subclasses implement :meth:`handle`."""

    log: EventLog
    cfg: EngineConfig
    ctx: stages.StageContext
    role: str = ""
    inputs: tuple[str, ...] = ()
    blobs: BlobStore | None = None
    say: Callable[[str], None] = lambda line: None
    view: RunState = field(init=False)
    stats: WorkerStats = field(default_factory=WorkerStats)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.view = RunState(run_id=self.log.run_id)
        self.emit = Emitter(self.log, self.view, producer_name(self.role), self.stats, self.blobs)

    def handle(self, rec: Record) -> bool:  # pragma: no cover - abstract
        """Process one input; return False when stopped before its outputs were all recorded."""
        raise NotImplementedError

    def _mine(self, stage: StageName | None) -> TypeGuard[StageName]:
        """Whether ``stage`` is one this role runs (the stage table's ``role``)."""
        return stage is not None and STAGES[stage].role == self.role

    def _env(self, env_id: str) -> EnvState:
        self.view.refresh(self.log)
        return self.view.env(env_id)

    def serve(self, *, until_idle: float | None = None, session_timeout_s: float = 10.0, poll_s: float = 0.5) -> WorkerStats:
        """Consume the group until stopped (or ``until_idle`` seconds without an input)."""
        consumer = self.log.group_consumer(
            group_for(self.log.run_id, self.role), session_timeout_s=session_timeout_s, client_id=self.emit.producer
        )
        last_input = time.monotonic()
        assigned: list[int] | None = None
        try:
            while not self.stop_event.is_set():
                recs = consumer.poll(poll_s)
                now_assigned = consumer.assignment()
                if now_assigned != assigned:
                    assigned = now_assigned
                    self.say(f"assigned partitions {assigned}")
                if not recs:
                    if until_idle is not None and time.monotonic() - last_input >= until_idle:
                        break
                    continue
                done: list[Record] = []
                for rec in recs:
                    if self.stop_event.is_set():
                        break
                    if rec.envelope.type in self.inputs:
                        t0 = time.perf_counter()
                        finished = self.handle(rec)
                        self.stats.busy_s += time.perf_counter() - t0
                        last_input = time.monotonic()
                        if not finished:
                            break  # stopped mid-work: not committed, so re-delivered
                        done.append(rec)
                        consumer.commit(done)  # outputs are recorded: move the group past it
                        done = []
                    else:
                        done.append(rec)
                consumer.commit(done)
        finally:
            consumer.close()
        return self.stats


@dataclass
class ValidatorWorker(GroupWorker):
    """EnvironmentProposed -> EnvironmentValidated (sandbox + novelty)."""

    role: str = WorkerRole.VALIDATOR
    inputs: tuple[str, ...] = role_inputs(WorkerRole.VALIDATOR)
    feed: MemoryFeed | None = None

    def handle(self, rec: Record) -> bool:
        from ..events.catalogue import EnvironmentValidated

        proposed = rec.envelope.event()
        out_id = output_event_id(self.log.run_id, EnvironmentValidated(env_id=proposed.env_id, valid=False))
        if self.log.has_event(out_id):
            self.stats.skipped += 1
            return True
        t0 = time.perf_counter()
        if self.feed is not None:
            self.feed.catch_up()  # novelty against every environment recorded so far
        t_feed = time.perf_counter() - t0
        tm = self.ctx.timings
        before = (tm.sandbox, tm.embedding)
        st = self.view.env(proposed.env_id)  # the emitter folds the verdict into it
        if st.proposed is None:
            st.proposed, st.proposed_id = proposed, rec.envelope.event_id
        run_stage(self.ctx, self.view, st, StageName.VALIDATE, self.emit)
        self.stats.inputs += 1
        v = st.validated
        self.say(
            f"{proposed.env_id}: {'accepted' if v and v.accepted else (v.error_kind if v else '?')} "
            f"(memory {t_feed:.2f}s, sandbox {tm.sandbox - before[0]:.2f}s, embedding {tm.embedding - before[1]:.2f}s, "
            f"total {time.perf_counter() - t0:.2f}s)"
        )
        return True


@dataclass
class RolloutWorker(GroupWorker):
    """Accepted EnvironmentValidated -> HintWritten + the plays that are not recorded yet."""

    role: str = WorkerRole.ROLLOUT
    inputs: tuple[str, ...] = role_inputs(WorkerRole.ROLLOUT)

    def handle(self, rec: Record) -> bool:
        from ..events.catalogue import EnvironmentValidated

        event = rec.envelope.event()  # EnvironmentValidated, RegretEstimated or EnvironmentReplayed
        if isinstance(event, EnvironmentValidated) and not (event.valid and event.accepted):
            return True
        st = self._env(event.env_id)
        loaded = load_latest_policy(self.ctx.policy, self.view, self.blobs, producer_role=self.role)
        if loaded is not None:
            self.stats.appended += self.log.append([make_envelope(loaded, run_id=self.log.run_id, producer=self.emit.producer)])
        stage = next_stage(self.cfg.loop, self.cfg.replay, st, seed=self.cfg.seed)
        if not self._mine(stage):
            self.stats.skipped += 1
            return True
        while self._mine(stage):
            run_stage(self.ctx, self.view, st, stage, self.emit, should_stop=self.stop_event.is_set)
            if self.stop_event.is_set() and self._mine(next_stage(self.cfg.loop, self.cfg.replay, st, seed=self.cfg.seed)):
                return False
            stage = next_stage(self.cfg.loop, self.cfg.replay, st, seed=self.cfg.seed)
        self.stats.inputs += 1
        self.say(f"{st.env_id}: {st.play_count} plays")
        return True


@dataclass
class RegretWorker(GroupWorker):
    """RolloutCompleted -> RegretEstimated once every play of the environment is recorded."""

    role: str = WorkerRole.REGRET
    inputs: tuple[str, ...] = role_inputs(WorkerRole.REGRET)

    def handle(self, rec: Record) -> bool:
        play = rec.envelope.event()
        st = self._env(play.env_id)  # every play recorded so far, whoever played it
        if next_stage(self.cfg.loop, self.cfg.replay, st, seed=self.cfg.seed) != StageName.REGRET:
            return True  # plays still missing (or already estimated)
        run_stage(self.ctx, self.view, st, StageName.REGRET, self.emit)
        self.stats.inputs += 1
        est = st.latest_estimate
        self.say(f"{st.env_id}: round {est.round} regret {est.regret:.3f}")  # type: ignore[union-attr]
        return True


# -- the designer ------------------------------------------------------------------------------


class DesignerWorker:
    """Proposes environments (and repairs) for a run; see the module docstring."""

    def __init__(
        self,
        engine: Engine,
        *,
        ahead: int = 8,
        memory: MemoryFeed | None = None,
        say: Callable[[str], None] = lambda line: None,
    ):
        self.engine = engine
        self.ahead = max(1, ahead)
        self.feed = memory
        self.say = say
        self.stats = WorkerStats()
        self.stop_event = engine.stop_event
        engine.ctx = dataclasses.replace(engine.ctx, memory=memory.memory if memory is not None else None)
        self.emit = Emitter(engine.log, engine.state, producer_name(WorkerRole.DESIGNER), self.stats, engine.blobs)

    def _unfinished(self, state: RunState) -> list[EnvState]:
        return [s for s in state.proposed() if next_stage(self.engine.cfg.loop, self.engine.cfg.replay, s, seed=self.engine.cfg.seed) is not None]

    def serve(self, *, poll_s: float = 0.2) -> str:
        """Record RunStarted (and the seed archive's environments the run lacks), propose until
        done (RunStopped) or stopped; return the reason. Proposals are batched: the repairs
        waiting and new slots, up to ``loop.designer_batch``, in one generate call."""
        eng = self.engine
        eng.start_record()
        for payload in missing_seeds(eng.ctx, eng.state):
            self.emit(payload)
            self.stats.inputs += 1
        max_envs = eng.cfg.loop.env_bound
        batch = stages.designer_batch(eng.cfg.loop)
        while not self.stop_event.is_set():
            eng.state.refresh(eng.log)
            load_latest_policy(eng.ctx.policy, eng.state, eng.blobs)
            repairs = [st for st in eng.state.proposed() if next_stage(eng.cfg.loop, eng.cfg.replay, st, seed=eng.cfg.seed) == StageName.REPAIR][:batch]
            unfinished = self._unfinished(eng.state)
            n = len(eng.state.roots())
            if max_envs is not None and n >= max_envs and not unfinished:
                eng._append(RunStopped(reason="max_envs", counts=eng.counts()))
                self.say(f"run complete: {n} environments")
                return "max_envs"
            room = batch - len(repairs)
            if max_envs is not None:
                room = min(room, max_envs - n)
            room = max(0, min(room, self.ahead - (len(unfinished) - len(repairs))))
            if room > 0 and not repairs and eng.proposer is None:  # a level replay takes a new slot, as in the local loop
                eng.state.refresh(eng.log)  # the replay choice's basis: everything recorded so far
                choice = choose_replay(eng.cfg.replay, eng.cfg.loop, eng.state, seed=eng.cfg.seed, policy_version=eng.ctx.policy.version)
                if choice is not None:
                    self.emit(choice)
                    self.stats.inputs += 1
                    self.say(f"{choice.env_id}: level replay, round {choice.round} (slot {choice.slot})")
                    continue
            if not repairs and room == 0:
                self.stop_event.wait(poll_s)
                continue
            if self.feed is not None:
                self.feed.catch_up()
            if eng.proposer is not None:  # a fixed environment source writes the new environments
                for st in repairs:
                    run_stage(eng.ctx, eng.state, st, StageName.REPAIR, self.emit)
                for index in range(n, n + room):
                    payload = eng.proposer(eng, index)
                    self.emit(payload)
                    self.stats.inputs += 1
                    self.say(f"{payload.env_id}: proposed ({payload.skill}, difficulty {payload.difficulty})")
                continue
            for payload, cause in design_batch(eng.ctx, eng.state, repairs=repairs, new_indices=list(range(n, n + room))):
                self.emit(payload, cause)
                self.stats.inputs += 1
                what = f"repair of {payload.repair_of}" if payload.repair_of else f"{payload.skill}, difficulty {payload.difficulty}"
                self.say(f"{payload.env_id}: proposed ({what})")
        return "interrupted"
