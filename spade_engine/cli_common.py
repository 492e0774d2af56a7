"""Options and helpers shared by every CLI command: data directory, backend, run resolution,
and turning :class:`~spade_engine.errors.SpadeError` into a clean message and exit code."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from .errors import SpadeError
from .events.backends import log_backend
from .events.log import EventLog
from .events.store import Backend, open_event_log, resolve_data_dir, resolve_run
from .textout import err as console, out, styled

__all__ = [
    "console", "out", "DataDirOpt", "BackendOpt", "BootstrapOpt", "RunArg", "handle_errors", "error_line", "check_backend",
    "bootstrap_or_env", "open_run",
]

DataDirOpt = Annotated[
    Optional[Path],
    typer.Option("--data-dir", "-d", help="Data directory (default: $SPADE_DATA, then ./spade-data).", show_default=False),
]
BackendOpt = Annotated[
    str, typer.Option("--backend", help="Event log backend: sqlite (embedded default) or kafka.")
]
BootstrapOpt = Annotated[
    Optional[str],
    typer.Option("--bootstrap", help="Kafka bootstrap HOST:PORT (default: $SPADE_KAFKA_BOOTSTRAP).", show_default=False),
]
RunArg = Annotated[Optional[str], typer.Argument(help="Run id or unique prefix (default: the latest run).", show_default=False)]

F = TypeVar("F", bound=Callable[..., Any])


def error_line(message: object) -> None:
    """``error: MESSAGE`` as one line on stderr; the message is text (it often quotes model-written
    code or input), never markup, and its newlines and control characters are escaped."""
    console.print(styled(("error:", "bold red"), " ", (message, None)), highlight=False, soft_wrap=True)


def _os_error_message(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def handle_errors(fn: F) -> F:
    """Print SpadeErrors as one red line and exit 2, instead of a traceback. An ``OSError`` (a
    missing, unreadable or unwritable path, a full disk) is bad input of the same kind: one line
    naming the path, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SpadeError as exc:
            error_line(exc)
            raise typer.Exit(2) from None
        except BrokenPipeError:
            raise  # the reader went away (`| head`): main() ends quietly
        except OSError as exc:
            error_line(_os_error_message(exc))
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def check_backend(backend: str) -> Backend:
    """``backend`` if it is a registered event-log backend, else a clear error."""
    log_backend(backend)
    return backend


def bootstrap_or_env(bootstrap: str | None) -> str | None:
    return bootstrap or os.environ.get("SPADE_KAFKA_BOOTSTRAP")


def open_run(
    run: str | None,
    data_dir: Path | None,
    backend: str = "sqlite",
    bootstrap: str | None = None,
) -> tuple[str, EventLog]:
    """Resolve RUN (default: latest) and open its log."""
    b = check_backend(backend)
    root = resolve_data_dir(data_dir)
    boot = bootstrap_or_env(bootstrap)
    run_id = resolve_run(run, data_dir=root, backend=b, bootstrap=boot)
    return run_id, open_event_log(run_id, data_dir=root, backend=b, bootstrap=boot)
