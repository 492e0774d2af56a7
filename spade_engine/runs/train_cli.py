"""``spade-engine train``: run the replay-driven trainer on a run's log (one-shot or ``--follow``),
with the periodic held-out evaluator of ``[eval]`` beside it.

It lives in ``runs`` (not ``trainer``) because it wires the trainer to the evaluation, which
plays episodes with the engine's rollout code: the trainer itself never reaches the engine.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..blobs import BlobStore
from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, open_run
from ..textout import say
from ..config import EngineConfig
from ..errors import ConfigError, SpadeError
from ..events.catalogue import PolicyUpdated
from ..events.log import EventLog
from ..events.store import resolve_data_dir
from ..policy.registry import backend as policy_backend
from ..recorded import recorded_config

__all__ = ["train_command", "run_config", "base_model_of"]


def run_config(log: EventLog, config_file: Path | None, overrides: dict[str, Any]) -> EngineConfig:
    """The config ``train`` uses for a run (:func:`~spade_engine.runs.run_config.train_config_for`):
    ``--config`` if given, else the one recorded in the run's RunStarted with this machine's
    sandbox, with flag overrides on top."""
    from .run_config import train_config_for

    recorded = recorded_config(log) if config_file is None else None
    return train_config_for(recorded, config_file=config_file, flags=overrides)


def base_model_of(log: EventLog, cfg: EngineConfig, model: str | None) -> str:
    """``--model``, else the base model of earlier PolicyUpdated events, else the run's policy model."""
    if model:
        return model
    for rec in log.read():
        if rec.envelope.type == PolicyUpdated.TYPE:
            ev = rec.envelope.event()
            if ev.base_model:
                return ev.base_model
    if policy_backend(cfg.policy.kind).trainable and cfg.policy.model:
        return cfg.policy.model
    raise ConfigError("no model to train: pass --model (a local path, a hub id available offline, or tiny[:SEED])")


@handle_errors
def train_command(
    run: RunArg = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Base model: a catalogue name, local directory, .gguf file, offline hub id or tiny[:SEED]. Default: the run's.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep training as new events arrive (Ctrl-C to stop).")] = False,
    max_updates: Annotated[Optional[int], typer.Option("--max-updates", help="Stop after this many updates.", min=1)] = None,
    idle_timeout: Annotated[Optional[float], typer.Option("--idle-timeout", help="With --follow: stop after this many idle seconds.")] = None,
    config_file: Annotated[Optional[Path], typer.Option("--config", "-c", help="TOML config (default: the config recorded in the run).")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", help="Learning rate (trainer.learning_rate).")] = None,
    batch_groups: Annotated[Optional[int], typer.Option("--batch-groups", help="Groups per update (trainer.batch_groups).")] = None,
    device: Annotated[Optional[str], typer.Option("--device", help="cpu, cuda, cuda:1 or auto (trainer.device).")] = None,
    no_flush: Annotated[bool, typer.Option("--no-flush", help="One-shot: do not train on a last partial batch.")] = False,
    eval_every: Annotated[Optional[int], typer.Option("--eval-every", help="Evaluate the new weights on the [eval] suites after every N-th update (eval.every; 0 = never).", min=0)] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Train the shared policy on a run's plays: GRPO on the agent's plain plays and the designer's
    proposals, from the trainer's committed position. Each update writes a safetensors checkpoint
    to <data>/blobs and appends PolicyUpdated. Safe to kill at any time and start again."""
    from .training import build_trainer

    run_id, log = open_run(run, data_dir, backend, bootstrap)
    try:
        overrides = {"trainer.learning_rate": lr, "trainer.batch_groups": batch_groups, "trainer.device": device,
                     "eval.every": eval_every}
        cfg = run_config(log, config_file, overrides)
        base = base_model_of(log, cfg, model)
        blobs = BlobStore(resolve_data_dir(data_dir) / "blobs")

        def report(ev: PolicyUpdated) -> None:
            m = ev.metrics
            say(
                f"{ev.version} (parent {ev.parent_version}): loss {m.get('loss', 0):+.4f} "
                f"reward {m.get('agent_reward_mean', float('nan')):.3f} samples {int(m.get('samples', 0))} "
                f"zero-var {int(m.get('zero_variance_groups', 0))} stale {int(m.get('stale_dropped', 0))} "
                f"consumed {ev.consumed}"
            )

        def report_eval(version: str, events: list[Any]) -> None:
            accs = ", ".join(f"{e.task} {e.accuracy:.3f}" for e in events)
            say(f"{version} held-out: {accs}")

        from ..evaluation.periodic import standalone_evaluator

        evaluator = standalone_evaluator(
            cfg, log, blobs, base_model=base, data_dir=resolve_data_dir(data_dir), on_result=report_eval
        )
        try:
            trainer = build_trainer(
                cfg, log, blobs, base_model=base, on_update=report, data_dir=resolve_data_dir(data_dir), evaluator=evaluator
            )
            if trainer.resumed_from is not None:
                say(f"resuming {run_id} from {trainer.state.version} (consumed {trainer.state.consumed})")
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
        finally:
            if evaluator is not None:
                evaluator.close()
        say(
            f"{len(published)} update(s); policy {trainer.state.version}; "
            f"already-trained groups skipped on resume: {trainer.assembler.already_trained}"
        )
    except SpadeError:
        raise
    finally:
        log.close()
