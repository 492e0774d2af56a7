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
from .events.store import Backend, RunLocation, locate_run, new_run_backend, open_event_log, resolve_data_dir
from .textout import err as console, out, styled

__all__ = [
    "console", "out", "DataDirOpt", "BackendOpt", "BootstrapOpt", "RunArg", "handle_errors", "error_line", "check_backend",
    "bootstrap_or_env", "backend_or_env", "open_run", "locate", "new_run_place",
]

DataDirOpt = Annotated[
    Optional[Path],
    typer.Option("--data-dir", "-d", help="Data directory (default: $SPADE_DATA, then ./spade-data).", show_default=False),
]
BackendOpt = Annotated[
    Optional[str],
    typer.Option(
        "--backend",
        help="Event log backend, sqlite or kafka (default: $SPADE_LOG__BACKEND, else the run's own as its data "
        "directory remembers it, else kafka when a bootstrap is given, else sqlite).",
        show_default=False,
    ),
]
BootstrapOpt = Annotated[
    Optional[str],
    typer.Option(
        "--bootstrap",
        help="Kafka bootstrap HOST:PORT (default: $SPADE_LOG__BOOTSTRAP or $SPADE_KAFKA_BOOTSTRAP, else the run's "
        "remembered one).",
        show_default=False,
    ),
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


def backend_or_env(backend: str | None) -> Backend | None:
    """The backend the user chose: ``--backend``, else ``$SPADE_LOG__BACKEND``; ``None`` if neither
    (checked: an unknown name is a clear error)."""
    chosen = backend or os.environ.get("SPADE_LOG__BACKEND") or None
    return None if chosen is None else check_backend(chosen)


def bootstrap_or_env(bootstrap: str | None) -> str | None:
    """The bootstrap the user gave: ``--bootstrap``, else ``$SPADE_LOG__BOOTSTRAP``, else
    ``$SPADE_KAFKA_BOOTSTRAP``."""
    return bootstrap or os.environ.get("SPADE_LOG__BOOTSTRAP") or os.environ.get("SPADE_KAFKA_BOOTSTRAP") or None


def locate(run: str | None, data_dir: Path | None, backend: str | None = None, bootstrap: str | None = None) -> RunLocation:
    """Resolve RUN (default: latest) and where its log lives, from the flags, the environment and
    what the data directory remembers (:func:`~spade_engine.events.store.locate_run`)."""
    root = resolve_data_dir(data_dir)
    return locate_run(run, data_dir=root, backend=backend_or_env(backend), bootstrap=bootstrap_or_env(bootstrap))


def new_run_place(backend: str | None, bootstrap: str | None) -> tuple[Backend, str | None]:
    """``(backend, bootstrap)`` for a run about to be created (or a command that is not about one
    run): the chosen backend, else Kafka when a bootstrap is given, else sqlite."""
    boot = bootstrap_or_env(bootstrap)
    return new_run_backend(backend_or_env(backend), boot), boot


def open_run(
    run: str | None,
    data_dir: Path | None,
    backend: str | None = None,
    bootstrap: str | None = None,
    *,
    read_only: bool = False,
) -> tuple[str, EventLog]:
    """Resolve RUN (default: latest) and open its log where it lives; ``read_only`` for a command
    that only reads the log (it then writes nothing to it, see
    :func:`~spade_engine.events.store.open_event_log`)."""
    root = resolve_data_dir(data_dir)
    where = locate(run, root, backend, bootstrap)
    return where.run_id, open_event_log(
        where.run_id, data_dir=root, backend=where.backend, bootstrap=where.bootstrap, read_only=read_only
    )
