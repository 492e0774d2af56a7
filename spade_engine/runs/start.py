"""What `spade-engine start` does, in the three steps the command runs them: configure, open, present.

* :func:`plan_start` turns the command's options (:class:`StartOptions`) into a
  :class:`StartPlan`: the data directory, the log's place, the run (new or resumed) and its config,
  resolved once (a resumed run keeps its recorded config but for ``[sandbox]``);
* :func:`announce_start` says what will run, and builds llama.cpp on a first real-model run;
* the command opens the engine (:func:`~spade_engine.runs.engine.open_engine`), then
  :func:`describe_engine` says what the opened engine holds, :func:`drive` runs it under the live
  panel or progress lines and Ctrl-C handling, and :func:`report_stop` prints the summary and the
  next commands.

The Typer command itself (:func:`spade_engine.runs.cli.start`) only declares the options and calls
these in order.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.live import Live

from ..cli_common import backend_or_env, bootstrap_or_env, locate, out
from ..config import EngineConfig, parse_assignments, resolve_config
from ..engine.loop import Engine
from ..engine.state import RunState
from ..errors import SpadeError
from ..events.errors import RunNotFound
from ..events.store import new_run_backend, resolve_data_dir
from ..policy.registry import backend as policy_backend
from ..recorded import recorded_config
from .run_config import run_config_for
from ..textout import is_terminal, note, say, styled
from .display import next_commands, panel_lines, print_stats, progress_line, render_stats, stopped_summary

__all__ = ["StartOptions", "StartPlan", "plan_start", "announce_start", "describe_engine", "drive", "report_stop"]


@dataclass(frozen=True)
class StartOptions:
    """The options of ``spade-engine start`` (see its ``--help`` for each)."""

    max_envs: int | None = None
    forever: bool = False
    model: str | None = None
    policy: str | None = None
    backend: str | None = None
    bootstrap: str | None = None
    data_dir: Path | None = None
    config: Path | None = None
    preset: str | None = None
    run: str | None = None
    new: bool = False
    seed: int | None = None
    plays: int | None = None
    train: bool | None = None
    seed_envs: str | None = None
    designer_format: str | None = None
    env_source: str | None = None
    eval_every: int | None = None
    sets: tuple[str, ...] = ()


@dataclass(frozen=True)
class StartPlan:
    """A run to drive and its config, resolved once."""

    root: Path
    backend: str
    bootstrap: str | None
    run_id: str
    create: bool
    cfg: EngineConfig
    #: the run seed was drawn here (no --seed, preset, file or SPADE_SEED gave one)
    drawn: bool


def _recorded(run_id: str, root: Path, backend: str, bootstrap: str | None) -> EngineConfig | None:
    """The config the run recorded in its RunStarted (``None``: it never started)."""
    from ..events.store import open_event_log

    log = open_event_log(run_id, data_dir=root, backend=backend, bootstrap=bootstrap, read_only=True)
    try:
        return recorded_config(log)
    finally:
        log.close()


def plan_start(o: StartOptions) -> StartPlan:
    """Resolve the run ``start`` drives and its config (see the module docstring)."""
    from ..envsources import fixed_source_overrides, parse_env_source, source_run_policy
    from .engine import resolve_start_run

    if o.forever and o.max_envs is not None:
        raise SpadeError("--forever and --max-envs contradict each other: pass one")
    max_envs = 0 if o.forever else o.max_envs
    root = resolve_data_dir(o.data_dir)
    assigned = parse_assignments(list(o.sets))  # bad text: before any work
    source_spec = parse_env_source(o.env_source) if o.env_source is not None else None
    b, boot = _start_place(o.run, o.new, root, o.backend, o.bootstrap, o.config, o.preset, assigned)
    run_id, create = resolve_start_run(o.run, data_dir=root, backend=b, bootstrap=boot, new=o.new)
    flags: dict[str, Any] = {**assigned, "loop.max_envs": max_envs, "loop.plays_per_env": o.plays,
                             "trainer.enabled": o.train, "eval.every": o.eval_every}
    if o.plays is not None:  # --plays wins over a preset's or file's separate plain/hinted counts
        flags.update({"loop.plain_plays": o.plays, "loop.hinted_plays": o.plays})
    flags.update({"log.backend": b, "log.bootstrap": boot})
    preset = o.preset
    recorded = None if create else _recorded(run_id, root, b, boot)  # None: new, or killed before it started
    new_run: dict[str, Any] = {"seed": o.seed, "loop.seed_envs": o.seed_envs, "loop.designer_format": o.designer_format}
    if recorded is None:
        if source_spec is not None:
            new_run.update({"loop.env_source": o.env_source, **fixed_source_overrides(source_spec)})
            if not o.model:
                new_run.update(source_run_policy(source_spec, data_dir=root, backend=b, bootstrap=boot))
        if o.model:
            kind = o.policy or _policy_for(o.model)
            new_run.update({"policy.kind": kind, "policy.model": o.model})
            if kind == "llamacpp" and o.train:
                new_run["trainer.lora"] = True  # llama.cpp serves trained versions as LoRA adapters
        elif o.policy is not None:
            new_run["policy.kind"] = o.policy
        if preset is None and o.model:
            preset = catalogue_preset(o.model)
            if preset is not None:
                note(styled((f"preset {preset}: the model catalogue's choice for {o.model} (--preset laptop for the "
                             "engine's defaults; spade-engine config show --preset " + preset + ")", "dim")))
    elif (o.model or o.seed is not None or o.config is not None or preset is not None or o.seed_envs is not None
            or o.env_source is not None or o.designer_format is not None or assigned):
        note(styled((
            "resuming: the run keeps its recorded config (but for [sandbox], always local); --model/--seed/"
            "--preset/--seed-envs/--env-source/--designer-format/--set and --config's other sections are ignored",
            "yellow")))
    cfg = run_config_for(recorded, config_file=o.config, preset=preset, flags=flags, new_run_flags=new_run)
    drawn = cfg.seed is None  # no --seed, no seed in a preset or file, no SPADE_SEED: a new run draws one
    return StartPlan(root=root, backend=b, bootstrap=boot, run_id=run_id, create=create, cfg=cfg.with_run_seed(),
                     drawn=drawn)


def announce_start(plan: StartPlan) -> None:
    """Say what will run; build llama.cpp first when a real-model run needs it (minutes, once)."""
    cfg = plan.cfg
    verb = "starting new run" if plan.create else "resuming run"
    note(styled((verb, "bold"), " ", (plan.run_id, None), "  ",
                (f"(data {plan.root}, backend {plan.backend}, policy {cfg.policy.kind}, seed {cfg.seed})", "dim")))
    if plan.drawn:
        note(styled((f"seed {cfg.seed} drawn for this run (recorded; start --new --seed {cfg.seed} repeats it)", "dim")))
    if cfg.policy.kind == "llamacpp":
        from ..policy.llamacpp_lib import ensure_installed

        # the first real-model run builds llama.cpp (minutes, once per machine), saying so
        ensure_installed(say=lambda line: note(styled((line, "dim"))))
    if policy_backend(cfg.policy.kind).needs_model and cfg.policy.model:
        note(styled((f"loading model {cfg.policy.model} ({cfg.policy.kind})...", "dim")))


def describe_engine(engine: Engine, cfg: EngineConfig) -> None:
    """Say what the opened engine holds (missing sandbox layers, training, evaluation, a fixed
    source) and load the embedding model, saying so."""
    from ..engine.stages import designer_batch

    if engine.ctx.pool is not None:
        from ..sandbox.cli import warn_missing_layers

        warn_missing_layers(engine.ctx.pool)
    if engine.trainer is not None:
        note(styled((f"training {cfg.policy.model} between environments (trainer.enabled, every {cfg.trainer.batch_groups} groups)", "dim")))
        if engine.trainer.evaluator is not None:
            note(styled((f"held-out evaluation every {cfg.eval.every} update(s) on {', '.join(cfg.eval.suites)}", "dim")))
    if cfg.loop.env_source:
        note(styled((f"environments from {cfg.loop.env_source} (fixed source: the designer is not called)", "dim")))
    embedder = engine.ctx.embedder
    if embedder is not None:
        name = cfg.memory.embedding_model
        note(styled((f"loading embedding model {name}...", "dim")))
        t_load = time.monotonic()
        embedder.embed(["warm-up"])
        note(styled((f"embedding model {name} loaded in {time.monotonic() - t_load:.1f}s", "dim")))
    if policy_backend(cfg.policy.kind).needs_model and str(engine.ctx.policy.describe().get("device", "")) == "cpu":
        note(styled((
            f"{cfg.policy.model} runs on the CPU ({cfg.policy.kind}): a designer batch of "
            f"{designer_batch(cfg.loop)} proposals (up to {cfg.policy.generation.designer.max_new_tokens} "
            "new tokens each) takes a minute or more; the panel shows tokens/s and an ETA", "dim")))


def drive(engine: Engine, cfg: EngineConfig, run_id: str, *, progress: bool, progress_every: float) -> str:
    """Run ``engine`` to its stop and return why it stopped: under a live panel on a terminal,
    with a progress line every ``progress_every`` seconds otherwise (and, during a long model
    call, a line saying what the model is doing); the first Ctrl-C stops after the current step,
    a second aborts."""
    from .progress import ModelActivity

    t0 = time.monotonic()
    last = [0.0]  # the panel's last redraw, or (lines) the last progress line
    last_call = [0.0]  # (lines) the engine's last progress call, printed or not
    last_now = [0.0]  # (lines) the last "now" line
    live: Live | None = None
    lines = progress and not is_terminal()
    band = (cfg.reward.band_low, cfg.reward.band_high)
    roots_at_start = engine.state.stats(band)["roots"]  # the ETA is paced by what this start makes
    activity = ModelActivity()
    activity.attach(engine.ctx)
    shown: list[dict[str, Any] | None] = [None]
    printing = threading.Lock()

    def draw(state: RunState | None, force: bool = False) -> None:
        now = time.monotonic()
        if lines:
            with printing:  # the engine's thread and the tick thread
                if state is not None:
                    last_call[0] = now
                    if force or now - last[0] >= progress_every:
                        last[0] = now
                        say(progress_line(state.stats(band), now - t0, cfg.loop.env_bound, roots_at_start))
                elif (now - last_call[0] >= progress_every and now - last_now[0] >= progress_every
                      and activity.text()):
                    # the engine has not reported for a whole period: a long model call, so
                    # say what the model is doing (never in place of a due progress line)
                    last_now[0] = now
                    say(f"  now ({now - t0:.0f}s): {activity.text()}")
            return
        if live is None or (not force and now - last[0] < 0.25):
            return
        last[0] = now
        if state is not None:  # the engine's thread: fold a fresh summary
            shown[0] = state.stats(band)
        if shown[0] is None:
            return
        tm = engine.ctx.timings
        extra = panel_lines(
            shown[0], now - t0, cfg.loop.env_bound, done_at_start=roots_at_start, now_doing=activity.text(),
            timings=f"sandbox {tm.sandbox:.1f}s, policy {tm.policy:.1f}s, embedding {tm.embedding:.1f}s",
        )
        live.update(render_stats(shown[0], title=run_id, extra=extra))

    def tick() -> None:  # redraw the activity line (a terminal) or say it (lines) while a long model call runs
        while not done_drawing.wait(1.0):
            draw(None)

    done_drawing = threading.Event()
    engine.on_progress = draw
    interrupts = [0]

    def on_signal(signum: int, frame: Any) -> None:
        interrupts[0] += 1
        if interrupts[0] > 1:
            raise KeyboardInterrupt
        note(styled(("stopping after the current step (Ctrl-C again to abort now)...", "yellow")))
        engine.stop()

    in_main = threading.current_thread() is threading.main_thread()
    old = {}
    if in_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, on_signal)
    try:
        if progress and not lines:
            live = Live(render_stats(engine.state.stats(), title=run_id), console=out, refresh_per_second=4, transient=False)
            live.start()
            threading.Thread(target=tick, name="progress", daemon=True).start()
        elif lines:
            draw(engine.state, force=True)  # a first line at once: the run is alive
            threading.Thread(target=tick, name="progress", daemon=True).start()
        try:
            reason = engine.run()
        except KeyboardInterrupt:
            reason = "interrupted"
        activity.on_activity("")
        if live is not None:
            draw(engine.state, force=True)
    finally:
        done_drawing.set()
        if live is not None:
            live.stop()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return reason


def report_stop(engine: Engine, cfg: EngineConfig, run_id: str, reason: str, *, elapsed_s: float, progress: bool,
                data_dir: Path | None) -> None:
    """The stopped run's summary (a stats table when progress went to lines) and the next commands."""
    s = engine.state.stats((cfg.reward.band_low, cfg.reward.band_high))
    if progress and not is_terminal():
        print_stats(s, title=run_id, extra=f"{elapsed_s:.0f}s, stopped ({reason})")
    trained = ""
    if engine.trainer is not None:
        trained = f", {len(engine.state.policy_updates)} policy updates (now {engine.ctx.policy.version})"
    note(styled(
        ("stopped", "bold"),
        (stopped_summary(s, reason, trained), None),
    ))
    for line in next_commands(run_id, reason=reason, bound=cfg.loop.env_bound, data_dir=data_dir):
        note(line)


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
