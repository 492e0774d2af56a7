"""The `spade-engine` command line: one Typer app; each area registers its commands here."""

from __future__ import annotations

import typer

from . import __version__
from .events.cli import app as events_app
from .trainer.cli import train_command

app = typer.Typer(
    name="spade-engine",
    help="Event-sourced self-play curriculum engine for LLM agents (SPADE).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(events_app, name="events")
app.command("train")(train_command)


@app.command("version")
def version() -> None:
    """Print the spade-engine version."""
    print(__version__)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
