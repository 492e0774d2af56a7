"""``spade-engine train``: run the replay-driven trainer on a run's log (one-shot or ``--follow``)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..blobs import BlobStore
from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, open_run, out
from ..config import EngineConfig, load_config
from ..errors import ConfigError, SpadeError
from ..events.catalogue import PolicyUpdated, RunStarted
from ..events.log import EventLog
from ..events.store import resolve_data_dir

__all__ = ["train_command", "retrain_command", "run_retrain", "run_config", "base_model_of"]


def run_config(log: EventLog, config_file: Path | None, overrides: dict[str, Any]) -> EngineConfig:
    """The config a command should use for a run: ``--config`` if given, else the one recorded in
    the run's RunStarted, with flag overrides on top."""
    if config_file is not None:
        return load_config(config_file, overrides=overrides)
    for rec in log.read(limit=50):
        if rec.envelope.type == RunStarted.TYPE:
            try:
                cfg = EngineConfig.model_validate(rec.envelope.event().config)
            except Exception:  # noqa: BLE001 - a foreign/partial config: fall back to defaults
                break
            return cfg.with_overrides(overrides)
    return load_config(None, overrides=overrides)


def base_model_of(log: EventLog, cfg: EngineConfig, model: str | None) -> str:
    """``--model``, else the base model of earlier PolicyUpdated events, else the run's policy model."""
    if model:
        return model
    for rec in log.read():
        if rec.envelope.type == PolicyUpdated.TYPE:
            ev = rec.envelope.event()
            if ev.base_model:
                return ev.base_model
    if cfg.policy.kind == "transformers" and cfg.policy.model:
        return cfg.policy.model
    raise ConfigError("no model to train: pass --model (a local path, a hub id available offline, or tiny[:SEED])")


@handle_errors
def train_command(
    run: RunArg = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Base model: local path, hub id (offline) or tiny[:SEED]. Default: the run's.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep training as new events arrive (Ctrl-C to stop).")] = False,
    max_updates: Annotated[Optional[int], typer.Option("--max-updates", help="Stop after this many updates.", min=1)] = None,
    idle_timeout: Annotated[Optional[float], typer.Option("--idle-timeout", help="With --follow: stop after this many idle seconds.")] = None,
    config_file: Annotated[Optional[Path], typer.Option("--config", "-c", help="TOML config (default: the config recorded in the run).")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", help="Learning rate (trainer.learning_rate).")] = None,
    batch_groups: Annotated[Optional[int], typer.Option("--batch-groups", help="Groups per update (trainer.batch_groups).")] = None,
    device: Annotated[Optional[str], typer.Option("--device", help="cpu, cuda, cuda:1 or auto (trainer.device).")] = None,
    no_flush: Annotated[bool, typer.Option("--no-flush", help="One-shot: do not train on a last partial batch.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Train the shared policy on a run's plays: GRPO on the agent's plain plays and the designer's
    proposals, from the trainer's committed position. Each update writes a safetensors checkpoint
    to <data>/blobs and appends PolicyUpdated. Safe to kill at any time and start again."""
    from .loop import Trainer

    run_id, log = open_run(run, data_dir, backend, bootstrap)
    try:
        overrides = {"trainer.learning_rate": lr, "trainer.batch_groups": batch_groups, "trainer.device": device}
        cfg = run_config(log, config_file, overrides)
        base = base_model_of(log, cfg, model)
        blobs = BlobStore(resolve_data_dir(data_dir) / "blobs")

        def report(ev: PolicyUpdated) -> None:
            m = ev.metrics
            out.print(
                f"{ev.version} (parent {ev.parent_version}): loss {m.get('loss', 0):+.4f} "
                f"reward {m.get('agent_reward_mean', float('nan')):.3f} samples {int(m.get('samples', 0))} "
                f"zero-var {int(m.get('zero_variance_groups', 0))} stale {int(m.get('stale_dropped', 0))} "
                f"consumed {ev.consumed}",
                highlight=False,
            )

        trainer = Trainer(
            log, blobs=blobs, config=cfg.trainer, base_model=base, temperature=cfg.policy.temperature, on_update=report
        )
        if trainer.resumed_from is not None:
            out.print(f"resuming {run_id} from {trainer.state.version} (consumed {trainer.state.consumed})", highlight=False)
        stop = threading.Event()
        old = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            published = trainer.run(
                follow=follow, stop=stop, idle_timeout=idle_timeout, max_updates=max_updates, flush=not no_flush
            )
        except KeyboardInterrupt:
            published = trainer.updates
        finally:
            signal.signal(signal.SIGTERM, old)
        out.print(
            f"{len(published)} update(s); policy {trainer.state.version}; "
            f"already-trained groups skipped on resume: {trainer.assembler.already_trained}",
            highlight=False,
        )
    except SpadeError:
        raise
    finally:
        log.close()


def run_retrain(run: str | None, model: str, data_dir: Path | None, max_envs: int | None, backend: str = "sqlite",
                bootstrap: str | None = None) -> None:
    """Shared body of ``retrain`` and ``replay --retrain``: print one line per environment and a summary."""
    from .retrain import retrain_run

    run_id, log = open_run(run, data_dir, backend, bootstrap)
    try:
        out.print(f"retraining {model} on the curriculum of {run_id}", highlight=False)
        result = retrain_run(
            log, model=model, data_dir=resolve_data_dir(data_dir), max_envs=max_envs,
            on_env=lambda i, env_id: out.print(f"  environment {i + 1}: {env_id}", highlight=False),
        )
    finally:
        log.close()
    versions = ", ".join(u.version for u in result.updates) or "none (no group had reward variance)"
    out.print(
        f"new run {result.run_id} (parent {result.parent_run_id}): {result.environments} environments replayed, "
        f"versions trained: {versions}",
        highlight=False,
    )


@handle_errors
def retrain_command(
    run: RunArg = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Model to train: local path, hub id (offline) or tiny[:SEED].")] = ...,  # type: ignore[assignment]
    max_envs: Annotated[Optional[int], typer.Option("--max-envs", help="Replay only the first N environments.", min=1)] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Train a fresh MODEL on a recorded run's environments in their recorded order, generating new
    plays, as a NEW run linked to the old one (RunStarted.parent_run_id). Same as
    `spade-engine replay RUN --retrain --model M`."""
    run_retrain(run, model, data_dir, max_envs, backend, bootstrap)
