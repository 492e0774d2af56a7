"""`spade-engine dashboard` (live web dashboard of a run) and `spade-engine audit` (a static
report of how difficulty evolved, why candidates were rejected, which environments drove
learning)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, RunArg, handle_errors, locate, open_run
from ..textout import note
from ..errors import SpadeError
from ..events.store import resolve_data_dir
from .security import allowed_hosts

__all__ = ["dashboard_cmd", "audit_cmd", "is_loopback", "bind_socket"]


class DashboardError(SpadeError):
    """The dashboard cannot be started as asked."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@handle_errors
def dashboard_cmd(
    run: RunArg = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port.")] = 8765,
    token: Annotated[
        Optional[str],
        typer.Option("--token", envvar="SPADE_DASHBOARD_TOKEN", show_default=False,
                     help="Require this token on every request (header or ?token=); needed to bind a non-loopback host."),
    ] = None,
    window: Annotated[
        int, typer.Option("--window", "-w", help="Environments per rolling mean on the charts (the page can change it).")
    ] = 10,
    allow_host: Annotated[
        Optional[list[str]],
        typer.Option("--allow-host", show_default=False, metavar="HOST",
                     help="Also answer requests whose Host header names this host (repeatable; '*.example.org' "
                          "patterns; loopback names and the bound address are always allowed)."),
    ] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Serve a live web dashboard of a run (counters, difficulty charts by environment with rolling
    means, training curves by policy version, event feed, environment browser with a shareable
    /#/env/<id> address, policy versions); works on finished and running runs."""
    import uvicorn

    from .app import create_app

    if not is_loopback(host) and not token:
        raise DashboardError(
            f"refusing to bind {host} without a token: pass --token or set SPADE_DASHBOARD_TOKEN "
            "(or bind 127.0.0.1)"
        )
    if not 0 < port < 65536:
        raise DashboardError(f"--port {port} is not a TCP port")
    if window < 1:
        raise DashboardError(f"--window {window}: a rolling mean needs at least 1 environment")
    hosts = allowed_hosts(host, allow_host or [])
    for pattern in hosts:
        if "*" in pattern[1:] or (pattern.startswith("*") and pattern != "*" and not pattern.startswith("*.")):
            raise DashboardError(f"--allow-host {pattern!r}: a wildcard may only lead a domain, as in '*.example.org'")
    root = resolve_data_dir(data_dir)
    where = locate(run, root, backend, bootstrap)
    run_id, backend, boot = where.run_id, where.backend, where.bootstrap
    sock = bind_socket(host, port)  # a busy port fails here, before any URL is printed
    try:
        app = create_app(root, run_id, token, backend=backend, bootstrap=boot, server_process=True, window=window,
                         allowed_hosts=hosts)
    except BaseException:
        sock.close()
        raise
    shown = f"[{host}]" if ":" in host else host
    qs = "?token=<token>" if token else ""
    note(f"dashboard of {run_id} on http://{shown}:{port}/{qs}  (Ctrl-C stops)")
    hub = app.state.live.hub

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            hub.close()  # end the SSE streams so shutdown does not wait for browsers
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
    try:
        _Server(config).run(sockets=[sock])
    finally:
        sock.close()


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (as uvicorn binds it), or a :class:`DashboardError`
    when the address is taken or not this machine's."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise DashboardError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        raise DashboardError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    return sock


@handle_errors
def audit_cmd(
    run: RunArg = None,
    until: Annotated[
        Optional[str],
        typer.Option("--until", help="Only events before this offset, or up to this ISO time (2026-01-31T12:00:00Z).",
                     show_default=False),
    ] = None,
    out_dir: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Report directory (default: <run dir>/audit).", show_default=False)
    ] = None,
    window: Annotated[Optional[int], typer.Option("--window", help="Environments per window.", show_default=False)] = None,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Write a self-contained HTML report, CSV tables and a terminal summary of a run: difficulty
    by window and skill, rejection reasons, frontier-band occupancy, top-regret environments and
    their lineage, policy versions. The same log always gives the same files (bar one timestamp)."""
    from ..archive.difficulty import DEFAULT_WINDOW
    from ..archive.replay import parse_until
    from ..events.store import DataDir
    from .audit import build_audit, print_summary, write_audit

    bound = parse_until(until)
    run_id, log = open_run(run, data_dir, backend, bootstrap, read_only=True)
    try:
        target = out_dir or DataDir(resolve_data_dir(data_dir)).run_dir(run_id) / "audit"
        audit = build_audit(log, until=bound, window=window or DEFAULT_WINDOW)
    finally:
        log.close()
    files = write_audit(audit, target)
    print_summary(audit)
    note(f"wrote {', '.join(str(f) for f in files)}")
