"""`spade-engine metrics tensorboard`: a run's metrics as TensorBoard event files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..cli_app import command_group
from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, open_run
from ..textout import note

app = command_group(help="Export a run's metrics to other tools.", no_args_is_help=True)


@app.command("tensorboard")
@handle_errors
def tensorboard_cmd(
    run: RunArg = None,
    logdir: Annotated[Path, typer.Option("--logdir", "-o", help="TensorBoard log directory (the run gets a folder in it).")] = Path("tensorboard"),
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Write a run's metrics as TensorBoard event files into LOGDIR/<run_id>/: per environment
    (step = environment index: validity, novelty, win rates, regret, designer reward, also per
    skill), per policy update (step = trainer step: every recorded metric) and held-out
    evaluations (step = policy version). View with `tensorboard --logdir LOGDIR`."""
    from .tensorboard import write_tensorboard

    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    try:
        result = write_tensorboard(log, logdir)
    finally:
        log.close()
    skipped = f"; {sum(result.skipped.values())} events skipped" if result.skipped else ""
    note(
        f"{result.scalars} scalars of {run_id} ({result.environments} environments, {result.policy_updates} policy "
        f"updates, {result.evaluations} evaluations) -> {result.directory}{skipped}"
    )
