"""The single-process self-play loop, resumable from the event log.

One :class:`Engine` drives the stages of :mod:`.stages` for one run. Its only memory is the log:
on start it folds the log into a :class:`~.state.RunState`, records the seed archive's
environments if the run lacks them, and finishes whatever the last engine left undone (an
environment proposed but not validated, plays missing, regret not estimated, a repair not yet
asked for), then designs new environments until ``loop.max_envs`` first proposals exist or it is
told to stop. Design is batched: the repairs waiting and new slots, up to
``loop.designer_batch``, in one generate call; the proposals are then validated together (one
sandbox validation per worker at once, one embedding call), then hinted and played one
environment at a time. Every stage output is appended as soon as it exists (one event per
play), and a stage runs only when the log lacks its output, so a crash anywhere loses at most the
work in flight and never duplicates a recorded event.

Which stage comes next, and what each stage reads and writes, is the stage table of
:mod:`.pipeline` (shared with the distributed workers). Environment ids are ``<run suffix>-e<index>``
for first proposals and ``...-r<n>`` for the n-th repair; every stage output has a deterministic
event id, so an output recorded before a crash is never recorded twice. Projections (memory, archive) are fed from the log by an embedded runner after each
append, so the designer's memory and the novelty check see every earlier environment.

The engine only uses the :class:`~spade_engine.events.log.EventLog` protocol, so it runs on the
SQLite and Kafka backends alike.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .. import __version__
from ..blobs import BlobStore
from ..config import EngineConfig
from ..errors import SpadeError
from ..events.catalogue import EventPayload, PolicyLoaded, PolicyUpdated, RunStarted, RunStopped
from ..events.codec import make_envelope
from ..errors import DiskFull, disk_full, is_disk_full
from .offload import fit_event
from ..events.log import EventLog, Record, earliest
from . import stages
from .level_replay import choose_replay, new_slots_before_replay
from .pipeline import design_batch, load_latest_policy, missing_seeds, new_env, next_stage, output_event_id, run_stage
from .state import EnvState, RunState

if TYPE_CHECKING:  # pragma: no cover
    from ..consumers.runner import EmbeddedRunner

__all__ = ["Engine", "EngineLock", "RunAlreadyActive"]

PRODUCER = "engine"


class InProcessTrainer(Protocol):
    """What the engine asks of the trainer it trains with between environments
    (:class:`~spade_engine.trainer.loop.Trainer`; the engine never imports the trainer)."""

    #: the versions it published, oldest first
    updates: list[PolicyUpdated]

    @property
    def evaluator(self) -> object | None:
        """Its held-out evaluator, if it has one (``eval.every``)."""
        ...

    def run(self, *, flush: bool = True) -> list[PolicyUpdated]:
        """Train on the complete groups the log holds (``flush``: also a last partial batch);
        the versions published."""
        ...


class RunAlreadyActive(SpadeError):
    """Another engine process is running this run in this data directory."""


class StageAbandoned(SpadeError):
    """An environment stage tried to record an event after the engine's thread stopped waiting
    for it (an interrupt): the event is not recorded."""


class EngineLock:
    """An exclusive ``flock`` on ``<run dir>/engine.lock`` (released by the OS if the process dies)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "engine.lock"
        self._fh: Any = None

    def acquire(self) -> "EngineLock":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise RunAlreadyActive(f"another engine is running this run (lock {self.path} is held)") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "EngineLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def fold_new_records(log: EventLog, state: RunState, runner: EmbeddedRunner | None = None) -> None:
    """Fold what ``log`` gained into the run ``state`` and the live projections' ``runner`` (an
    :class:`~spade_engine.consumers.runner.EmbeddedRunner`, or None) with **one** read from the
    earlier of their cursors. The engine does this after every event it appends; a read of each
    cost two broker round trips apiece on Kafka (list offsets, fetch), a third of a step there."""
    if runner is None:
        state.refresh(log)
        return

    def through_state(records: Iterator[Record]) -> Iterator[Record]:
        for rec in records:
            state.fold(rec)
            yield rec

    runner.feed(through_state(log.read(earliest(state.cursor, runner.start_cursor()))))


@dataclass
class Engine:
    """Runs the self-play loop for one run (see the module docstring).

    Args:
        log: the run's event log.
        cfg: the resolved config (recorded in RunStarted).
        ctx: the stage resources (policy, corpus, validator, sandbox pool, memory...).
        runner: an embedded projection runner (``catch_up()``) feeding memory/archive, or None.
        blobs: blob store to resolve PolicyUpdated checkpoints, and where the large data of the events
            it appends goes (long observations, token ids: :mod:`.offload`).
        on_progress: called with the RunState after every recorded event.
        parent_run_id: recorded in RunStarted for curriculum replays.
    """

    log: EventLog
    cfg: EngineConfig
    ctx: stages.StageContext
    runner: EmbeddedRunner | None = None
    blobs: BlobStore | None = None
    on_progress: Callable[[RunState], None] | None = None
    parent_run_id: str | None = None
    #: an in-process trainer (``trainer.enabled``): ``run(flush=...)`` trains on the groups the log
    #: holds and returns the PolicyUpdated it published; called before each new environment
    trainer: InProcessTrainer | None = None
    #: where new environments come from (default: the designer); curriculum replay sets it
    proposer: Callable[["Engine", int], EventPayload] | None = None
    state: RunState = field(init=False)
    stop_event: threading.Event = field(default_factory=threading.Event)
    appended: int = 0

    def __post_init__(self) -> None:
        self.state = RunState.from_log(self.log)
        if self.cfg.seed is None:  # a run given no seed: the one its context drew (recorded in RunStarted)
            self.cfg = self.cfg.model_copy(update={"seed": self.ctx.seed})

    # -- log helpers ---------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.log.run_id

    def _append(self, payload: EventPayload, causation_id: str | None = None, *, refresh: bool = True) -> str:
        """Append one event: stage outputs get their deterministic id (:func:`.pipeline.output_event_id`),
        run-level lifecycle events (RunStarted, RunStopped: one per start; PolicyLoaded: one per switch)
        a fresh one."""
        lifecycle = isinstance(payload, (RunStarted, RunStopped, PolicyLoaded))
        payload = fit_event(payload, self.blobs)  # large data to blobs: every event small (offload.py)
        env = make_envelope(
            payload, run_id=self.run_id, producer=PRODUCER, causation_id=causation_id,
            event_id=None if lifecycle else output_event_id(self.run_id, payload),
        )
        self.log.append([env])
        self.appended += 1
        if refresh:
            self._refresh()
        return env.event_id

    def _refresh(self) -> None:
        """Fold what the log gained into the state and projections, and report progress."""
        fold_new_records(self.log, self.state, self.runner)
        if self.on_progress is not None:
            self.on_progress(self.state)

    def stop(self) -> None:
        """Ask the loop to stop at the next safe point (between stages or plays)."""
        self.stop_event.set()

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    # -- lifecycle -----------------------------------------------------------------------------

    def start_record(self) -> None:
        resumed = bool(self.state.starts)
        self._append(
            RunStarted(
                config=self.cfg.model_dump(mode="json"),
                engine_version=__version__,
                seed=self.cfg.seed,
                backend=self.cfg.log.backend,
                policy=self.ctx.policy.describe(),
                resumed=resumed,
                parent_run_id=self.parent_run_id,
                sandbox_layers=dict(self.ctx.sandbox_layers),
                host=socket.gethostname(),
            )
        )

    def counts(self) -> dict[str, int]:
        s = self.state.stats()
        return {k: int(s[k]) for k in ("proposals", "roots", "valid", "invalid", "accepted", "plays", "estimated")}

    def run(self) -> str:
        """Record RunStarted, run until done or stopped, record RunStopped; return the reason."""
        if self.runner is not None:
            self.runner.catch_up()
        self.start_record()
        reason, detail = "max_envs", ""
        try:
            reason = self._loop()
        except BaseException as exc:  # record why, then re-raise
            interrupted = isinstance(exc, KeyboardInterrupt)
            reason = "interrupted" if interrupted else "error"
            full = None if interrupted or isinstance(exc, DiskFull) or not is_disk_full(exc) else disk_full("the run's data", exc)
            shown = full or exc
            detail = "" if interrupted else (str(shown) if isinstance(shown, DiskFull) else f"{type(exc).__name__}: {exc}")
            try:
                self._append(RunStopped(reason=reason, detail=detail[:2000], counts=self.counts()))
            except Exception:  # noqa: BLE001 - the log itself may be what failed (a full disk: it usually is)
                pass
            if full is not None:
                raise full from exc
            raise
        self._append(RunStopped(reason=reason, detail=detail, counts=self.counts()))
        return reason

    def _loop(self) -> str:
        max_envs = self.cfg.loop.env_bound
        self._record_seeds()
        while True:
            if self.stopping:
                return "interrupted"
            self._maybe_load_policy()
            pending = self._pending()
            if pending:
                if any(self._next_stage(st) in ("hint", "round", "replay") for st in pending):
                    # the plays of an environment (or of its later round) are about to start: train on
                    # what is complete first (seeds played with loop.seed_plays queue up here, never
                    # reaching a design step in between)
                    self._train(flush=False)
                self._advance_batch(pending)
                continue
            repairs = self._repairs()
            n = len(self.state.roots())
            room = None if max_envs is None else max(0, max_envs - n)
            if not repairs and room == 0:
                self._train(flush=True)
                return "max_envs"
            self._train(flush=False)
            if not repairs and self._replay():  # a level replay takes the next new slot
                continue
            self._design(repairs, n, room)

    # -- work selection ------------------------------------------------------------------------

    def _pending(self) -> list[EnvState]:
        """What to run next, other than design: every environment waiting for validation (one
        batch), else the first ``loop.concurrent_envs`` environments (in id order) waiting for
        their hint, plays or regret."""
        todo = [st for st in self.state.proposed() if self._next_stage(st) == "validate"]
        if todo:
            return todo
        out: list[EnvState] = []
        for st in self.state.proposed():
            if self._next_stage(st) not in (None, "repair", "validate"):
                out.append(st)
                if len(out) >= self.cfg.loop.concurrent_envs:
                    break
        return out

    def _repairs(self) -> list[EnvState]:
        return [st for st in self.state.proposed() if self._next_stage(st) == "repair"]

    def _next_stage(self, st: EnvState) -> str | None:
        return next_stage(self.cfg.loop, self.cfg.replay, st, seed=self.cfg.seed)

    # -- stages --------------------------------------------------------------------------------

    def _record_seeds(self) -> None:
        """Record the seed archive's environments the run lacks (at its first start)."""
        for payload in missing_seeds(self.ctx, self.state):
            self._append(payload)

    def _design(self, repairs: list[EnvState], n: int, room: int | None) -> None:
        """One design batch: the repairs waiting, then new slots up to ``loop.designer_batch``."""
        batch = stages.designer_batch(self.cfg.loop)
        repairs = repairs[:batch]
        free = batch - len(repairs)
        count = free if room is None else min(free, room)
        if self.proposer is None:  # slots that level replay would take are left to it
            count = new_slots_before_replay(self.cfg.replay, self.cfg.loop, self.state, count, seed=self.cfg.seed)
        indices = list(range(n, n + max(0, count)))
        if self.proposer is not None:  # a fixed curriculum (replay) writes the new environments
            for st in repairs:
                run_stage(self.ctx, self.state, st, "repair", self._append, should_stop=lambda: self.stopping)
            for index in indices:
                self._append(self.proposer(self, index))
            return
        for payload, cause in design_batch(self.ctx, self.state, repairs=repairs, new_indices=indices):
            self._append(payload, cause)

    def _new_env(self, index: int) -> None:
        """Propose new slot ``index`` on its own (outside a design batch)."""
        payload = self.proposer(self, index) if self.proposer is not None else new_env(self.ctx, self.state, index)
        self._append(payload)

    def _replay(self) -> bool:
        """Level replay (``replay.enabled``): record the slot's choice when it replays an archived
        environment (:func:`.level_replay.choose_replay`; its plays are then the pending work)."""
        if self.proposer is not None or not self.cfg.replay.enabled:
            return False
        choice = choose_replay(self.cfg.replay, self.cfg.loop, self.state, seed=self.cfg.seed, policy_version=self.ctx.policy.version)
        if choice is None:
            return False
        self._append(choice)
        return True

    def _train(self, *, flush: bool) -> None:
        """Training between environments: the in-process trainer (if any) trains on every group
        completed so far (``flush``: also a last partial batch), and the policy loads the result
        before the next environment is proposed and played."""
        if self.trainer is None or self.stopping:
            return
        if self.trainer.run(flush=flush):
            self._refresh()
            self._maybe_load_policy()

    def _advance_batch(self, todo: list[EnvState]) -> None:
        if len(todo) > 1 and self._next_stage(todo[0]) != "validate":
            self._advance_concurrently(todo)
            return
        if len(todo) > 1 or self._next_stage(todo[0]) == "validate":
            verdicts = stages.validate_batch(self.ctx, [st.proposed for st in todo])  # type: ignore[misc]
            for st, verdict in zip(todo, verdicts):
                self._append(verdict, st.proposed_id)
            return
        self._advance(todo[0])

    def _advance_concurrently(self, todo: list[EnvState]) -> None:
        """The next stage of each of ``todo`` at once (``loop.concurrent_envs``), one thread each:
        their model calls are merged into single calls (:class:`~spade_engine.policy.batching.BatchingPolicy`),
        each gets its share of the sandbox workers, every output is appended as it comes (under a
        lock) and the state is folded once all are done (each stage reads only its own
        environment and what was folded before it)."""
        import dataclasses

        from ..policy.batching import BatchingPolicy

        broker = BatchingPolicy(self.ctx.policy, len(todo))
        share = max(1, self.cfg.sandbox.workers // len(todo))
        cfg = self.cfg.model_copy(update={"sandbox": self.cfg.sandbox.model_copy(update={"workers": share})})
        ctx = dataclasses.replace(self.ctx, policy=broker, cfg=cfg)
        lock = threading.Lock()
        errors: list[BaseException] = []
        abandoned = threading.Event()  # the engine's thread left (an interrupt): nothing more is recorded

        def emit(payload: EventPayload, causation_id: str | None = None) -> str:
            with lock:
                if abandoned.is_set():
                    raise StageAbandoned(f"the run stopped while environment stages ran: {type(payload).__name__} not recorded")
                return self._append(payload, causation_id, refresh=False)

        def work(st: EnvState, stage: str) -> None:
            try:
                run_stage(ctx, self.state, st, stage, emit, should_stop=lambda: self.stopping)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the engine's thread below
                errors.append(exc)
            finally:
                broker.leave()

        threads = []
        for st in todo:
            stage = self._next_stage(st)
            if stage is None:
                broker.leave()
                continue
            threads.append(threading.Thread(target=work, args=(st, stage), name=f"env-{st.env_id}", daemon=True))
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        except BaseException:
            # interrupted while the stages run (Ctrl-C): the run records its RunStopped next, and a
            # stage still running (its threads are daemons, stopped when the policy closes) must not
            # append after it
            with lock:
                abandoned.set()
            raise
        self._refresh()
        if errors:
            raise errors[0]

    def _advance(self, st: EnvState) -> None:
        stage = self._next_stage(st)
        if stage is not None:
            run_stage(self.ctx, self.state, st, stage, self._append, should_stop=lambda: self.stopping)

    def _maybe_load_policy(self) -> None:
        loaded = load_latest_policy(self.ctx.policy, self.state, self.blobs)
        if loaded is not None:
            self._append(loaded)
