"""Environment sources: where a run's new environments come from (``loop.env_source``,
``spade-engine start --env-source``).

By default the designer writes them. A *fixed* source replaces the designer with a pool that
does not adapt, the baselines SPADE's claim is measured against, while every other stage stays
the same (sandboxed validation, hints, k plain + k hinted plays, regret, the trainer), so the
log of a baseline run has the same events as any other and every tool reads it:

* :mod:`.spec`     parsing the source text
* :mod:`.scorer`   the answer scorer embedded in wrapped reasoning-gym items (standard library)
* :mod:`.rgpool`   reasoning-gym items (training seeds) wrapped as single- or multi-turn environments
* :mod:`.textarena_pool`  textarena single-player game instances wrapped as multi-turn environments
* :mod:`.archive`  a recorded run's accepted environments (also what ``retrain`` replays)
* :mod:`.sources`  the proposers the engine calls

A fixed source implies ``loop.max_repairs = 0`` (nothing to repair: the designer is not called)
and ``memory.novelty_threshold = 0`` (a pool's items are the pool, not duplicates to reject;
novelty is still computed and recorded), see :func:`fixed_source_overrides`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .spec import EnvSourceError, EnvSourceSpec, parse_env_source, source_of

if TYPE_CHECKING:
    from ..config import EvalConfig, LogConfig, LoopConfig
    from .sources import EnvSource

__all__ = [
    "EnvSourceError",
    "EnvSourceSpec",
    "parse_env_source",
    "open_env_source",
    "fixed_source_overrides",
    "source_run_policy",
    "source_preload",
]


def fixed_source_overrides(spec: EnvSourceSpec) -> dict[str, Any]:
    """Config overrides a fixed source implies (none for the designer)."""
    if not spec.fixed:
        return {}
    return {"loop.max_repairs": 0, "memory.novelty_threshold": 0.0}


def source_run_policy(spec: EnvSourceSpec, *, data_dir: Path, backend: str = "sqlite", bootstrap: str | None = None) -> dict[str, Any]:
    """For ``archive:RUN``: the policy overrides that reuse the source run's recorded policy
    (kind and model), when the new run is given no ``--model``."""
    if spec.kind != "archive":
        return {}
    from ..events.store import open_event_log, resolve_run
    from ..recorded import recorded_config_or_default

    run_id = resolve_run(spec.run, data_dir=data_dir, backend=backend, bootstrap=bootstrap)
    log = open_event_log(run_id, data_dir=data_dir, backend=backend, bootstrap=bootstrap, read_only=True)
    try:
        cfg = recorded_config_or_default(log)
    finally:
        log.close()
    return {"policy.kind": cfg.policy.kind, "policy.model": cfg.policy.model}


def open_env_source(loop: LoopConfig, eval_cfg: EvalConfig, log: LogConfig, *, seed: int | None, data_dir: Path) -> EnvSource:
    """The source named by ``loop.env_source`` for a run with ``seed`` (its items are drawn with
    it), its ``[eval]`` section (a pool leaves out the items of its held-out suites) and its
    ``[log]`` section (where an ``archive:RUN`` source's run is read); raises
    :class:`EnvSourceError` for the designer or a source that cannot be built."""
    if seed is None:
        raise ValueError("open_env_source needs the run's seed: draw it first (EngineConfig.with_run_seed)")
    spec = source_of(loop)
    if spec.kind == "reasoning-gym":
        from .rgpool import build_pool
        from .sources import PoolSource

        if spec.turns > loop.turn_limit:
            raise EnvSourceError(
                f"env source turns={spec.turns} exceeds loop.turn_limit={loop.turn_limit}: an episode must end "
                "within the turn limit"
            )
        exclude = (tuple(eval_cfg.suites), eval_cfg.size, eval_cfg.seed) if eval_cfg.every > 0 else None
        pool = build_pool(spec.tasks, size=spec.size, turns=spec.turns, seed=seed, exclude_eval=exclude)
        return PoolSource(pool=pool, text=loop.env_source)
    if spec.kind == "textarena":
        from .sources import PoolSource
        from .textarena_pool import TextArenaError, build_pool as build_textarena_pool

        try:
            ta_pool = build_textarena_pool(spec.tasks, size=spec.size, seed=seed)
        except TextArenaError as exc:
            raise EnvSourceError(str(exc)) from None
        return PoolSource(pool=ta_pool, text=loop.env_source)
    if spec.kind == "archive":
        from ..events.store import open_event_log, resolve_run
        from .archive import recorded_curriculum
        from .sources import ArchiveSource

        run_id = resolve_run(spec.run, data_dir=data_dir, backend=log.backend, bootstrap=log.bootstrap)
        source_log = open_event_log(run_id, data_dir=data_dir, backend=log.backend, bootstrap=log.bootstrap, read_only=True)
        try:
            curriculum = recorded_curriculum(source_log)
        finally:
            source_log.close()
        if not curriculum:
            raise EnvSourceError(f"run {run_id} has no accepted environments to replay")
        return ArchiveSource(run_id=run_id, curriculum=curriculum)
    raise EnvSourceError("loop.env_source is the designer: there is no source to open")


def source_preload(loop: LoopConfig) -> list[str]:
    """Modules the sandbox workers of a run with ``loop``'s source import before isolation
    (textarena for ``textarena:...``; none otherwise). Derived from the source's kind, never from
    a recorded module list, so an imported log cannot choose what runs before isolation."""
    try:
        spec = source_of(loop)
    except EnvSourceError:
        return []
    if spec.kind == "textarena":
        from .textarena_pool import sandbox_preload

        return sandbox_preload()
    return []
