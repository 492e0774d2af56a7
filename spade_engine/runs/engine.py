"""Opening a runnable engine for a run: its log, the stage context (:mod:`.context`), the live
projections and, with ``trainer.enabled``, the in-process trainer (built by
:func:`~.training.build_trainer`; with ``eval.every`` > 0 it is handed a periodic held-out
evaluator, :mod:`spade_engine.evaluation.periodic`, using the engine's policy).
With ``loop.env_source`` set, new environments come from that fixed source
(:mod:`spade_engine.envsources`) instead of the designer.

:func:`open_engine` opens (or creates) a run and returns an :class:`OpenEngine` holding the
:class:`~spade_engine.engine.loop.Engine` and everything that must be closed after it (sandbox
pool, projections, log, the run lock). Run selection for ``start`` lives in
:func:`resolve_start_run`: resume the given run, else the latest unfinished one, else create a
new run (``new=True`` always creates one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..blobs import BlobStore
from ..config import EngineConfig
from ..engine.corpus import Corpus
from ..engine.loop import Engine, EngineLock
from ..engine.state import RunState
from ..errors import ConfigError
from ..events.catalogue import EventPayload
from ..events.errors import RunNotFound
from ..events.store import DataDir, engine_runs, list_runs, new_run_id, open_event_log, resolve_run
from ..policy.protocol import Policy
from ..policy.registry import backend as policy_backend
from .context import build_context, close_all

__all__ = ["resolve_start_run", "forget_unstarted_run", "open_engine", "OpenEngine", "require_trainable", "make_inprocess_trainer"]


def resolve_start_run(
    run: str | None, *, data_dir: Path, backend: str, bootstrap: str | None, new: bool
) -> tuple[str, bool]:
    """``(run_id, create)``: the run ``start`` should drive (see the module docstring). A latest
    run that never started (no RunStarted: a start killed before it recorded anything) is
    resumed, not left behind."""
    if new:
        return new_run_id(), True
    if run is not None:
        return resolve_run(run, data_dir=data_dir, backend=backend, bootstrap=bootstrap), False
    try:
        # the evaluations log (``spade-engine eval --model``) is never a run to resume
        runs = engine_runs(list_runs(data_dir=data_dir, backend=backend, bootstrap=bootstrap))
    except RunNotFound:
        runs = []
    if runs:
        latest = runs[-1]
        log = open_event_log(latest, data_dir=data_dir, backend=backend, bootstrap=bootstrap)
        try:
            state = RunState.from_log(log)
        finally:
            log.close()
        if not state.finished:  # unfinished, or never started
            return latest, False
    return new_run_id(), True


def forget_unstarted_run(run_id: str, *, data_dir: Path, backend: str, bootstrap: str | None) -> bool:
    """Remove a run ``start`` just created when its start failed or was interrupted before it
    recorded anything (a model that would not load, Ctrl-C while loading): its log and its
    directory. A run with any event is kept. Returns whether it was removed."""
    import shutil

    from ..events.backends import log_backend

    try:
        log = open_event_log(run_id, data_dir=data_dir, backend=backend, bootstrap=bootstrap)
    except RunNotFound:
        log = None
    except Exception:  # noqa: BLE001 - a log that cannot even be opened now: leave it for the user to see
        return False
    if log is not None:
        try:
            recorded = next(iter(log.read(limit=1)), None) is not None
        finally:
            log.close()
        if recorded:
            return False
        remove = log_backend(backend).remove
        if remove is not None:
            remove(run_id, data_dir=data_dir, bootstrap=bootstrap)
    shutil.rmtree(DataDir(data_dir).run_dir(run_id), ignore_errors=True)
    return True


@dataclass
class OpenEngine:
    """An engine ready to run, and what to close after it."""

    engine: Engine
    run_id: str
    run_dir: Path
    created: bool
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        close_all(self.closers)

    def __enter__(self) -> "OpenEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def require_trainable(cfg: EngineConfig) -> None:
    """``trainer.enabled`` needs a policy with weights (a trainable backend such as transformers
    or vllm, and a ``policy.model``); the procedural simulation has none, so that is a
    configuration error."""
    if cfg.trainer.enabled and (not policy_backend(cfg.policy.kind).trainable or not cfg.policy.model):
        raise ConfigError(
            "trainer.enabled needs a model to train: set policy.kind = \"transformers\" and policy.model "
            "(or pass --model); the procedural policy is a simulation without weights"
        )


def make_inprocess_trainer(
    cfg: EngineConfig, log: Any, blobs: BlobStore, *, data_dir: Path | None = None, evaluator: Any = None
) -> Any:
    """The trainer of ``trainer.enabled``: trains the run's own model between environments
    (:func:`~.training.build_trainer`), with ``evaluator`` told about its versions.

    It needs a policy with weights (see :func:`require_trainable`)."""
    require_trainable(cfg)
    from .training import build_trainer

    return build_trainer(cfg, log, blobs, data_dir=data_dir, evaluator=evaluator)


def open_engine(
    cfg: EngineConfig,
    *,
    run_id: str,
    data_dir: Path,
    create: bool,
    policy: Policy | None = None,
    corpus: Corpus | None = None,
    projections: bool = True,
    parent_run_id: str | None = None,
    proposer: Callable[[Engine, int], EventPayload] | None = None,
) -> OpenEngine:
    """Open the run's log, sandbox pool, validator, memory and projections, and build the engine.

    New environments come from ``proposer`` when given (curriculum replay), else from the
    ``loop.env_source`` of the config (:mod:`spade_engine.envsources`), else from the designer."""
    require_trainable(cfg)
    cfg = cfg.with_run_seed()  # a run given no seed draws one here (recorded in RunStarted)
    closers: list[Any] = []
    try:
        if proposer is None and cfg.loop.env_source:
            from ..envsources import open_env_source

            # built first: a source that cannot be built leaves no run behind
            source = open_env_source(cfg.loop, cfg.eval, cfg.log, seed=cfg.seed, data_dir=data_dir)
            closers.append(source.close)
            proposer = source.propose
        run_dir = DataDir(data_dir).run_dir(run_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = EngineLock(run_dir).acquire()
        closers.append(lock.release)
        log = open_event_log(
            run_id, data_dir=data_dir, backend=cfg.log.backend, bootstrap=cfg.log.bootstrap, create=create,
            partitions=cfg.log.partitions,
        )
        closers.append(log.close)
        built = build_context(
            cfg, role="engine", log=log, run_dir=run_dir, data_dir=data_dir, policy=policy, corpus=corpus, memory=projections
        )
        closers.append(built.close)
        blobs = BlobStore(DataDir(data_dir).blobs_dir)
        trainer = None
        if cfg.trainer.enabled:
            evaluator = None
            if cfg.eval.every > 0:
                from ..evaluation.periodic import PeriodicEvaluator, run_log_opener

                # the engine's own policy: it loads each new version before the next environment anyway
                evaluator = PeriodicEvaluator(
                    cfg.eval, log=log, blobs=blobs, policy=built.ctx.policy, pool=built.ctx.pool, sandbox=cfg.sandbox,
                    open_log=run_log_opener(data_dir, backend=cfg.log.backend, bootstrap=cfg.log.bootstrap),
                    model=cfg.policy.model,
                    on_progress=lambda task, done, total, ctx=built.ctx: ctx.activity(
                        f"held-out evaluation: {task} {done}/{total} items"),
                )
                closers.append(evaluator.close)
            trainer = make_inprocess_trainer(cfg, log, blobs, data_dir=data_dir, evaluator=evaluator)
        engine = Engine(
            log=log, cfg=cfg, ctx=built.ctx, runner=built.runner, blobs=blobs, parent_run_id=parent_run_id,
            trainer=trainer, proposer=proposer,
        )
        return OpenEngine(engine=engine, run_id=run_id, run_dir=run_dir, created=create, closers=closers)
    except BaseException:
        close_all(closers)
        raise
