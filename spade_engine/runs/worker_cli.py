"""`spade-engine worker ROLE`: run one role of the loop as a long-running process (distributed mode).

Run selection: the ``designer`` creates a new run (``--new``; with ``--run ID --new`` under that
id), or resumes ``--run``/the latest unfinished run, and records RunStarted. Every other role
attaches to ``--run`` (default: the latest run), waiting up to ``--wait`` seconds for the run and
its RunStarted, and uses the config recorded there, so all processes of a run share one config;
the ``[sandbox]`` section is always local to a process (defaults < ``[sandbox]`` of ``--config`` <
``SPADE_SANDBOX__*`` < ``--sandbox-workers``), never taken from the log.
SIGTERM/SIGINT stop a worker after its current input (which is then committed, or re-delivered).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, handle_errors, new_run_place
from ..textout import note, styled
from ..config import EngineConfig
from ..engine.worker import ROLES
from ..errors import SpadeError
from ..events.errors import RunNotFound
from ..events.backends import log_backend
from ..events.store import DataDir, open_event_log, resolve_data_dir, resolve_run
from ..recorded import recorded_config, with_local_sandbox
from .run_config import run_config_for

__all__ = ["worker"]


def _attach(run: str | None, root: Path, backend: str, boot: str | None, wait_s: float) -> tuple[str, Any, EngineConfig]:
    """Open the run (latest by default) once it exists and has a RunStarted; return its config."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            run_id = resolve_run(run, data_dir=root, backend=backend, bootstrap=boot)
            log = open_event_log(run_id, data_dir=root, backend=backend, bootstrap=boot)
            try:
                config = recorded_config(log)
            except BaseException:
                log.close()
                raise
            if config is not None:
                return run_id, log, config
            log.close()
        except RunNotFound:
            pass
        if time.monotonic() >= deadline:
            raise SpadeError(f"no started run {run or '(latest)'} to attach to after {wait_s:g}s: start a designer first")
        time.sleep(1.0)


def _local(cfg: EngineConfig, config: Path | None, sandbox_workers: int | None) -> EngineConfig:
    """The run's recorded config with this process's sandbox section (never the log's)."""
    return with_local_sandbox(cfg, config).with_overrides({"sandbox.workers": sandbox_workers})


@handle_errors
def worker(
    role: Annotated[str, typer.Argument(help=f"The role: {', '.join(ROLES)}.", show_default=False)],
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
    data_dir: DataDirOpt = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML config (a new run's config; other roles use only its [sandbox]).", show_default=False)] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Run id or prefix (default: the latest run).", show_default=False)] = None,
    new: Annotated[bool, typer.Option("--new", help="designer: create a new run (named --run if given).")] = False,
    max_envs: Annotated[Optional[int], typer.Option("--max-envs", help="designer: stop proposing after this many new environments (default: continuously).", show_default=False)] = None,
    plays: Annotated[Optional[int], typer.Option("--plays", help="designer, new run: k plain and k hinted plays per environment.", show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="designer, new run: run seed.", show_default=False)] = None,
    partitions: Annotated[Optional[int], typer.Option("--partitions", help="designer, new Kafka run: topic partitions (the most members a group can use).", show_default=False)] = None,
    ahead: Annotated[int, typer.Option("--ahead", help="designer: most unfinished environments at once (regret guides the next ones).")] = 8,
    sandbox_workers: Annotated[Optional[int], typer.Option("--sandbox-workers", help="Sandbox processes of this worker (validator, rollout).", show_default=False)] = None,
    novelty: Annotated[bool, typer.Option("--novelty/--no-novelty", help="validator: embedding novelty check (loads the sentence-embedding model).")] = True,
    session_timeout: Annotated[float, typer.Option("--session-timeout", help="Seconds before the group gives a silent (dead) member's partitions to the others.")] = 10.0,
    until_idle: Annotated[Optional[float], typer.Option("--until-idle", help="Exit after this many seconds without input (default: run until SIGTERM).", show_default=False)] = None,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for the run to exist (non-designer roles).")] = 300.0,
    archive_url: Annotated[Optional[str], typer.Option("--archive-url", envvar="SPADE_ARCHIVE_URL", help="consumers: archive database URL (default: SQLite in the run directory).", show_default=False)] = None,
) -> None:
    """Run one stage of the self-play loop as a long-running worker on the run's event log.

    Roles: designer (proposals, repairs, RunStarted/RunStopped), validator, rollout (hint +
    plays), regret, consumers (projections: archive, memory, difficulty, statistics), trainer.
    validator/rollout/regret read their inputs through a consumer group, so replicas split the
    environments and a killed replica's work moves to the others.
    """
    if role not in ROLES:
        raise SpadeError(f"unknown role {role!r} (expected one of: {', '.join(ROLES)})")
    root = resolve_data_dir(data_dir)
    b, boot = new_run_place(backend, bootstrap)  # workers share a broker: Kafka when a bootstrap is given
    stop = threading.Event()
    interrupts = [0]

    def on_signal(signum: int, frame: Any) -> None:
        interrupts[0] += 1
        if interrupts[0] > 1:
            raise KeyboardInterrupt
        stop.set()

    if threading.current_thread() is threading.main_thread() and role not in ("consumers",):
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def say(line: str) -> None:
        note(styled((role, "dim"), " ", (line, None)))

    if role == "designer":
        _designer(root, b, boot, config, run, new, max_envs, plays, seed, partitions, ahead, stop, say)
        return
    run_id, log, recorded = _attach(run, root, b, boot, wait)
    try:
        cfg = _local(recorded, config, sandbox_workers)
    except BaseException:
        log.close()
        raise
    say(f"attached to run {run_id} ({b})")
    try:
        if role in ("validator", "rollout", "regret"):
            stats = _group_role(role, log, cfg, root, novelty, stop, say, until_idle, session_timeout)
            say("stopped: " + json.dumps(stats.__dict__))
        elif role == "consumers":
            _consumers(log, cfg, root, b, boot, archive_url, until_idle, say)
        elif role == "trainer":
            _trainer(log, cfg, root, stop, until_idle, say)
    finally:
        with contextlib.suppress(Exception):
            log.close()


def _designer(root, b, boot, config, run, new, max_envs, plays, seed, partitions, ahead, stop, say) -> None:
    from ..blobs import BlobStore
    from ..engine.loop import Engine
    from ..engine.worker import DesignerWorker
    from .context import build_context
    from .engine import resolve_start_run

    if new and run is not None:
        run_id, create = run, True
    else:
        run_id, create = resolve_start_run(run, data_dir=root, backend=b, bootstrap=boot, new=new)
    flags: dict[str, Any] = {"loop.max_envs": max_envs, "loop.plays_per_env": plays}
    log = None
    recorded = None
    if not create:
        log = open_event_log(run_id, data_dir=root, backend=b, bootstrap=boot)
        try:
            recorded = recorded_config(log)
        except BaseException:
            log.close()
            raise
    flags.update({"log.backend": b, "log.bootstrap": boot})
    cfg = run_config_for(recorded, config_file=config, flags=flags,
                         new_run_flags={"seed": seed, "log.partitions": partitions}).with_run_seed()  # a new run given no seed draws one (recorded in RunStarted)
    source = None
    if cfg.loop.env_source:
        from ..envsources import open_env_source

        source = open_env_source(cfg.loop, cfg.eval, cfg.log, seed=cfg.seed, data_dir=root)  # before the log: a bad source leaves no run
    if log is None:
        log = open_event_log(run_id, data_dir=root, backend=b, bootstrap=boot, create=True, partitions=cfg.log.partitions)
    built = None
    try:
        built = build_context(cfg, role="designer", log=log, data_dir=root)
        engine = Engine(log=log, cfg=cfg, ctx=built.ctx, blobs=BlobStore(DataDir(root).blobs_dir),
                        proposer=source.propose if source is not None else None)
        designer = DesignerWorker(engine, ahead=ahead, memory=built.feed, say=say)
        engine.stop_event = stop
        designer.stop_event = stop
        say(f"{'new' if create else 'resuming'} run {run_id} ({b}, policy {cfg.policy.kind}, seed {cfg.seed}, "
            f"max envs {cfg.loop.max_envs or 'unbounded'})")
        reason = designer.serve()
        say(f"stopped ({reason}): {json.dumps(engine.counts())}")
    finally:
        if built is not None:
            built.close()
        log.close()


def _group_role(role, log, cfg, root, novelty, stop, say, until_idle, session_timeout):
    from ..blobs import BlobStore
    from ..engine.worker import RegretWorker, RolloutWorker, ValidatorWorker
    from .context import build_context

    with build_context(cfg, role=role, log=log, data_dir=root, memory=novelty) as built:
        if built.ctx.pool is not None:
            from ..sandbox.cli import warn_missing_layers

            warn_missing_layers(built.ctx.pool)
        blobs = BlobStore(DataDir(root).blobs_dir)
        cls = {"validator": ValidatorWorker, "rollout": RolloutWorker, "regret": RegretWorker}[role]
        extra = {"feed": built.feed} if role == "validator" else {}
        w = cls(log=log, cfg=cfg, ctx=built.ctx, blobs=blobs, say=say, stop_event=stop, **extra)
        return w.serve(until_idle=until_idle, session_timeout_s=session_timeout)


def _consumers(log, cfg, root, b, boot, archive_url, until_idle, say) -> None:
    from ..archive.replay import open_live_projections
    from ..consumers.cli import snapshot_path
    from ..consumers.runner import EmbeddedRunner
    from ..consumers.stats import RunStatsProjection

    run_id = log.run_id
    projs = open_live_projections(DataDir(root).run_dir(run_id), cfg, archive_url=archive_url)
    stats = RunStatsProjection(run_id, snapshot_path(root, run_id))
    try:
        if log_backend(b).consumer_driver == "faust":
            from ..consumers.faust_app import FaustRunner

            log.close()
            applied = FaustRunner(boot or "", run_id, [*projs.all, stats], idle_exit_s=until_idle).run()
        else:
            runner = EmbeddedRunner(log, [*projs.all, stats])
            try:
                applied = runner.run(idle_timeout=until_idle)
            except KeyboardInterrupt:
                runner.flush()
                applied = runner.applied
        say(f"applied {applied} records")
    finally:
        projs.close()


def _trainer(log, cfg, root, stop, until_idle, say) -> None:
    from ..blobs import BlobStore
    from ..evaluation.periodic import standalone_evaluator
    from .training import build_trainer

    blobs = BlobStore(DataDir(root).blobs_dir)
    base = cfg.policy.model or "tiny"
    evaluator = standalone_evaluator(
        cfg, log, blobs, base_model=base, data_dir=root,
        on_result=lambda version, events: say(f"evaluated {version}: " + ", ".join(f"{e.task} {e.accuracy:.3f}" for e in events)),
    )
    try:
        trainer = build_trainer(
            cfg, log, blobs, base_model=base, data_dir=root, evaluator=evaluator,
            on_update=lambda ev: say(f"published {ev.version} ({len(ev.env_ids)} environments)"),
        )
        published = trainer.run(follow=True, stop=stop, idle_timeout=until_idle)
    finally:
        if evaluator is not None:
            evaluator.close()
    say(f"stopped after {len(published)} updates")
