"""`spade-engine replay` and `spade-engine archive list|show|search|migrate`.

The archive commands read a run's live projections in ``<data>/runs/<run_id>/`` (or the archive
at ``--url``); ``--refresh`` first brings them up to date with the log. ``replay`` rebuilds every
projection from the log into a fresh directory and with ``--verify`` compares with the live ones
(and recomputes every level-replay choice and every regret estimate from the events they name).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..cli_app import command_group
from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, open_run
from ..errors import SpadeError
from ..textout import aside, is_terminal, note, plain, print_json, say, table, write_exact
from ..events.store import DataDir, resolve_data_dir
from .db import ARCHIVE_FILENAME, ArchiveError, make_engine, migrate, resolve_url, safe_url, schema_revision

app = command_group(help="Query and audit the environment archive of a run.", no_args_is_help=True)

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
    from .replay import open_checked_projections, open_live_projections

    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    run_dir = _run_dir(data_dir, run_id)
    if not refresh and url is None and not (run_dir / ARCHIVE_FILENAME).exists():
        log.close()
        raise ArchiveError(f"run {run_id} has no archive yet; build it with --refresh or `spade-engine replay`")
    if url is None and (run_dir / ARCHIVE_FILENAME).exists():  # checked against the log: rebuilt when ahead of it
        projs = open_checked_projections(run_dir, recorded_config_or_default(log), log, catch_up=True)
    else:
        projs = open_live_projections(run_dir, recorded_config_or_default(log), archive_url=url)
    if refresh:  # the projections are written, never the log (no group offsets committed: it is read-only here)
        EmbeddedRunner(log, projs.all, commit_offsets=False).catch_up()
    return run_id, log, run_dir, projs


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


_NUMERIC = ("novelty", "plays", "win", "hinted", "regret", "reward", "similarity")


def _print_envs(rows: list[dict[str, Any]], as_json: bool, extra: str | None = None) -> None:
    """Environments as JSON (every field), a table on a terminal or TSV in a pipe."""
    if as_json:
        print_json(rows)
        return
    cols = ["env_id", "skill", "verdict", "failed", "novelty", "plays", "win", "hinted", "regret", "reward"]
    if extra:
        cols.append(extra)
    cells = []
    for r in rows:
        row = [
            r["env_id"], r["skill"], r["verdict"], _fmt(r.get("failed_check")), _fmt(r.get("novelty")),
            f"{r.get('plays_plain', 0)}+{r.get('plays_hinted', 0)}", _fmt(r.get("win_rate_plain")),
            _fmt(r.get("win_rate_hinted")), _fmt(r.get("regret")), _fmt(r.get("designer_reward")),
        ]
        if extra:
            row.append(_fmt(r.get(extra), 3))
        cells.append(row)
    table(cols, cells, right=_NUMERIC)


def _print_skipped(projs) -> None:
    skipped = projs.skipped()
    total = sum(sum(c.values()) for c in skipped.values())
    if total:
        parts = [f"{name}: " + ", ".join(f"{r} x{n}" for r, n in counts.items()) for name, counts in skipped.items() if counts]
        aside(f"skipped events: {total} ({'; '.join(parts)})")
    else:
        aside("skipped events: 0")


SkillOpt = Annotated[Optional[str], typer.Option("--skill", help="Only this skill.")]
VerdictOpt = Annotated[Optional[str], typer.Option("--verdict", help="accepted, rejected or proposed.")]
WinMinOpt = Annotated[Optional[float], typer.Option("--win-min", help="Plain win rate at least this.")]
WinMaxOpt = Annotated[Optional[float], typer.Option("--win-max", help="Plain win rate at most this.")]
#: rows an `archive list` table shows unless --limit says otherwise
DEFAULT_ROWS = 50
RefreshOpt = Annotated[bool, typer.Option("--refresh", help="Bring the projections up to date with the log first.")]


@app.command("list")
@handle_errors
def list_cmd(
    run: RunArg = None,
    skill: SkillOpt = None,
    verdict: VerdictOpt = None,
    win_min: WinMinOpt = None,
    win_max: WinMaxOpt = None,
    limit: Annotated[
        Optional[int],
        typer.Option("--limit", "-n", min=0, show_default=False,
                     help=f"At most this many rows (default: {DEFAULT_ROWS} in a table, all with --json; 0 = all)."),
    ] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip this many rows first (pages with --limit).")] = 0,
    refresh: RefreshOpt = False,
    as_json: JsonOpt = False,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """List a run's environments, filtered by skill, verdict and plain win-rate band.

    A table shows the first 50 rows unless --limit says otherwise; --json lists every row unless
    --limit is given. When rows are left out, "rows A-B of M" (on stderr in a pipe) says so."""
    from .queries import archive_state, count_environments, list_environments

    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    with projs:
        filters = dict(skill=skill, verdict=verdict, win_min=win_min, win_max=win_max)
        if limit is None:
            limit = 0 if as_json else DEFAULT_ROWS
        rows = list_environments(projs.archive.engine, limit=limit or None, offset=offset, **filters)
        total = count_environments(projs.archive.engine, **filters)
        _print_envs(rows, as_json)
        if len(rows) < total:
            first, last = (offset + 1, offset + len(rows)) if rows else (0, 0)
            page = f"rows {first}-{last} of {total}" if rows else f"no rows at offset {offset} of {total}"
            nxt = f"--offset {offset + len(rows)} for the next page, " if offset + len(rows) < total else ""
            aside(f"{page} ({nxt}--limit 0 for all)")
        if not as_json:
            state = archive_state(projs.archive.engine)
            aside(f"{run_id}: {state['counts']['environments']} environments, archive at offset {state['cursor']}")
            _print_skipped(projs)
    log.close()


@app.command("show")
@handle_errors
def show_cmd(
    env_id: Annotated[str, typer.Argument(help="Environment id (or unique prefix).")],
    run: RunArg = None,
    code: Annotated[bool, typer.Option("--code", help="Only the environment's code (exactly, in a pipe or file).")] = False,
    full: Annotated[bool, typer.Option("--full", help="Everything, also in a pipe (where the default is the code only).")] = False,
    refresh: RefreshOpt = False,
    as_json: JsonOpt = False,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Show one environment: code, verdict and why, novelty, hint, plays, lineage, offsets.

    In a pipe or file only the code is written, byte for byte (`archive show ENV > env.py` gives
    the environment's source); --full writes everything, --json everything as JSON."""
    from .queries import get_environment, plays_of

    if code and full:
        raise SpadeError("--code and --full contradict each other: pass one")
    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    with projs:
        env = get_environment(projs.archive.engine, env_id)
        if env is None:
            raise ArchiveError(f"no environment {env_id!r} in run {run_id}")
        plays = plays_of(projs.archive.engine, env["env_id"])
    log.close()
    if as_json:
        print_json({**env, "plays": plays})
        return
    terminal = is_terminal()
    source = env.get("code") or ""
    if code or (not terminal and not full):
        if terminal:
            say(plain(source, keep="\n\t"))
        else:
            write_exact(source)
            note(f"wrote the code of {env['env_id']} ({len(source.encode('utf-8', 'backslashreplace')):,} bytes); "
                 "--full for everything, --json for every field")
        return
    for key, value in env.items():
        if key not in ("code", "sources"):
            say(f"{key:>20} {_fmt(value, 3)}")
    say("code:")
    if terminal:
        say(plain(source, keep="\n\t"))
    else:
        write_exact(source if source.endswith("\n") else source + "\n")
    say(f"plays ({len(plays)}):")
    for p in plays:
        say(f"  {p['play_id']:<24} hinted={p['hinted']!s:<5} reward={_fmt(p['episode_reward'])} turns={p['turns']} "
            f"policy={p['policy_version']}")


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
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Search environments by text (embedding similarity) and/or filters.

    At most -k results (with --json too); when more environments match, "K of M" (on stderr in a
    pipe) says so."""
    from .queries import count_environments, list_environments

    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    with projs:
        filters = dict(skill=skill, verdict=verdict, win_min=win_min, win_max=win_max)
        if text:
            from .embedder import Embedder

            mem = projs.memory
            if len(mem) == 0:
                rows = []
            else:
                note(f"loading embedding model {mem.config.embedding_model}...")
                vec = Embedder(mem.config.embedding_model).embed([text])
                sims, idx = mem.search(vec, min(len(mem), max(k * 10, 50)))
                ranked = [(mem.entries[int(i)]["env_id"], float(s)) for s, i in zip(sims[0], idx[0]) if i >= 0]
                found = {r["env_id"]: r for r in list_environments(projs.archive.engine, env_ids=[e for e, _ in ranked], limit=None, **filters)}
                rows = [{**found[e], "similarity": s} for e, s in ranked if e in found][:k]
        else:
            rows = list_environments(projs.archive.engine, limit=k, **filters)
        _print_envs(rows, as_json, extra="similarity" if text else None)
        # text search ranks what the memory holds (accepted environments) among the filtered ones
        in_memory = [e["env_id"] for e in projs.memory.entries] if text else None
        total = count_environments(projs.archive.engine, env_ids=in_memory, **filters)
        if len(rows) < total:
            best = "most similar " if text else ""
            aside(f"the {len(rows)} {best}of {total} matching environments (-k {total} for all)")
        if not as_json:
            _print_skipped(projs)
    log.close()


@app.command("export")
@handle_errors
def export_cmd(
    run: RunArg = None,
    table_: Annotated[
        str, typer.Option("--table", "-t", help="environments, plays, turns, or all (with --out DIR).")
    ] = "environments",
    fmt: Annotated[str, typer.Option("--format", "-f", help="parquet or jsonl.")] = "parquet",
    out_path: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", show_default=False,
                     help="File to write (a directory for --table all); JSON Lines go to stdout without it."),
    ] = None,
    refresh: RefreshOpt = False,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Export a run's environments, plays or turns as a table: Apache Parquet (pyarrow) or JSON
    Lines, one fixed schema per table, rows in log order (read them with pyarrow, pandas, polars
    or DuckDB)."""
    import sys

    from .export import FORMATS, TABLES, ExportError, export_tables

    names = list(TABLES) if table_ == "all" else [table_]
    if table_ != "all" and table_ not in TABLES:
        raise ExportError(f"unknown table {table_!r} (expected {', '.join(TABLES)} or all)")
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (expected {' or '.join(FORMATS)})")
    if out_path is None and (fmt == "parquet" or len(names) > 1):
        raise ExportError("--out is needed: " + ("a directory for --table all" if len(names) > 1 else "Parquet is binary"))
    run_id, log, _, projs = _open(run, data_dir, backend, bootstrap, url, refresh)
    try:
        with projs:
            target: Any = out_path if out_path is not None else sys.stdout.buffer
            result = export_tables(names, fmt, target, archive=projs.archive.engine, log=log)
    finally:
        log.close()
    for name, (where, n, skipped) in result.items():
        shown = "standard output" if not isinstance(where, Path) else str(where)
        extra = f" ({sum(skipped.values())} undecodable events skipped)" if skipped else ""
        note(f"{name}: {n} rows of {run_id} -> {shown}{extra}")


@app.command("migrate")
@handle_errors
def migrate_cmd(
    run: RunArg = None,
    url: UrlOpt = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Upgrade an archive database of an older schema version to the current one."""
    if url is None:
        run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
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
    backend: BackendOpt = None,
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

    from .replay import ReplayError, open_checked_projections, open_projections, parse_until, replay_run, verify_projections
    from ..recorded import recorded_config_or_default

    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    run_dir = _run_dir(data_dir, run_id)
    config = recorded_config_or_default(log)
    target: Any = parse_until(until)
    live = None
    if verify:
        if not (run_dir / ARCHIVE_FILENAME).exists():
            raise ReplayError(f"run {run_id} has no live projections to verify against")
        live = open_checked_projections(run_dir, config, log, catch_up=True, on_rebuild=lambda m: say(f"warning: {m}"))
        positions = [p.position() for p in live.all]
        if target is None:
            if any(pos != positions[0] for pos in positions):
                raise ReplayError(f"the live projections are at different positions {positions}; let the run catch up first")
            target = positions[0]
    # --verify alone rebuilds into a scratch folder, removed once the check is done (kept, and
    # named, only when it found a difference to look at)
    scratch = into is None and live is not None
    if into is None:
        into = run_dir / "replays" / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    try:
        difference = _replay_into(log, into, config, target, archive_url, live, run_id, as_json, scratch)
    except BaseException:
        if scratch:
            _remove_scratch(into)
        raise
    if difference is not None:
        raise typer.Exit(1)


def _remove_scratch(into: Path) -> None:
    shutil.rmtree(into, ignore_errors=True)
    try:
        into.parent.rmdir()  # replays/, when nothing else is in it
    except OSError:
        pass


def _replay_into(log: Any, into: Path, config: Any, target: Any, archive_url: str | None, live: Any, run_id: str,
                 as_json: bool, scratch: bool) -> str | None:
    """Replay into ``into`` (and verify against ``live``); print the summary; return the first
    difference found, else ``None``."""
    from .replay import open_projections, replay_run, verify_projections

    result = replay_run(log, into, config, until=target, archive_url=archive_url)
    replay_choice = None
    if live is not None:  # level-replay choices recompute from the log before each one's basis
        from ..engine.level_replay import verify_replays

        wrong = verify_replays(log, config)
        if wrong:
            m = wrong[0]
            replay_choice = f"level replay at slot {m.slot}: {m.field} recorded {m.recorded!r} != recomputed {m.recomputed!r}"
        if replay_choice is None:  # and every regret estimate from the plays and probes it names
            from ..engine.regret_replay import verify_regrets

            off = verify_regrets(log)
            if off:
                r = off[0]
                replay_choice = f"regret of {r.env_id}: {r.field} recorded {r.recorded!r} != recomputed {r.recomputed!r}"
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
    removed = scratch and difference is None
    if removed:
        _remove_scratch(into)
        summary["into"] = None
    if as_json:
        print_json(summary)
    else:
        where = "a scratch folder (removed after the check)" if removed else str(result.directory)
        say(f"replayed {result.events} events of {run_id} into {where} in {result.seconds:.2f}s ({result.events_per_s:,.0f} events/s, {result.processes} process{'es' if result.processes > 1 else ''})")
        total = sum(sum(c.values()) for c in result.skipped.values())
        parts = [f"{n}: " + ", ".join(f"{r} x{c}" for r, c in counts.items()) for n, counts in result.skipped.items() if counts]
        say(f"skipped events: {total}" + (f" ({'; '.join(parts)})" if parts else ""))
        if live is not None:
            say("verify: live projections equal the replay" if difference is None else f"verify: first difference: {difference}")
    return difference
