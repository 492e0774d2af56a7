"""`spade-engine config show`: the resolved config, value by value, with where each came from.

Layers, lowest first: ``default``, ``preset NAME``, ``file PATH``, ``env SPADE_...``, ``flag``
(``--set KEY=VALUE``); with ``--run RUN`` the run's recorded config (``recorded``) replaces the
first four, as it does when ``start`` resumes the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from .cli_app import command_group
from . import textout
from .cli_common import BackendOpt, BootstrapOpt, DataDirOpt, handle_errors, open_run, out
from .config import parse_assignments, resolve_config
from .errors import ConfigError

__all__ = ["app", "show", "parse_assignments"]

app = command_group(help="Inspect the configuration.", no_args_is_help=True)


@app.command("show")
@handle_errors
def show(
    preset: Annotated[Optional[str], typer.Option("--preset", help="A named config (laptop, spade-release, small-model).", show_default=False)] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML config file.", show_default=False)] = None,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="KEY=VALUE as a flag would set it (repeatable).", show_default=False)] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Show this run's recorded config instead.", show_default=False)] = None,
    only_set: Annotated[bool, typer.Option("--changed", help="Only values that do not come from the defaults.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON: {key: {value, source}}.")] = False,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Print the resolved config with the source of every value (default < preset < file < env < flag)."""
    flags = parse_assignments(sets or [])
    recorded = None
    if run is not None:
        from .recorded import recorded_config

        run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
        try:
            recorded = recorded_config(log)
        finally:
            log.close()
        if recorded is None:
            raise ConfigError(f"run {run_id} has not recorded a config yet (no RunStarted)")
        if preset is not None or config is not None:
            raise ConfigError("--run shows the recorded config: --preset and --config do not apply to it")
    resolved = resolve_config(config, preset=preset, overrides=flags, recorded=recorded)
    rows = [r for r in resolved.rows() if not (only_set and r[2] == "default")]
    if as_json:
        out.print_json(json.dumps({k: {"value": v, "source": s} for k, v, s in rows}))
        return
    if not out.is_terminal:  # TSV, values as JSON, never cut (a pipe or file)
        textout.table(["key", "value", "source"], [(k, json.dumps(v), src) for k, v, src in rows])
        return
    table = Table(header_style="bold cyan", box=None)
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("source", style="dim")
    for key, value, source in rows:
        style = "" if source == "default" else "bold"
        table.add_row(Text(key, style=style), Text(json.dumps(value)), Text(source))
    out.print(table)
