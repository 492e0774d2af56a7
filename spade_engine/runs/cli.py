"""`spade-engine start` (run or resume the self-play loop with live progress), `status`, and
`retrain` (train a fresh model on a recorded run's curriculum, :mod:`.retrain`).

Run selection for ``start``: ``--run RUN`` resumes that run; otherwise the latest run is resumed
when it is unfinished (never stopped, interrupted, or failed), else a new run is created;
``--new`` always creates a new run. A resumed run keeps the config recorded in its first
RunStarted (only ``--max-envs`` and ``--plays`` apply to it; ``--plays`` affects environments not
yet played).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..cli_common import (
    BackendOpt,
    BootstrapOpt,
    DataDirOpt,
    RunArg,
    bootstrap_or_env,
    check_backend,
    console,
    handle_errors,
    open_run,
    out,
)
from ..config import DEFAULT_MAX_ENVS, load_config
from ..errors import SpadeError
from ..engine.state import RunState
from ..events.store import resolve_data_dir
from ..recorded import recorded_config

__all__ = ["start", "status", "render_stats", "next_commands", "retrain_command", "run_retrain"]


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def render_stats(stats: dict[str, Any], *, title: str = "", extra: str = "") -> Any:
    """A rich renderable summarising a run's statistics (``RunState.stats()``)."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    kinds = ", ".join(f"{k} {v}" for k, v in stats["invalid_kinds"].items()) or "-"
    head.add_row("proposals", f"{stats['proposals']} ({stats['roots']} new, {stats['repairs']} repairs)")
    head.add_row("validity", f"{stats['valid']} valid / {stats['invalid']} invalid  [dim]{kinds}[/]")
    head.add_row(
        "novelty",
        f"{stats['accepted']} accepted, {stats['duplicates']} duplicates, mean novelty {_fmt(stats['mean_novelty'])}",
    )
    head.add_row("plays", f"{stats['plays']} plays, {stats['estimated']} environments estimated")
    band = stats["band_share"]
    head.add_row(
        "regret",
        f"mean regret {_fmt(stats['mean_regret'])}, mean win rate {_fmt(stats['mean_win_rate'], '.2f')}, "
        f"in band [0.4, 0.6]: {'-' if band is None else f'{band:.0%}'}",
    )
    head.add_row("policy", str(stats["policy_version"]))
    skills = Table(show_edge=False, box=None, header_style="bold cyan")
    for col in ("skill", "envs", "estimated", "difficulty", "win rate", "regret"):
        skills.add_column(col, justify="right" if col != "skill" else "left")
    for name, s in stats["skills"].items():
        skills.add_row(
            name, str(s["envs"]), str(s["estimated"]), _fmt(s["last_difficulty"], ".2f"),
            _fmt(s["mean_win_rate"], ".2f"), _fmt(s["mean_regret"]),
        )
    parts: list[Any] = [head]
    if stats["skills"]:
        parts += [Text(""), skills]
    if extra:
        parts.append(Text(extra, style="dim"))
    return Panel(Group(*parts), title=title or stats["run_id"], border_style="cyan")


def next_commands(run_id: str, *, reason: str, bound: int | None, data_dir: Path | None) -> list[str]:
    """What to run after ``start`` stopped: resume (with the bound the run had, or a larger one
    once it reached it), and look at the run (status, dashboard, audit, replay)."""
    d = f" -d {data_dir}" if data_dir else ""
    if reason == "max_envs" and bound is not None:
        resume = f"  more:       spade-engine start --run {run_id} --max-envs {bound * 2}{d}   (or --forever)"
    else:
        limit = f" --max-envs {bound}" if bound is not None else " --forever"
        resume = f"  resume:     spade-engine start --run {run_id}{limit}{d}"
    return [
        "next:",
        resume,
        f"  summary:    spade-engine status {run_id}{d}",
        f"  watch:      spade-engine dashboard {run_id}{d}",
        f"  report:     spade-engine audit {run_id}{d}",
        f"  rebuild:    spade-engine replay {run_id} --verify{d}",
    ]


@handle_errors
def start(
    max_envs: Annotated[Optional[int], typer.Option("--max-envs", help=f"Stop after this many new environments (default: loop.max_envs, {DEFAULT_MAX_ENVS}).", show_default=False, min=1)] = None,
    forever: Annotated[bool, typer.Option("--forever", help="No bound: run until Ctrl-C (loop.max_envs = 0).")] = False,
    model: Annotated[Optional[str], typer.Option("--model", help="Use the transformers policy with this model instead of the procedural simulation: a catalogue name (spade-engine models list), a local directory, a .gguf file, an offline hub id, or tiny[:SEED].", show_default=False)] = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
    data_dir: DataDirOpt = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML config file (defaults < file < SPADE_* env < flags).", show_default=False)] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Resume this run (id or unique prefix).", show_default=False)] = None,
    new: Annotated[bool, typer.Option("--new", help="Always start a new run instead of resuming the latest unfinished one.")] = False,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Run seed (new runs only).", show_default=False)] = None,
    plays: Annotated[Optional[int], typer.Option("--plays", help="k: plain plays and hinted plays per environment.", show_default=False)] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the live progress panel.")] = True,
    train: Annotated[Optional[bool], typer.Option("--train/--no-train", help="Train the model between environments in this process (trainer.enabled; needs --model).", show_default=False)] = None,
    env_source: Annotated[Optional[str], typer.Option("--env-source", help="Where new environments come from (loop.env_source, new runs): designer (default); reasoning-gym:TASK,...[?size=N&turns=T] (a fixed pool of wrapped reasoning-gym items); archive:RUN (a recorded run's accepted environments, with that run's model unless --model).", show_default=False)] = None,
    eval_every: Annotated[Optional[int], typer.Option("--eval-every", help="With --train: evaluate the new weights on the [eval] suites after every N-th update (eval.every; 0 = never).", show_default=False, min=0)] = None,
) -> None:
    """Run the self-play loop: propose, validate, hint, play, estimate regret, with live progress.

    With no arguments: the embedded SQLite log in the data directory, the procedural policy (an
    offline simulation) and the bundled corpus. Resumes the latest unfinished run (see --run,
    --new). Ctrl-C stops cleanly (RunStopped reason=interrupted); start again to resume.
    """
    from .engine import open_engine, resolve_start_run

    if forever and max_envs is not None:
        raise SpadeError("--forever and --max-envs contradict each other: pass one")
    if forever:
        max_envs = 0
    b = check_backend(backend)
    root = resolve_data_dir(data_dir)
    boot = bootstrap_or_env(bootstrap)
    from ..envsources import fixed_source_overrides, parse_env_source, source_run_policy

    source_spec = parse_env_source(env_source) if env_source is not None else None  # bad text: before any work
    run_id, create = resolve_start_run(run, data_dir=root, backend=b, bootstrap=boot, new=new)
    flags: dict[str, Any] = {"loop.max_envs": max_envs, "loop.plays_per_env": plays, "trainer.enabled": train,
                             "eval.every": eval_every}
    if create:
        flags.update({"seed": seed, "log.backend": b, "log.bootstrap": boot})
        if source_spec is not None:
            flags.update({"loop.env_source": env_source, **fixed_source_overrides(source_spec)})
            if not model:
                flags.update(source_run_policy(source_spec, data_dir=root, backend=b, bootstrap=boot))
        if model:
            flags.update({"policy.kind": "transformers", "policy.model": model})
        cfg = load_config(config, overrides=flags)
        if source_spec is None and cfg.loop.env_source:  # from the config file or SPADE_LOOP__ENV_SOURCE
            cfg = cfg.with_overrides(fixed_source_overrides(parse_env_source(cfg.loop.env_source)))
    else:
        from ..events.store import open_event_log

        log = open_event_log(run_id, data_dir=root, backend=b, bootstrap=boot)
        try:
            recorded = recorded_config(log)
        finally:
            log.close()
        if recorded is None:
            cfg = load_config(config, overrides={**flags, "seed": seed, "log.backend": b, "log.bootstrap": boot})
        else:
            cfg = recorded.with_overrides({**flags, "log.backend": b, "log.bootstrap": boot})
            if model or seed is not None or config is not None or env_source is not None:
                console.print("[yellow]resuming: the run keeps its recorded config; --model/--seed/--config/--env-source are ignored[/]")
    verb = "starting new run" if create else "resuming run"
    console.print(f"[bold]{verb}[/] {run_id}  [dim](data {root}, backend {b}, policy {cfg.policy.kind})[/]")
    with open_engine(cfg, run_id=run_id, data_dir=root, create=create) as opened:
        engine = opened.engine
        if engine.trainer is not None:
            console.print(f"[dim]training {cfg.policy.model} between environments (trainer.enabled, every {cfg.trainer.batch_groups} groups)[/]")
            if engine.trainer.evaluator is not None:
                console.print(f"held-out evaluation every {cfg.eval.every} update(s) on {', '.join(cfg.eval.suites)}",
                              style="dim", markup=False, highlight=False)
        if cfg.loop.env_source:
            console.print(f"environments from {cfg.loop.env_source} (fixed source: the designer is not called)",
                          style="dim", markup=False, highlight=False)
        t0 = time.monotonic()
        last = [0.0]
        live: Live | None = None

        def draw(state: RunState, force: bool = False) -> None:
            now = time.monotonic()
            if live is None or (not force and now - last[0] < 0.25):
                return
            last[0] = now
            tm = engine.ctx.timings
            extra = (
                f"{now - t0:.0f}s  sandbox {tm.sandbox:.1f}s  policy {tm.policy:.1f}s  embedding {tm.embedding:.1f}s  "
                f"(max envs {cfg.loop.env_bound or 'unbounded'}; Ctrl-C stops cleanly)"
            )
            live.update(render_stats(state.stats((cfg.reward.band_low, cfg.reward.band_high)), title=run_id, extra=extra))

        engine.on_progress = draw
        interrupts = [0]

        def on_signal(signum: int, frame: Any) -> None:
            interrupts[0] += 1
            if interrupts[0] > 1:
                raise KeyboardInterrupt
            console.print("[yellow]stopping after the current step (Ctrl-C again to abort now)...[/]")
            engine.stop()

        in_main = threading.current_thread() is threading.main_thread()
        old = {}
        if in_main:
            for sig in (signal.SIGINT, signal.SIGTERM):
                old[sig] = signal.signal(sig, on_signal)
        try:
            if progress:
                live = Live(render_stats(engine.state.stats(), title=run_id), console=out, refresh_per_second=4, transient=False)
                live.start()
            try:
                reason = engine.run()
            except KeyboardInterrupt:
                reason = "interrupted"
            draw(engine.state, force=True)
        finally:
            if live is not None:
                live.stop()
            for sig, handler in old.items():
                signal.signal(sig, handler)
        s = engine.state.stats()
        trained = ""
        if engine.trainer is not None:
            trained = f", {len(engine.state.policy_updates)} policy updates (now {engine.ctx.policy.version})"
        console.print(
            f"[bold]stopped[/] ({reason}): {s['roots']} environments, {s['accepted']} accepted, {s['plays']} plays, "
            f"mean regret {_fmt(s['mean_regret'])}{trained}.",
            highlight=False,
        )
        for line in next_commands(run_id, reason=reason, bound=cfg.loop.env_bound, data_dir=data_dir):
            console.print(line, markup=False, highlight=False)


@handle_errors
def status(
    run: RunArg = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Summarise a run: proposals, validity, novelty, plays, regret, win-rate band, per-skill difficulty."""
    import json

    run_id, log = open_run(run, data_dir, backend, bootstrap)
    try:
        state = RunState.from_log(log)
    finally:
        log.close()
    stats = state.stats()
    if as_json:
        out.print_json(json.dumps(stats))
        return
    if not state.starts:
        lifecycle = "never started"
    elif stats["stopped"]:
        lifecycle = f"stopped ({stats['stopped']})"
    else:
        lifecycle = "running, or ended without RunStopped (start resumes it)"
    out.print(render_stats(stats, title=run_id, extra=f"{lifecycle}; {stats['starts']} start(s)"))


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
    model: Annotated[str, typer.Option("--model", "-m", help="Model to train: a catalogue name, local directory, .gguf file, offline hub id or tiny[:SEED].")] = ...,  # type: ignore[assignment]
    max_envs: Annotated[Optional[int], typer.Option("--max-envs", help="Replay only the first N environments.", min=1)] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Train a fresh MODEL on a recorded run's environments in their recorded order, generating new
    plays, as a NEW run linked to the old one (RunStarted.parent_run_id). Same as
    `spade-engine replay RUN --retrain --model M`."""
    run_retrain(run, model, data_dir, max_envs, backend, bootstrap)
