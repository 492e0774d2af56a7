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

import sys
import time
from pathlib import Path
from collections.abc import Sequence
from typing import Annotated, Any, Optional

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..cli_common import (
    BackendOpt,
    BootstrapOpt,
    DataDirOpt,
    RunArg,
    backend_or_env,
    bootstrap_or_env,
    handle_errors,
    locate,
    open_run,
    out,
)
from ..config import DEFAULT_MAX_ENVS, resolve_config
from ..engine.state import RunState
from ..events.errors import RunNotFound
from ..events.store import new_run_backend, remember_run_place, resolve_data_dir
from ..textout import is_terminal, note, plain, print_json, say, styled, tsv_row

__all__ = ["start", "status", "render_stats", "print_stats", "stats_rows", "progress_line", "panel_lines", "eta", "duration",
           "next_commands", "retrain_command", "run_retrain"]


def _fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _band(stats: dict[str, Any]) -> str:
    """"in band [LOW, HIGH]: SHARE" with the band the statistics were computed for."""
    share = stats["band_share"]
    low, high = stats["band"]
    return f"in band [{low:g}, {high:g}]: " + ("-" if share is None else f"{share:.0%}")


def _accepted(stats: dict[str, Any]) -> str:
    """"N accepted" for the designed environments, with the accepted seeds apart (a seed archive
    is validated too, and its 56 seeds would hide a designer that wrote none)."""
    seeds = stats["accepted_seeds"]
    designed = stats["accepted"] - seeds
    return f"{designed} accepted" + (f" (+{seeds} seeds)" if seeds else "")


def stats_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    """The head of a run summary as (label, value) rows (values hold model-written skill and
    error-kind names: print them escaped)."""
    kinds = ", ".join(f"{k} {v}" for k, v in stats["invalid_kinds"].items()) or "-"
    return [
        ("proposals", f"{stats['proposals']} ({stats['roots']} new, {stats['repairs']} repairs)"),
        ("validity", f"{stats['valid']} valid / {stats['invalid']} invalid  {kinds}"),
        ("novelty", f"{_accepted(stats)}, {stats['duplicates']} duplicates, mean novelty {_fmt(stats['mean_novelty'])}"),
        ("plays", f"{stats['plays']} plays{_replays(stats)}, {stats['estimated']} environments estimated"),
        ("regret", f"mean regret {_fmt(stats['mean_regret'])}, mean win rate {_fmt(stats['mean_win_rate'], '.2f')}, "
                   f"{_band(stats)}"),
        ("policy", str(stats["policy_version"])),
    ]


def _replays(stats: dict[str, Any]) -> str:
    return f" ({stats['replays']} level replays)" if stats.get("replays") else ""


_SKILL_COLUMNS = ("skill", "envs", "estimated", "difficulty", "win rate", "regret")


def _skill_rows(stats: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (name, str(s["envs"]), str(s["estimated"]), _fmt(s["last_difficulty"], ".2f"), _fmt(s["mean_win_rate"], ".2f"),
         _fmt(s["mean_regret"]))
        for name, s in stats["skills"].items()
    ]


def render_stats(stats: dict[str, Any], *, title: str = "", extra: str | Sequence[str] = "") -> Any:
    """A rich renderable summarising a run's statistics (``RunState.stats()``); every value is
    plain text (skill names and error kinds come from the designer). ``extra``: lines under the
    tables (each shown escaped, on its own line)."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for label, value in stats_rows(stats):
        head.add_row(label, plain(value))
    skills = Table(show_edge=False, box=None, header_style="bold cyan")
    for col in _SKILL_COLUMNS:
        skills.add_column(col, justify="right" if col != "skill" else "left")
    for row in _skill_rows(stats):
        skills.add_row(*(plain(c) for c in row))
    parts: list[Any] = [head]
    if stats["skills"]:
        parts += [Text(""), skills]
    for line in [extra] if isinstance(extra, str) else extra:
        if line:
            parts.append(plain(line, "dim"))
    return Panel(Group(*parts), title=plain(title or stats["run_id"]), border_style="cyan")


def print_stats(stats: dict[str, Any], *, title: str = "", extra: str = "") -> None:
    """A run summary on stdout: the panel on a terminal; in a pipe or file TSV: ``run``, the head
    rows and ``state`` as label/value lines, a blank line, then the per-skill table."""
    if is_terminal():
        out.print(render_stats(stats, title=title, extra=extra))
        return
    lines = [("run", title or stats["run_id"]), *stats_rows(stats)]
    if extra:
        lines.append(("state", extra))
    rows = [tsv_row(r) for r in lines]
    if stats["skills"]:
        rows += ["", tsv_row(_SKILL_COLUMNS), *(tsv_row(r) for r in _skill_rows(stats))]
    sys.stdout.write("\n".join(rows) + "\n")
    sys.stdout.flush()


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def eta(done: int, bound: int | None, elapsed_s: float, done_at_start: int = 0) -> str:
    """The time left for a bounded run at the pace of the environments made since this start
    (``-`` until one is made, or for an unbounded run)."""
    made = done - done_at_start
    if not bound or made <= 0 or done >= bound:
        return "-" if not bound or done < bound else "0s"
    return duration(elapsed_s / made * (bound - done))


def progress_line(stats: dict[str, Any], elapsed_s: float, bound: int | None, done_at_start: int = 0) -> str:
    """One line of progress for a run without a terminal (``start`` in a pipe or a log file):
    N of M environments, the counts, and for a bounded run the ETA."""
    of = f"/{bound}" if bound else ""
    left = f"; ETA {eta(stats['roots'], bound, elapsed_s, done_at_start)}" if bound else ""
    return (
        f"[{elapsed_s:5.0f}s] {stats['roots']}{of} environments ({stats['proposals']} proposals, {stats['repairs']} repairs): "
        f"{stats['valid']} valid, {stats['invalid']} invalid, {_accepted(stats)}, {stats['duplicates']} duplicates; "
        f"{stats['plays']} plays, {stats['estimated']} estimated; mean regret {_fmt(stats['mean_regret'])}, "
        f"{_band(stats)}{left}"
    )


def panel_lines(stats: dict[str, Any], elapsed_s: float, bound: int | None, *, done_at_start: int = 0, now_doing: str = "",
                timings: str = "") -> list[str]:
    """The live panel's lines under the tables: what the model is doing now, N of M environments
    with the ETA, time and where it went."""
    if bound:
        head = f"{stats['roots']} of {bound} environments, ETA {eta(stats['roots'], bound, elapsed_s, done_at_start)}"
    else:
        head = f"{stats['roots']} environments (unbounded)"
    lines = [f"now: {now_doing}"] if now_doing else []
    lines.append(f"{head}  ·  {duration(elapsed_s)} elapsed" + (f"  ·  {timings}" if timings else "") + "  ·  Ctrl-C stops cleanly")
    return lines


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


def _start_place(run: str | None, new: bool, root: Path, backend: str | None, bootstrap: str | None,
                 config: Path | None, preset: str | None, assigned: dict[str, Any]) -> tuple[str, str | None]:
    """``(backend, bootstrap)`` of the run ``start`` drives: a named run where it lives (its data
    directory remembers it); else the chosen backend (``--backend``, ``$SPADE_LOG__BACKEND``, the
    config's ``[log]``), else the latest run's own when resuming, else Kafka for a bootstrap."""
    if run is not None and not new:
        where = locate(run, root, backend, bootstrap)
        return where.backend, where.bootstrap
    chosen, boot = backend_or_env(backend), bootstrap_or_env(bootstrap)
    if chosen is None or boot is None:
        resolved = resolve_config(config, preset=preset, overrides=assigned)
        if chosen is None and resolved.source("log.backend") != "default":
            chosen = resolved.config.log.backend
        boot = boot or resolved.config.log.bootstrap
    if chosen is None and boot is None and not new:
        try:  # resume the latest run this data directory knows, where it lives
            where = locate(None, root)
        except RunNotFound:
            pass
        else:
            return where.backend, where.bootstrap
    return new_run_backend(chosen, boot), boot


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


def _policy_for(model: str) -> str:
    """The backend ``start --model`` uses when ``--policy`` is not given, said on stderr."""
    from ..policy.choice import default_kind_for_model

    kind = default_kind_for_model(model)
    if kind == "llamacpp":
        note(styled((f"policy llamacpp: {model} is a GGUF model and this machine has no CUDA device "
                     "(--policy transformers for the transformers backend)", "dim")))
    return kind


def catalogue_preset(model: str) -> str | None:
    """The preset the model catalogue names for ``model`` (a catalogue name), else ``None``."""
    from ..models.catalogue import load_catalogue

    cat = load_catalogue()
    return cat.entries[model].preset if model in cat.entries else None
