"""Building a run's stage context: the one place that assembles policy, corpus, sandbox,
validator, novelty memory and embedder for every driver and role.

The single-process engine (``start``), the designer worker and the group roles (validator,
rollout, regret) all call :func:`build_context` (the engine and the designer also load the seed
archive of ``loop.seed_envs``); :data:`ROLE_NEEDS` says which parts each role
uses, so a role never loads what it does not need (the regret worker loads no model and starts
no sandbox). What was opened is closed by :meth:`RunContext.close`, in reverse order.

Memory: the engine feeds the run's live projections (archive, memory, difficulty in the run
directory) through an embedded runner; workers keep a private in-process memory fed from the log
(:class:`~spade_engine.engine.worker.MemoryFeed`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..config import EngineConfig
from ..engine.corpus import Corpus
from ..engine.stages import StageContext
from ..events.log import EventLog
from ..policy.protocol import Policy
from ..policy.registry import make_policy

if TYPE_CHECKING:  # pragma: no cover
    from ..consumers.projection import Projection
    from ..consumers.runner import EmbeddedRunner

__all__ = ["Role", "ROLE_NEEDS", "RunContext", "build_context", "close_all", "live_projection_runner", "quiet_model_loading"]

Role = Literal["engine", "designer", "validator", "rollout", "regret"]

#: the parts of a context each role uses
ROLE_NEEDS: dict[str, frozenset[str]] = {
    "engine": frozenset({"policy", "corpus", "sandbox", "validator", "memory", "embedder", "seeds"}),
    "designer": frozenset({"policy", "corpus", "memory", "seeds"}),
    "validator": frozenset({"sandbox", "validator", "memory", "embedder", "seeds"}),
    "rollout": frozenset({"sandbox", "policy"}),
    "regret": frozenset(),
}


def quiet_model_loading(*, single_thread: bool) -> None:
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


def close_all(closers: list[Callable[[], object]]) -> None:
    """Call every closer, last opened first, whatever each raises; empty the list."""
    for fn in reversed(closers):
        with contextlib.suppress(Exception):
            fn()
    closers.clear()


@dataclass
class RunContext:
    """A built :class:`StageContext` and what must be closed after it."""

    ctx: StageContext
    role: str
    runner: Any = None  # engine: the embedded projection runner feeding the live projections
    feed: Any = None  # designer/validator workers: the private memory fed from the log
    closers: list[Callable[[], object]] = field(default_factory=list)

    def close(self) -> None:
        close_all(self.closers)

    def __enter__(self) -> "RunContext":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def live_projection_runner(log: EventLog, projections: Sequence["Projection"]) -> "EmbeddedRunner":
    """The engine's runner of its live projections: the engine catches up after every event it
    appends, so the runner flushes the projections and commits offsets every 200 records or 2 s
    (``lazy_flush``), not after each of those catch-ups (once per event made a Kafka run crawl);
    the context's closers flush what is left."""
    from ..consumers.runner import EmbeddedRunner

    return EmbeddedRunner(log, projections, flush_every=200, flush_interval_s=2.0, lazy_flush=True)


def _tokenizer_of(policy: Policy | None) -> Callable[[str], Any] | None:
    if policy is None or policy.tokenize("a") is None:
        return None
    return policy.tokenize


def build_context(
    cfg: EngineConfig,
    *,
    role: Role,
    log: EventLog,
    run_dir: Path | None = None,
    data_dir: Path | None = None,
    policy: Policy | None = None,
    corpus: Corpus | None = None,
    memory: bool = True,
) -> RunContext:
    """The stage context of ``role`` on ``log`` (see the module docstring).

    Args:
        policy, corpus: use these instead of building them (the caller keeps ownership).
        memory: ``False`` turns the novelty memory and embedder off (the engine's
            ``projections=False``, the validator's ``--no-novelty``).
        run_dir: the run's directory (the engine's live projections live there).
        data_dir: the data directory (where catalogue model names are looked up).
    """
    needs = ROLE_NEEDS[role]
    built = RunContext(ctx=None, role=role)  # type: ignore[arg-type]
    try:
        kw: dict[str, Any] = {}
        if "policy" in needs and policy is None:
            policy = make_policy(cfg.policy, band=(cfg.reward.band_low, cfg.reward.band_high), data_dir=data_dir)
            built.closers.append(policy.close)
        if "corpus" in needs and corpus is None:
            corpus = Corpus.from_paths(cfg.loop.corpus)
        if "sandbox" in needs:
            from ..sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout

            from ..envsources import source_preload

            sandbox_cfg = cfg.sandbox
            extra = [m for m in source_preload(cfg.loop) if m not in sandbox_cfg.preload_modules]
            if extra:  # e.g. textarena, which imports modules the sandbox forbids after isolation
                sandbox_cfg = sandbox_cfg.model_copy(update={"preload_modules": [*sandbox_cfg.preload_modules, *extra]})
            pool = SandboxPool(sandbox_cfg)
            built.closers.append(pool.close)
            kw.update(pool=pool, sandbox_layers=dict(pool.layers), step_errors=((StepTimeout,), (SandboxCrash, SandboxError)))
            if "validator" in needs:
                from ..sandbox.validator import Validator

                kw["validator"] = Validator(pool, turn_limit=cfg.loop.turn_limit)
        if "memory" in needs and memory:
            if role == "engine":
                from ..archive.memory import encode_embedding
                from ..archive.replay import open_checked_projections

                assert run_dir is not None, "the engine's live projections need the run directory"
                projs = open_checked_projections(run_dir, cfg, log)  # rebuilt when ahead of the log
                built.closers.append(projs.close)
                built.runner = live_projection_runner(log, projs.all)
                built.closers.append(built.runner.flush)
                kw.update(memory=projs.memory, encode_embedding=encode_embedding)
            else:
                from ..archive.memory import encode_embedding
                from ..engine.worker import MemoryFeed

                built.feed = MemoryFeed(log, cfg)
                built.closers.append(built.feed.close)
                kw.update(memory=built.feed.memory, encode_embedding=encode_embedding)
            if "embedder" in needs:
                from ..archive.embedder import Embedder

                from ..policy.registry import backend as policy_backend

                quiet_model_loading(single_thread=role != "engine" or not policy_backend(cfg.policy.kind).needs_model)
                embedder = Embedder(cfg.memory.embedding_model)
                if role != "engine":
                    embedder.embed(["warm-up"])  # load the model before joining the group, not on the first input
                kw.update(embedder=embedder, embedding_model=cfg.memory.embedding_model)
        if "seeds" in needs:
            from ..engine.seed_archive import load_seed_envs, resolve_seed_spec
            from ..policy.registry import backend as policy_backend

            spec = resolve_seed_spec(
                cfg.loop.seed_envs, needs_model=policy_backend(cfg.policy.kind).needs_model, fixed_source=bool(cfg.loop.env_source)
            )
            kw["seed_envs"] = load_seed_envs(spec) if spec else []
        built.ctx = StageContext(
            run_id=log.run_id, cfg=cfg, policy=policy, corpus=corpus, tokenize=_tokenizer_of(policy), **kw  # type: ignore[arg-type]
        )
        return built
    except BaseException:
        built.close()
        raise
