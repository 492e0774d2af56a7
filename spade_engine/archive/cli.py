"""`spade-engine replay` and `spade-engine archive list|show|search|migrate`.

The archive commands read a run's live projections in ``<data>/runs/<run_id>/`` (or the archive
at ``--url``); ``--refresh`` first brings them up to date with the log. ``replay`` rebuilds every
projection from the log into a fresh directory and with ``--verify`` compares with the live ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich import box
from rich.table import Table

from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, open_run, out
from ..errors import SpadeError
from ..events.store import DataDir, resolve_data_dir
from .db import ARCHIVE_FILENAME, ArchiveError, make_engine, migrate, resolve_url, safe_url, schema_revision

app = typer.Typer(help="Query and audit the environment archive of a run.", no_args_is_help=True)

UrlOpt = Annotated[
    Optional[str],
    typer.Option("--url", help="Archive database URL (default: sqlite in the run directory; postgresql://... ).", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _run_dir(data_dir: Path | None, run_id: str) -> Path:
    return DataDir(resolve_data_dir(data_dir)).run_dir(run_id)


def _open(run, data_dir, backend, bootstrap, url, refresh):
    """(run_id, log, run_dir, live projections), refreshed from the log when asked."""
    from ..consumers.runner import EmbeddedRunner
    from ..recorded import recorded_config_or_default
    from .replay import open_live_projections

    run_id, log = open_run(run, data_dir, backend, bootstrap)
    run_dir = _run_dir(data_dir, run_id)
    if not refresh and url is None and not (run_dir / ARCHIVE_FILENAME).exists():
        log.close()
        raise ArchiveError(f"run {run_id} has no archive yet; build it with --refresh or `spade-engine replay`")
    projs = open_live_projections(run_dir, recorded_config_or_default(log), archive_url=url)
    if refresh:
        EmbeddedRunner(log, projs.all).catch_up()
    return run_id, log, run_dir, projs


def say(text: str) -> None:
    """Print a plain line (no markup: ids hold brackets; no wrapping: lines are grepped)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _print_envs(rows: list[dict[str, Any]], as_json: bool, extra: str | None = None) -> None:
    if as_json:
        out.print_json(json.dumps(rows, default=str))
        return
    table = Table(show_edge=False, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    cols = ["env_id", "skill", "verdict", "failed", "novelty", "plays", "win", "hinted", "regret", "reward"]
    if extra:
        cols.append(extra)
    id_width = max([len(r["env_id"]) for r in rows] + [6])
    for c in cols:
        if c == "env_id":
            table.add_column(c, no_wrap=True, min_width=id_width)
        else:
            table.add_column(c, overflow="fold")
    for r in rows:
        cells = [
            r["env_id"], r["skill"], r["verdict"], _fmt(r.get("failed_check")), _fmt(r.get("novelty")),
            f"{r.get('plays_plain', 0)}+{r.get('plays_hinted', 0)}", _fmt(r.get("win_rate_plain")),
            _fmt(r.get("win_rate_hinted")), _fmt(r.get("regret")), _fmt(r.get("designer_reward")),
        ]
        if extra:
            cells.append(_fmt(r.get(extra), 3))
        table.add_row(*cells)
    out.print(table)


def _print_skipped(projs) -> None:
    skipped = projs.skipped()
    total = sum(sum(c.values()) for c in skipped.values())
    if total:
        parts = [f"{name}: " + ", ".join(f"{r} x{n}" for r, n in counts.items()) for name, counts in skipped.items() if counts]
        say(f"skipped events: {total} ({'; '.join(parts)})")
    else:
        say("skipped events: 0")


SkillOpt = Annotated[Optional[str], typer.Option("--skill", help="Only this skill.")]
VerdictOpt = Annotated[Optional[str], typer.Option("--verdict", help="accepted, rejected or proposed.")]
WinMinOpt = Annotated[Optional[float], typer.Option("--win-min", help="Plain win rate at least this.")]
WinMaxOpt = Annotated[Optional[float], typer.Option("--win-max", help="Plain win rate at most this.")]
RefreshOpt = Annotated[bool, typer.Option("--refresh", help="Bring the projections up to date with the log first.")]


@app.command("list")
@handle_errors
def list_cmd(
    run: RunArg = None,
    skill: SkillOpt = None,
    verdict: VerdictOpt = None,
    win_min: WinMinOpt = None,
    win_max: WinMaxOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many rows.")] = 50,
    refresh: RefreshOpt = False,
    as_json: JsonOpt = False,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """List a run's environments, filtered by skill, verdict and plain win-rate band."""
    from .queries import archive_state, list_environments

    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    with projs:
        rows = list_environments(projs.archive.engine, skill=skill, verdict=verdict, win_min=win_min, win_max=win_max, limit=limit)
        _print_envs(rows, as_json)
        if not as_json:
            state = archive_state(projs.archive.engine)
            say(f"{run_id}: {state['counts']['environments']} environments, archive at offset {state['cursor']}")
            _print_skipped(projs)
    log.close()


@app.command("show")
@handle_errors
def show_cmd(
    env_id: Annotated[str, typer.Argument(help="Environment id (or unique prefix).")],
    run: RunArg = None,
    refresh: RefreshOpt = False,
    as_json: JsonOpt = False,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Show one environment: code, verdict and why, novelty, hint, plays, lineage, offsets."""
    from .queries import get_environment, plays_of

    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    with projs:
        env = get_environment(projs.archive.engine, env_id)
        if env is None:
            raise ArchiveError(f"no environment {env_id!r} in run {run_id}")
        plays = plays_of(projs.archive.engine, env["env_id"])
    log.close()
    if as_json:
        out.print_json(json.dumps({**env, "plays": plays}, default=str))
        return
    for key, value in env.items():
        if key not in ("code", "sources"):
            say(f"{key:>20} {_fmt(value, 3)}")
    out.print("[bold]code[/]:")
    out.print(env["code"], markup=False, highlight=False)
    out.print(f"[bold]plays[/] ({len(plays)}):")
    for p in plays:
        say(f"  {p['play_id']:<24} hinted={p['hinted']!s:<5} reward={p['episode_reward']:.2f} turns={p['turns']} policy={p['policy_version']}")


@app.command("search")
@handle_errors
def search_cmd(
    run: RunArg = None,
    text: Annotated[Optional[str], typer.Option("--text", "-q", help="Rank accepted environments by similarity to this text (through the memory).")] = None,
    skill: SkillOpt = None,
    verdict: VerdictOpt = None,
    win_min: WinMinOpt = None,
    win_max: WinMaxOpt = None,
    k: Annotated[int, typer.Option("--k", "-k", help="How many results.")] = 10,
    refresh: RefreshOpt = False,
    as_json: JsonOpt = False,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Search environments by text (embedding similarity) and/or filters."""
    from .queries import list_environments

    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    with projs:
        filters = dict(skill=skill, verdict=verdict, win_min=win_min, win_max=win_max)
        if text:
            from .embedder import Embedder

            mem = projs.memory
            if len(mem) == 0:
                rows = []
            else:
                vec = Embedder(mem.config.embedding_model).embed([text])
                sims, idx = mem.search(vec, min(len(mem), max(k * 10, 50)))
                ranked = [(mem.entries[int(i)]["env_id"], float(s)) for s, i in zip(sims[0], idx[0]) if i >= 0]
                found = {r["env_id"]: r for r in list_environments(projs.archive.engine, env_ids=[e for e, _ in ranked], limit=None, **filters)}
                rows = [{**found[e], "similarity": s} for e, s in ranked if e in found][:k]
        else:
            rows = list_environments(projs.archive.engine, limit=k, **filters)
        _print_envs(rows, as_json, extra="similarity" if text else None)
        if not as_json:
            _print_skipped(projs)
    log.close()


@app.command("migrate")
@handle_errors
def migrate_cmd(
    run: RunArg = None,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
) -> None:
    """Upgrade an archive database of an older schema version to the current one."""
    if url is None:
        run_id, log = open_run(run, data_dir, backend, bootstrap)
        log.close()
        url = resolve_url(_run_dir(data_dir, run_id) / ARCHIVE_FILENAME)
    else:
        url = resolve_url(url)
    engine = make_engine(url)
    try:
        before, has_tables = schema_revision(engine)
        after = migrate(engine)[1]
    finally:
        engine.dispose()
    if before == after:
        say(f"archive {safe_url(url)} is already at schema version {after}")
    else:
        say(f"archive {safe_url(url)} migrated from schema version {before or 'none'} to {after}")


@handle_errors
def replay_cmd(
    run: RunArg = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Stop at this offset (events before it) or ISO time.", show_default=False)] = None,
    into: Annotated[Optional[Path], typer.Option("--into", help="Fresh directory for the rebuilt projections (default: <run dir>/replays/<time>).", show_default=False)] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Compare with the live projections; exit 1 on a difference.")] = False,
    archive_url: Annotated[Optional[str], typer.Option("--archive-url", help="Empty database for the rebuilt archive (default: sqlite in DIR).", show_default=False)] = None,
    as_json: JsonOpt = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = "sqlite",
    bootstrap: BootstrapOpt = None,
    retrain: Annotated[bool, typer.Option("--retrain", help="Instead: train --model on this run's environments, in order, as a new linked run.")] = False,
    model: Annotated[Optional[str], typer.Option("--model", help="With --retrain: the model to train (path, hub id, tiny[:SEED]).", show_default=False)] = None,
) -> None:
    """Rebuild every projection (archive, memory, difficulty) of a run from its event log.

    With --retrain --model M: train a fresh model on the run's recorded curriculum instead
    (see `spade-engine retrain`)."""
    if retrain:
        from ..runs.cli import run_retrain

        if not model:
            raise SpadeError("--retrain needs --model (a local path, an offline hub id or tiny[:SEED])")
        return run_retrain(run, model, data_dir, None, backend, bootstrap)
    from datetime import datetime, timezone

    from .replay import ReplayError, open_live_projections, open_projections, parse_until, replay_run, verify_projections
    from ..recorded import recorded_config_or_default

    run_id, log = open_run(run, data_dir, backend, bootstrap)
    run_dir = _run_dir(data_dir, run_id)
    config = recorded_config_or_default(log)
    target: Any = parse_until(until)
    live = None
    if verify:
        if not (run_dir / ARCHIVE_FILENAME).exists():
            raise ReplayError(f"run {run_id} has no live projections to verify against")
        live = open_live_projections(run_dir, config)
        positions = [p.position() for p in live.all]
        if target is None:
            if any(pos != positions[0] for pos in positions):
                raise ReplayError(f"the live projections are at different positions {positions}; let the run catch up first")
            target = positions[0]
    if into is None:
        into = run_dir / "replays" / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    result = replay_run(log, into, config, until=target, archive_url=archive_url)
    replay_choice = None
    if live is not None:  # level-replay choices recompute from the log before each one's basis
        from ..engine.level_replay import verify_replays

        wrong = verify_replays(log, config)
        if wrong:
            m = wrong[0]
            replay_choice = f"level replay at slot {m.slot}: {m.field} recorded {m.recorded!r} != recomputed {m.recomputed!r}"
    log.close()
    summary: dict[str, Any] = {
        "run_id": run_id, "into": str(result.directory), "events": result.events,
        "seconds": round(result.seconds, 3), "events_per_s": round(result.events_per_s, 1),
        "cursor": result.cursor, "skipped": result.skipped, "processes": result.processes,
    }
    difference = None
    if live is not None:
        with live, open_projections(into, config, archive_url=archive_url) as rebuilt:
            difference = verify_projections(live, rebuilt)
        difference = difference or replay_choice
        summary["verify"] = "equal" if difference is None else f"first difference: {difference}"
    if as_json:
        out.print_json(json.dumps(summary, default=str))
    else:
        say(f"replayed {result.events} events of {run_id} into {result.directory} in {result.seconds:.2f}s ({result.events_per_s:,.0f} events/s, {result.processes} process{'es' if result.processes > 1 else ''})")
        total = sum(sum(c.values()) for c in result.skipped.values())
        parts = [f"{n}: " + ", ".join(f"{r} x{c}" for r, c in counts.items()) for n, counts in result.skipped.items() if counts]
        say(f"skipped events: {total}" + (f" ({'; '.join(parts)})" if parts else ""))
        if live is not None:
            say("verify: live projections equal the replay" if difference is None else f"verify: first difference: {difference}")
    if difference is not None:
        raise typer.Exit(1)
