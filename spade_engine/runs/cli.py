"""`spade-engine start` (run or resume the self-play loop with live progress), `status`, and
`retrain` (train a fresh model on a recorded run's curriculum, :mod:`.retrain`).

Run selection for ``start``: ``--run RUN`` resumes that run; otherwise the latest run is resumed
when it is unfinished (never stopped, interrupted, or failed), else a new run is created;
``--new`` always creates a new run. A resumed run keeps the config recorded in its first
RunStarted (only ``--max-envs`` and ``--plays`` apply to it; ``--plays`` affects environments not
yet played), except for its ``[sandbox]`` section, which is always the local one (defaults <
``--config`` < ``SPADE_SANDBOX__*``): a recorded ``sandbox.preload_modules`` would otherwise be
imported before isolation. The command is a thin shell over :mod:`.start` (configure, open,
present).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..cli_common import (
    BackendOpt,
    BootstrapOpt,
    DataDirOpt,
    RunArg,
    handle_errors,
    open_run,
)
from ..config import DEFAULT_MAX_ENVS
from ..engine.state import RunState
from ..events.store import remember_run_place, resolve_data_dir
from ..textout import print_json, say
from .display import duration, eta, next_commands, panel_lines, print_stats, progress_line, render_stats, stats_rows

__all__ = ["start", "status", "render_stats", "print_stats", "stats_rows", "progress_line", "panel_lines", "eta", "duration",
           "next_commands", "retrain_command", "run_retrain"]


@handle_errors
def start(
    max_envs: Annotated[Optional[int], typer.Option("--max-envs", help=f"Stop after this many new environments (default: loop.max_envs, {DEFAULT_MAX_ENVS}).", show_default=False, min=1)] = None,
    forever: Annotated[bool, typer.Option("--forever", help="No bound: run until Ctrl-C (loop.max_envs = 0).")] = False,
    model: Annotated[Optional[str], typer.Option("--model", help="Use a real model instead of the procedural simulation: a catalogue name (spade-engine models list), a local directory, a .gguf file, an offline hub id, or tiny[:SEED].", show_default=False)] = None,
    policy: Annotated[Optional[str], typer.Option("--policy", metavar="llamacpp|transformers|vllm", help="The backend that runs --model (policy.kind). Default: llamacpp for a catalogue model or .gguf file on a machine without CUDA (built on first use), transformers otherwise.", show_default=False)] = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
    data_dir: DataDirOpt = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML config file (defaults < preset < file < SPADE_* env < flags).", show_default=False)] = None,
    preset: Annotated[Optional[str], typer.Option("--preset", help="A named config for a new run: laptop (the defaults), spade-release (the public release's recipe) or small-model (a 0.5B-1.5B model on a CPU; a catalogue model names its own); see `spade-engine config show --preset NAME`.", show_default=False)] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Resume this run (id or unique prefix).", show_default=False)] = None,
    new: Annotated[bool, typer.Option("--new", help="Always start a new run instead of resuming the latest unfinished one.")] = False,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Run seed (new runs only).", show_default=False)] = None,
    plays: Annotated[Optional[int], typer.Option("--plays", help="k: plain plays per round and hinted plays per environment (sets loop.plain_plays and loop.hinted_plays).", show_default=False)] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress: a live panel on a terminal, a line every --progress-every seconds otherwise (during a long model call, a line saying what the model is doing).")] = True,
    progress_every: Annotated[float, typer.Option("--progress-every", help="Seconds between progress lines when stdout is not a terminal.", min=0.1)] = 10.0,
    train: Annotated[Optional[bool], typer.Option("--train/--no-train", help="Train the model between environments in this process (trainer.enabled; needs --model).", show_default=False)] = None,
    seed_envs: Annotated[Optional[str], typer.Option("--seed-envs", metavar="bundled|DIR|none|auto", help="Seed archive recorded at the start of a new run (loop.seed_envs; auto = bundled with --model).", show_default=False)] = None,
    designer_format: Annotated[Optional[str], typer.Option("--designer-format", metavar="standalone|scaffold|puzzle", help="What the designer writes (loop.designer_format, new runs): standalone = a whole environment class; scaffold = a game on the engine's TextGame base class (setup, act, plan), easier for small models; puzzle = a one-answer game (setup only: question and computed answer), the easiest.", show_default=False)] = None,
    env_source: Annotated[Optional[str], typer.Option("--env-source", help="Where new environments come from (loop.env_source, new runs): designer (default); reasoning-gym:TASK,...[?size=N&turns=T] (a fixed pool of wrapped reasoning-gym items); textarena:GAME,...[?size=N] (GuessTheNumber-v0, TowerOfHanoi-v0, Mastermind-v0 instances); archive:RUN (a recorded run's accepted environments, with that run's model unless --model).", show_default=False)] = None,
    eval_every: Annotated[Optional[int], typer.Option("--eval-every", help="With --train: evaluate the new weights on the [eval] suites after every N-th update (eval.every; 0 = never).", show_default=False, min=0)] = None,
    sets: Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE", help="Set one config value for a new run, as a TOML file would (repeatable; e.g. --set reward.band_low=0.3); the options above win over it. `spade-engine config show --set ...` shows the result.", show_default=False)] = None,
) -> None:
    """Run the self-play loop: propose, validate, hint, play, estimate regret, with live progress.

    With no arguments: the embedded SQLite log in the data directory, the procedural policy (an
    offline simulation) and the bundled corpus. Resumes the latest unfinished run (see --run,
    --new). Ctrl-C stops cleanly (RunStopped reason=interrupted); start again to resume.

    The log's backend: --backend, else $SPADE_LOG__BACKEND or the config's [log] backend, else
    the resumed run's own (its data directory remembers it), else kafka when a bootstrap is given.
    """
    from .engine import forget_unstarted_run, open_engine
    from .start import StartOptions, announce_start, describe_engine, drive, plan_start, report_stop

    plan = plan_start(StartOptions(
        max_envs=max_envs, forever=forever, model=model, policy=policy, backend=backend, bootstrap=bootstrap,
        data_dir=data_dir, config=config, preset=preset, run=run, new=new, seed=seed, plays=plays, train=train,
        seed_envs=seed_envs, designer_format=designer_format, env_source=env_source, eval_every=eval_every,
        sets=tuple(sets or ()),
    ))
    announce_start(plan)
    try:
        with open_engine(plan.cfg, run_id=plan.run_id, data_dir=plan.root, create=plan.create) as opened:
            engine = opened.engine
            # later commands on this run need no flags
            remember_run_place(plan.run_id, data_dir=plan.root, backend=plan.backend, bootstrap=plan.bootstrap)
            describe_engine(engine, plan.cfg)
            t0 = time.monotonic()
            reason = drive(engine, plan.cfg, plan.run_id, progress=progress, progress_every=progress_every)
            report_stop(engine, plan.cfg, plan.run_id, reason, elapsed_s=time.monotonic() - t0, progress=progress,
                        data_dir=data_dir)
    except BaseException:
        if plan.create:  # Ctrl-C during start-up, a model that fails to load...: no run left that never started
            forget_unstarted_run(plan.run_id, data_dir=plan.root, backend=plan.backend, bootstrap=plan.bootstrap)
        raise


@handle_errors
def status(
    run: RunArg = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Summarise a run: proposals, validity, novelty, plays, regret, win-rate band, per-skill difficulty."""

    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    try:
        state = RunState.from_log(log)
        from ..events import SqliteEventLog

        behind = _log_behind_projections(log, data_dir, run_id) if isinstance(log, SqliteEventLog) else None
    finally:
        log.close()
    if behind:
        say(f"warning: {behind}; `start` rebuilds them from the log")
    stats = state.stats()
    if as_json:
        print_json(stats)
        return
    if not state.starts:
        lifecycle = "never started"
    elif stats["stopped"]:
        lifecycle = f"stopped ({stats['stopped']})"
    else:
        lifecycle = "running, or ended without RunStopped (start resumes it)"
    seed = f"; seed {stats['seed']}" if stats.get("seed") is not None else ""
    print_stats(stats, title=run_id, extra=f"{lifecycle}; {stats['starts']} start(s){seed}")


def _log_behind_projections(log: Any, data_dir: Path | None, run_id: str) -> str | None:
    """Why the run's live projections are ahead of its log, or None (read only: nothing is rebuilt here)."""
    from ..archive.db import ARCHIVE_FILENAME
    from ..archive.replay import ahead_message, open_live_projections, projections_ahead
    from ..events.datadir import DataDir

    run_dir = DataDir(resolve_data_dir(data_dir)).run_dir(run_id)
    if not (run_dir / ARCHIVE_FILENAME).exists():
        return None
    with open_live_projections(run_dir) as projs:
        ahead = projections_ahead(projs, log)
    return ahead_message(run_id, ahead) if ahead else None


def run_retrain(run: str | None, model: str, data_dir: Path | None, max_envs: int | None, backend: str | None = None,
                bootstrap: str | None = None) -> None:
    """Shared body of ``retrain`` and ``replay --retrain``: print one line per environment and a summary."""
    from .retrain import retrain_run

    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)  # the new run is another log
    try:
        say(f"retraining {model} on the curriculum of {run_id}")
        result = retrain_run(
            log, model=model, data_dir=resolve_data_dir(data_dir), max_envs=max_envs,
            on_env=lambda i, env_id: say(f"  environment {i + 1}: {env_id}"),
        )
    finally:
        log.close()
    versions = ", ".join(u.version for u in result.updates) or "none (no group had reward variance)"
    say(f"new run {result.run_id} (parent {result.parent_run_id}): {result.environments} environments replayed, "
        f"versions trained: {versions}")


@handle_errors
def retrain_command(
    run: RunArg = None,
    model: Annotated[str, typer.Option("--model", "-m", help="Model to train: a catalogue name, local directory, .gguf file, offline hub id or tiny[:SEED].")] = ...,  # type: ignore[assignment]
    max_envs: Annotated[Optional[int], typer.Option("--max-envs", help="Replay only the first N environments.", min=1)] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Train a fresh MODEL on a recorded run's environments in their recorded order, generating new
    plays, as a NEW run linked to the old one (RunStarted.parent_run_id). Same as
    `spade-engine replay RUN --retrain --model M`."""
    run_retrain(run, model, data_dir, max_envs, backend, bootstrap)
