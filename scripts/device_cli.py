"""The few `spade-engine` commands a device run needs (start, status, events, models), without the
rest of the command line: ``spade_engine.cli`` imports the dashboard (fastapi, starlette and
opentelemetry), which the device image lacks and nothing of a self-play run uses.

    python3 scripts/device_cli.py start --new --model qwen2.5-coder-0.5b-instruct --train --max-envs 8
    python3 scripts/device_cli.py status --json
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import typer  # noqa: E402

from spade_engine.events.cli import app as events_app  # noqa: E402
from spade_engine.models.cli import app as models_app  # noqa: E402
from spade_engine.runs import cli as run_cli  # noqa: E402
from spade_engine.textout import quiet_libraries  # noqa: E402

app = typer.Typer(name="spade-engine (device subset)", no_args_is_help=True, pretty_exceptions_enable=False)
app.command("start")(run_cli.start)
app.command("status")(run_cli.status)
app.add_typer(events_app, name="events")
app.add_typer(models_app, name="models")

if __name__ == "__main__":
    quiet_libraries()
    app()
