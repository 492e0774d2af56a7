"""Assembling a runnable engine for a run: policy, corpus, sandbox, validator, memory, projections.

:func:`make_policy` builds the configured policy backend; :func:`open_engine` opens (or creates) a
run and returns an :class:`OpenEngine` holding the :class:`~.loop.Engine` and everything that must
be closed after it (sandbox pool, projections, log, the run lock). Run selection for ``start``
lives in :func:`resolve_start_run`: resume the given run, else the latest unfinished one, else
create a new run (``new=True`` always creates one).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..blobs import BlobStore
from ..config import EngineConfig, PolicyConfig
from ..errors import ConfigError, SpadeError
from ..events.errors import RunNotFound
from ..events.log import EventLog
from ..events.store import DataDir, list_runs, new_run_id, open_event_log, resolve_run
from .corpus import Corpus
from .loop import Engine, EngineLock
from ..policy.protocol import Policy
from .state import RunState
from .stages import StageContext

__all__ = ["make_policy", "resolve_start_run", "open_engine", "OpenEngine", "recorded_config"]


def make_policy(cfg: PolicyConfig, *, band: tuple[float, float] = (0.4, 0.6)) -> Policy:
    """The policy backend named by ``cfg.kind``."""
    if cfg.kind == "procedural":
        from ..policy.procedural import ProceduralPolicy

        return ProceduralPolicy(
            skill=cfg.agent_skill, hint_gain=cfg.hint_gain, adaptive=cfg.adaptive, defect_rate=cfg.defect_rate,
            repair_success=cfg.repair_success, band=band,
        )
    if not cfg.model:
        raise SpadeError(f"the {cfg.kind} policy needs a model (--model NAME_OR_PATH)")
    if cfg.kind == "transformers":
        try:
            from ..policy.transformers_policy import TransformersPolicy
        except ImportError as exc:
            raise SpadeError(f"the transformers policy is not available: {exc}") from None
        return TransformersPolicy.from_pretrained(
            cfg.model,
            device=cfg.device,
            dtype=cfg.dtype,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
        )
    if cfg.kind == "vllm":
        try:
            from ..policy.vllm_policy import VllmPolicy
        except ImportError as exc:
            raise SpadeError(f"the vLLM policy is not available (pip install 'spade-engine[gpu]'): {exc}") from None
        return VllmPolicy(cfg.model, dtype=cfg.dtype, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
    raise SpadeError(f"unknown policy kind {cfg.kind!r}")


def _quiet_model_loading(*, single_thread: bool) -> None:
    """No progress bars while loading the embedding model; with the procedural policy the small
    embedding model is the only torch work, so one intra-op thread avoids oversubscribing the
    cores the sandbox workers use."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass
    if single_thread:
        import torch

        torch.set_num_threads(1)


def recorded_config(log: EventLog) -> dict[str, Any] | None:
    """The config recorded by the run's first RunStarted, if any."""
    return RunState.from_log(log).config


def resolve_start_run(
    run: str | None, *, data_dir: Path, backend: str, bootstrap: str | None, new: bool
) -> tuple[str, bool]:
    """``(run_id, create)``: the run ``start`` should drive (see the module docstring)."""
    if new:
        return new_run_id(), True
    if run is not None:
        return resolve_run(run, data_dir=data_dir, backend=backend, bootstrap=bootstrap), False  # type: ignore[arg-type]
    try:
        runs = list_runs(data_dir=data_dir, backend=backend, bootstrap=bootstrap)  # type: ignore[arg-type]
    except RunNotFound:
        runs = []
    if runs:
        latest = runs[-1]
        log = open_event_log(latest, data_dir=data_dir, backend=backend, bootstrap=bootstrap)  # type: ignore[arg-type]
        try:
            state = RunState.from_log(log)
        finally:
            log.close()
        if state.starts and not state.finished:
            return latest, False
    return new_run_id(), True


@dataclass
class OpenEngine:
    """An engine ready to run, and what to close after it."""

    engine: Engine
    run_id: str
    run_dir: Path
    created: bool
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for fn in reversed(self.closers):
            with contextlib.suppress(Exception):
                fn()
        self.closers.clear()

    def __enter__(self) -> "OpenEngine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def require_trainable(cfg: EngineConfig) -> None:
    """``trainer.enabled`` needs a policy with weights (``policy.kind`` transformers or vllm and a
    ``policy.model``); the procedural simulation has none, so that is a configuration error."""
    if cfg.trainer.enabled and (cfg.policy.kind == "procedural" or not cfg.policy.model):
        raise ConfigError(
            "trainer.enabled needs a model to train: set policy.kind = \"transformers\" and policy.model "
            "(or pass --model); the procedural policy is a simulation without weights"
        )


def make_inprocess_trainer(cfg: EngineConfig, log: Any, blobs: BlobStore) -> Any:
    """The trainer of ``trainer.enabled``: trains the run's own model between environments.

    It needs a policy with weights (see :func:`require_trainable`)."""
    require_trainable(cfg)
    from ..trainer.loop import Trainer

    return Trainer(log, blobs=blobs, config=cfg.trainer, base_model=cfg.policy.model, temperature=cfg.policy.temperature)


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
) -> OpenEngine:
    """Open the run's log, sandbox pool, validator, memory and projections, and build the engine."""
    from ..sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout
    from ..sandbox.validator import Validator

    require_trainable(cfg)
    closers: list[Any] = []
    try:
        run_dir = DataDir(data_dir).run_dir(run_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = EngineLock(run_dir).acquire()
        closers.append(lock.release)
        log = open_event_log(
            run_id, data_dir=data_dir, backend=cfg.log.backend, bootstrap=cfg.log.bootstrap, create=create,
            partitions=cfg.log.partitions,
        )
        closers.append(log.close)
        corpus = corpus or Corpus.from_paths(cfg.loop.corpus)
        band = (cfg.reward.band_low, cfg.reward.band_high)
        policy = policy or make_policy(cfg.policy, band=band)
        closers.append(getattr(policy, "close", lambda: None))
        pool = SandboxPool(cfg.sandbox)
        closers.append(pool.close)
        validator = Validator(pool, turn_limit=cfg.loop.turn_limit)
        runner = None
        memory = embedder = encode = None
        model_name = ""
        if projections:
            from ..archive.embedder import Embedder
            from ..archive.memory import encode_embedding
            from ..archive.replay import open_live_projections
            from ..consumers.runner import EmbeddedRunner

            projs = open_live_projections(run_dir, cfg)
            closers.append(projs.close)
            runner = EmbeddedRunner(log, projs.all, flush_every=200, flush_interval_s=2.0)
            closers.append(runner.flush)
            memory, encode = projs.memory, encode_embedding
            _quiet_model_loading(single_thread=cfg.policy.kind == "procedural")
            embedder = Embedder(cfg.memory.embedding_model)
            model_name = cfg.memory.embedding_model
        ctx = StageContext(
            run_id=run_id,
            cfg=cfg,
            policy=policy,
            corpus=corpus,
            validator=validator,
            pool=pool,
            memory=memory,
            embedder=embedder,
            embedding_model=model_name,
            encode_embedding=encode,
            sandbox_layers=dict(pool.layers),
            step_errors=((StepTimeout,), (SandboxCrash, SandboxError)),
            tokenize=getattr(getattr(policy, "tokenizer", None), "tokenize", None),
        )
        blobs = BlobStore(DataDir(data_dir).blobs_dir)
        engine = Engine(
            log=log, cfg=cfg, ctx=ctx, runner=runner, blobs=blobs, parent_run_id=parent_run_id,
            trainer=make_inprocess_trainer(cfg, log, blobs) if cfg.trainer.enabled else None,
        )
        return OpenEngine(engine=engine, run_id=run_id, run_dir=run_dir, created=create, closers=closers)
    except BaseException:
        for fn in reversed(closers):
            with contextlib.suppress(Exception):
                fn()
        raise
