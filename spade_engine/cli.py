"""The `spade-engine` command line: one Typer app naming every command; each area's module is
imported only when its command runs (see :mod:`spade_engine.cli_app`), so ``--version`` and
``--help`` start in a fraction of a second.

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
from .cli_app import LazyCommand, LazyGroup
from .textout import QUIET_LIBRARIES, quiet_libraries  # noqa: F401 (QUIET_LIBRARIES: re-exported)


class _Commands(LazyGroup):
    """Every command, in the order ``--help`` lists them."""

    lazy = {
        "start": LazyCommand("spade_engine.runs.cli:start", "Run (or resume) the self-play loop with live progress."),
        "status": LazyCommand("spade_engine.runs.cli:status", "Summarise a run: proposals, validity, plays, regret, band."),
        "replay": LazyCommand("spade_engine.archive.cli:replay_cmd", "Rebuild every projection of a run from its event log."),
        "dashboard": LazyCommand("spade_engine.dashboard.cli:dashboard_cmd", "Serve the live web dashboard of a run."),
        "audit": LazyCommand("spade_engine.dashboard.cli:audit_cmd", "Write a static HTML and CSV report of a run."),
        "validate": LazyCommand("spade_engine.sandbox.cli:validate", "Validate environment files in the sandbox."),
        "worker": LazyCommand("spade_engine.runs.worker_cli:worker", "Run one stage of the loop as a worker on a Kafka log."),
        "train": LazyCommand("spade_engine.runs.train_cli:train_command", "Train the policy on a run's plays (GRPO)."),
        "retrain": LazyCommand("spade_engine.runs.cli:retrain_command", "Train a fresh model on a run's recorded curriculum."),
        "eval": LazyCommand("spade_engine.evaluation.cli:eval_command", "Score a policy on held-out suites."),
        "compare": LazyCommand("spade_engine.compare.cli:compare_command", "Compare two runs: accuracy, frontier, compute."),
        "events": LazyCommand("spade_engine.events.cli:app", "Inspect, export and import a run's event log."),
        "archive": LazyCommand("spade_engine.archive.cli:app", "Query and export the environment archive of a run."),
        "consumers": LazyCommand("spade_engine.consumers.cli:app", "Run the projections (read models) of a run's log."),
        "config": LazyCommand("spade_engine.config_cli:app", "Show the resolved configuration."),
        "metrics": LazyCommand("spade_engine.metrics.cli:app", "Export a run's metrics (TensorBoard)."),
        "models": LazyCommand("spade_engine.models.cli:app", "List, fetch and locate real instruct models."),
    }
    order = [*lazy, "version"]


app = typer.Typer(
    name="spade-engine",
    cls=_Commands,
    rich_markup_mode=None,
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


@app.command("version")
def version() -> None:
    """Print the spade-engine version."""
    print(__version__)


def main() -> None:
    """Console-script entry point."""
    quiet_libraries()
    try:
        app(prog_name="spade-engine")
    except BrokenPipeError:
        # the reader of our stdout is gone: stop writing, no traceback (as `cat | head` does)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)


if __name__ == "__main__":
    main()
