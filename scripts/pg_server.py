#!/usr/bin/env python3
"""A throwaway real PostgreSQL server for tests and local use (Debian's postgresql package).

    python3 scripts/pg_server.py start [--dir DIR] [--port N]   prints the URL, leaves it running
    python3 scripts/pg_server.py stop --dir DIR                  stops it and deletes DIR

From Python (the tests' ``postgres_url`` fixture in tests/conftest.py)::

    with PostgresServer() as pg:
        url = pg.create_database("t1")   # postgresql+psycopg://postgres@127.0.0.1:PORT/t1

The cluster lives in a temporary directory (initdb, trust auth, fsync off), listens on a free
port on 127.0.0.1 only, and is owned by the ``postgres`` user when run as root (PostgreSQL
refuses to run as root), through ``runuser``.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["PostgresServer", "find_bin_dir", "PostgresUnavailable"]


class PostgresUnavailable(RuntimeError):
    """PostgreSQL binaries are missing or the server did not start."""


def find_bin_dir() -> Path:
    """The newest ``/usr/lib/postgresql/<v>/bin`` with initdb (or $PG_BIN)."""
    env = os.environ.get("PG_BIN")
    if env and (Path(env) / "initdb").exists():
        return Path(env)
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if not cands:
        raise PostgresUnavailable("PostgreSQL is not installed (run scripts/setup.sh --system: apt-get install postgresql)")
    return Path(cands[-1]).parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """Start/stop a private PostgreSQL cluster in a temporary directory."""

    def __init__(self, directory: str | Path | None = None, port: int | None = None, user: str = "postgres"):
        self.bin = find_bin_dir()
        self.directory = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="spade-pg-"))
        self.port = port or free_port()
        self.user = user
        self.as_root = os.geteuid() == 0

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def logfile(self) -> Path:
        return self.directory / "server.log"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.as_root:
            shutil.chown(self.directory, "postgres", "postgres")
            os.chmod(self.directory, 0o700)
        if not (self.data / "PG_VERSION").exists():
            try:
                self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")
            except subprocess.CalledProcessError as exc:
                raise PostgresUnavailable(f"initdb failed: {exc.stderr.strip()}") from None
        opts = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
        )
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.logfile), "-w", "-t", "60", "start")
        except subprocess.CalledProcessError as exc:
            log = self.logfile.read_text() if self.logfile.exists() else ""
            raise PostgresUnavailable(f"pg_ctl start failed: {exc.stderr.strip()} {log[-2000:]}") from None
        self._wait()
        return self.url()

    def _wait(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres", connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise PostgresUnavailable(f"PostgreSQL on port {self.port} did not accept connections") from None
                time.sleep(0.2)

    def create_database(self, name: str) -> str:
        """Create an empty database and return its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def running(self) -> bool:
        res = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "status", check=False)
        return res.returncode == 0

    def stop(self, *, remove: bool = True) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop", check=False)
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["start", "stop"])
    ap.add_argument("--dir", help="cluster directory (default: a new temporary one)")
    ap.add_argument("--port", type=int)
    args = ap.parse_args(argv)
    if args.action == "start":
        server = PostgresServer(args.dir, args.port)
        url = server.start()
        print(f"{url}  (dir {server.directory}; stop: python3 scripts/pg_server.py stop --dir {server.directory})")
        return 0
    if not args.dir:
        ap.error("stop needs --dir")
    PostgresServer(args.dir, port=1).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
