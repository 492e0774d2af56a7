"""The `spade-engine` command line: one Typer app; each area registers its commands here.

:func:`main` also keeps library progress bars (tqdm, Hugging Face downloads and weight loading)
out of the output (``TQDM_DISABLE``, ``HF_HUB_DISABLE_PROGRESS_BARS``, unless already set; set
them empty to see the bars) and ends quietly when the reader of a pipe goes away
(``spade-engine events tail | head``).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from . import __version__
from .archive.cli import app as archive_app, replay_cmd
from .dashboard.cli import register as register_dashboard
from .compare.cli import compare_command
from .config_cli import app as config_app
from .consumers.cli import app as consumers_app
from .evaluation.cli import eval_command
from .sandbox.cli import validate as validate_command
from .events.cli import app as events_app
from .metrics.cli import app as metrics_app
from .models.cli import app as models_app
from .runs import cli as run_cli
from .runs.worker_cli import worker as worker_command
from .runs.train_cli import train_command
from .textout import QUIET_LIBRARIES, quiet_libraries  # noqa: F401 (QUIET_LIBRARIES: re-exported)

app = typer.Typer(
    name="spade-engine",
    help="Event-sourced self-play curriculum engine for LLM agents (SPADE).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"spade-engine {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Event-sourced self-play curriculum engine for LLM agents (SPADE)."""


app.add_typer(events_app, name="events")
app.command("start")(run_cli.start)
app.command("status")(run_cli.status)
app.add_typer(archive_app, name="archive")
app.command("replay")(replay_cmd)
register_dashboard(app)
app.add_typer(consumers_app, name="consumers")
app.add_typer(config_app, name="config")
app.command("validate")(validate_command)
app.command("worker")(worker_command)
app.command("train")(train_command)
app.command("retrain")(run_cli.retrain_command)
app.command("eval")(eval_command)
app.add_typer(metrics_app, name="metrics")
app.command("compare")(compare_command)
app.add_typer(models_app, name="models")


@app.command("version")
def version() -> None:
    """Print the spade-engine version."""
    print(__version__)


def main() -> None:
    """Console-script entry point."""
    quiet_libraries()
    try:
        app()
    except BrokenPipeError:
        # the reader of our stdout is gone: stop writing, no traceback (as `cat | head` does)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)


if __name__ == "__main__":
    main()
