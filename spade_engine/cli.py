"""The `spade-engine` command line: one Typer app; each area registers its commands here."""

from __future__ import annotations

import typer

from . import __version__
from .archive.cli import app as archive_app, replay_cmd
from .dashboard.cli import register as register_dashboard
from .compare.cli import compare_command
from .consumers.cli import app as consumers_app
from .evaluation.cli import eval_command
from .sandbox.cli import validate as validate_command
from .events.cli import app as events_app
from .models.cli import app as models_app
from .runs import cli as run_cli
from .runs.worker_cli import worker as worker_command
from .trainer.cli import train_command

app = typer.Typer(
    name="spade-engine",
    help="Event-sourced self-play curriculum engine for LLM agents (SPADE).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(events_app, name="events")
app.command("start")(run_cli.start)
app.command("status")(run_cli.status)
app.add_typer(archive_app, name="archive")
app.command("replay")(replay_cmd)
register_dashboard(app)
app.add_typer(consumers_app, name="consumers")
app.command("validate")(validate_command)
app.command("worker")(worker_command)
app.command("train")(train_command)
app.command("retrain")(run_cli.retrain_command)
app.command("eval")(eval_command)
app.command("compare")(compare_command)
app.add_typer(models_app, name="models")


@app.command("version")
def version() -> None:
    """Print the spade-engine version."""
    print(__version__)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
