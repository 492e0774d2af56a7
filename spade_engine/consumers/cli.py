"""`spade-engine consumers ...`: run the projections of a run, show their figures."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cli_app import command_group
from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, locate, open_run
from ..textout import aside, note, print_json, table
from ..errors import SpadeError
from ..events.backends import driver_backends, log_backend
from ..events.store import DataDir, open_event_log, resolve_data_dir
from .runner import EmbeddedRunner
from .stats import SNAPSHOT_NAME, RunStatsProjection, load_summary

app = command_group(help="Run the projections (read models) of a run's event log.", no_args_is_help=True)

DriverOpt = Annotated[
    str,
    typer.Option(
        "--driver",
        help="auto (faust for kafka, embedded for sqlite), embedded (any backend) or faust (kafka only).",
    ),
]


def snapshot_path(data_dir: Path, run_id: str) -> Path:
    """Where the stats projection of ``run_id`` keeps its snapshot."""
    return DataDir(data_dir).run_dir(run_id) / "projections" / SNAPSHOT_NAME


@app.command("run")
@handle_errors
def run(
    run: RunArg = None,
    driver: DriverOpt = "auto",
    until_idle: Annotated[
        Optional[float],
        typer.Option("--until-idle", help="Stop after this many seconds without a new event (default: follow until Ctrl-C)."),
    ] = None,
    stall_s: Annotated[
        float,
        typer.Option("--stall-s", help="faust driver: restart the worker when records wait and its commits stop moving this long."),
    ] = 60.0,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Feed the run's events to its projections (per-run statistics), from their committed position."""
    root = resolve_data_dir(data_dir)
    where = locate(run, root, backend, bootstrap)
    run_id, backend, boot = where.run_id, where.backend, where.bootstrap
    log = open_event_log(run_id, data_dir=root, backend=backend, bootstrap=boot)
    if driver == "auto":
        driver = log_backend(backend).consumer_driver
    if driver not in ("embedded", "faust"):
        log.close()
        raise SpadeError(f"unknown driver {driver!r} (expected auto, embedded or faust)")
    if backend not in driver_backends(driver):
        log.close()
        raise SpadeError(f"the {driver} driver needs --backend {' or '.join(driver_backends(driver))}")
    stats = RunStatsProjection(run_id, snapshot_path(root, run_id))
    if driver == "embedded":
        runner = EmbeddedRunner(log, [stats])
        try:
            if until_idle is not None:
                applied = runner.run(idle_timeout=until_idle)
            else:
                stop = threading.Event()
                try:
                    applied = runner.run(stop)
                except KeyboardInterrupt:
                    stop.set()
                    runner.flush()
                    applied = runner.applied
        finally:
            log.close()
    else:
        log.close()  # the topics exist; faust reads them itself
        from .faust_app import supervise_stats

        applied, restarts = supervise_stats(
            boot or "", run_id, str(stats.path), idle_exit_s=until_idle, stall_s=stall_s
        )
        if restarts:
            note(f"the faust worker was restarted {restarts} time(s)")
        stats = RunStatsProjection(run_id, snapshot_path(root, run_id))  # what the worker wrote
    note(f"applied {applied} records of {run_id} ({driver} driver)")
    print(json.dumps(stats.summary(), sort_keys=True))


@app.command("stats")
@handle_errors
def stats(
    run: RunArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as one JSON object.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Print the per-run statistics projection: counts by type (a table on a terminal, TSV in a
    pipe; first/last time, cursor and skipped events beside it), or everything as JSON."""
    root = resolve_data_dir(data_dir)
    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    log.close()
    path = snapshot_path(root, run_id)
    if not path.exists():
        raise SpadeError(f"no statistics for {run_id} yet: run `spade-engine consumers run {run_id}` first")
    summary = load_summary(path)
    if as_json:
        print_json(summary, sort_keys=True)
        return
    rows = [(t, n) for t, n in summary["counts"].items()]
    table(["type", "count"], [*rows, ("total", summary["total"])], title=f"statistics of {run_id}", right=["count"])
    cursor = ", ".join(f"{p}:{o}" for p, o in summary["cursor"].items()) or "-"
    aside(f"first {summary['first_at'] or '-'}, last {summary['last_at'] or '-'}, cursor {cursor}")
    skipped = summary["skipped"]
    aside("skipped: " + (", ".join(f"{r} x{n}" for r, n in skipped.items()) if skipped else "0"))
