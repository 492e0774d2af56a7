"""A real single-node Apache Kafka broker (KRaft, broker+controller) for tests, benches and CI.

There is no Docker here, and Apache's download site may be unreachable, but Maven Central is: the
broker is assembled from the ``org.apache.kafka:kafka_2.13`` jars (plus the log4j2 SLF4J binding
its POM leaves out) fetched with ``mvn dependency:copy-dependencies`` into a cache folder
(:func:`default_cache_dir`: ``$SPADE_KAFKA_CACHE``, else the user-wide
``$XDG_CACHE_HOME/spade-engine/kafka``, ``~/.cache/spade-engine/kafka`` by default; a checkout's
``.cache/kafka`` from earlier versions is still used when it holds the jars). A second fetch
reuses it.

:class:`KafkaBroker` formats a storage directory (``kafka.tools.StorageTool``), starts
``kafka.Kafka`` with a small heap on free 127.0.0.1 ports, waits until it answers metadata
requests, and stops it (SIGTERM, then SIGKILL). ``kill()`` + ``start()`` simulate a crash and a
restart on the same ports and data, for fault tests.

``scripts/kafka_broker.py`` is the command-line front end; ``tests/kafka_broker_fixture.py`` the
pytest one.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = [
    "KAFKA_VERSION",
    "LOG4J_SLF4J_VERSION",
    "BrokerError",
    "KafkaBroker",
    "default_cache_dir",
    "CACHE_ENV",
    "fetch",
    "free_port",
    "stop_detached",
]

KAFKA_VERSION = "4.1.2"
LOG4J_SLF4J_VERSION = "2.24.3"
_REPO_ROOT = Path(__file__).resolve().parents[2]

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>spade-engine.devtools</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka" level="INFO"/>
    <Logger name="org.apache.kafka" level="WARN"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Root level="WARN"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


class BrokerError(RuntimeError):
    """The broker could not be fetched, formatted, started or stopped."""


#: the environment variable naming the jar cache
CACHE_ENV = "SPADE_KAFKA_CACHE"


def default_cache_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the broker's jars live: ``$SPADE_KAFKA_CACHE``; else a source checkout's
    ``.cache/kafka`` when it already holds this version's jars (fetched by an earlier version of
    ``scripts/kafka_broker.py``); else the user-wide ``$XDG_CACHE_HOME/spade-engine/kafka``."""
    from ..cachedirs import user_cache_dir

    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    legacy = _REPO_ROOT / ".cache" / "kafka"
    if (_REPO_ROOT / "pyproject.toml").exists() and (legacy / version / ".complete").exists():
        return legacy
    return user_cache_dir("kafka")


def fetch(cache_dir: str | Path | None = None, *, version: str = KAFKA_VERSION, quiet: bool = True) -> Path:
    """The folder of broker jars, fetched from Maven Central on first use; returns ``.../libs``."""
    root = Path(cache_dir) if cache_dir else default_cache_dir(version)
    home = root / version
    libs = home / "libs"
    done = home / ".complete"
    if done.exists():
        return libs
    if shutil.which("mvn") is None:
        raise BrokerError("maven (mvn) is needed to fetch the Kafka jars: run scripts/setup.sh --system")
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one fetch at a time; the others then reuse it
        if done.exists():
            return libs
        (home / "pom.xml").write_text(_POM.format(kafka=version, log4j=LOG4J_SLF4J_VERSION))
        tmp = home / "libs.part"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            "mvn", "-B", *(["-q"] if quiet else []), "-f", str(home / "pom.xml"),
            "dependency:copy-dependencies", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime",
        ]
        proc = subprocess.run(cmd, capture_output=quiet, text=True)
        if proc.returncode != 0:
            tail = ((proc.stdout or "") + (proc.stderr or ""))[-2000:]
            raise BrokerError(f"fetching Kafka {version} jars with maven failed:\n{tail}")
        if not any(tmp.glob(f"kafka_2.13-{version}.jar")):
            raise BrokerError(f"maven finished but kafka_2.13-{version}.jar is not in {tmp}")
        shutil.rmtree(libs, ignore_errors=True)
        tmp.rename(libs)
        done.write_text(version + "\n")
    return libs


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kafka_uuid() -> str:
    # Kafka's Uuid.toString(): 16 random bytes, URL-safe base64 without padding; one starting
    # with "-" would be read as an option by StorageTool's argument parser, so draw again
    while True:
        uuid = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if uuid[0].isalnum():
            return uuid


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class KafkaBroker:
    """One broker+controller process on 127.0.0.1 with its data under ``directory``.

    Args:
        directory: holds ``server.properties``, ``data/`` (log dirs) and ``broker.log``.
        port: client (PLAINTEXT) port, 0 = a free one; kept across restarts.
        controller_port: KRaft controller port, 0 = a free one.
        heap: JVM maximum heap.
        libs: the jar folder (default: :func:`fetch`).
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        port: int = 0,
        controller_port: int = 0,
        heap: str = "512m",
        libs: str | Path | None = None,
    ):
        self.directory = Path(directory).resolve()
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.heap = heap
        self._libs = Path(libs) if libs else None
        self.proc: subprocess.Popen | None = None
        self._log_fh = None

    # -- layout --------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def libs(self) -> Path:
        if self._libs is None:
            self._libs = fetch()
        return self._libs

    def _classpath(self) -> str:
        return str(self.libs / "*")

    def _write_config(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "2",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.retention.ms": "-1",
        }
        path = self.directory / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.directory / "log4j2.xml").write_text(_LOG4J2_XML)
        return path

    def _java(self, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("java is needed to run the Kafka broker: run scripts/setup.sh --system")
        return [
            java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.xml'}",
            "-cp", self._classpath(), *args,
        ]

    def format(self) -> None:
        """Format the storage directory unless it already is."""
        config = self._write_config()
        if (self.directory / "data" / "meta.properties").exists():
            return
        proc = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", _kafka_uuid(), "-c", str(config), "--ignore-formatted"),
            capture_output=True, text=True, timeout=180,
        )
        if proc.returncode != 0:
            raise BrokerError(f"formatting Kafka storage failed:\n{(proc.stdout + proc.stderr)[-2000:]}")

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0, foreground: bool = False) -> "KafkaBroker":
        """Start the broker and wait until it serves clients (``BrokerError`` after ``timeout``)."""
        if self.running:
            return self
        self.format()
        config = self.directory / "server.properties"
        cmd = self._java("kafka.Kafka", str(config))
        if foreground:
            os.execv(cmd[0], cmd)
        self._log_fh = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=self._log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        self._write_state()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until the broker answers a metadata request with itself in the cluster."""
        deadline = time.monotonic() + timeout
        last = "port closed"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BrokerError(f"the Kafka broker exited with code {self.proc.returncode}:\n{self.log_tail()}")
            if _port_open(self.port):
                try:
                    if self._serves():
                        return
                    last = "no broker in metadata yet"
                except Exception as exc:  # noqa: BLE001 - any client error means "not yet"
                    last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.3)
        raise BrokerError(f"the Kafka broker at {self.bootstrap} did not serve within {timeout:.0f}s ({last})\n{self.log_tail()}")

    def _serves(self) -> bool:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000, client_id="spade-broker-probe")
        try:
            cluster = admin.describe_cluster()
            return bool(cluster.get("brokers"))
        finally:
            admin.close()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop cleanly (SIGTERM: controlled shutdown), then SIGKILL if it lingers."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._closed()

    def kill(self) -> None:
        """SIGKILL the broker (a crash: no controlled shutdown, no flush)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._closed()

    def restart(self, *, timeout: float = 120.0) -> "KafkaBroker":
        """Start again on the same ports and data (after :meth:`kill` or :meth:`stop`)."""
        if self.running:
            self.stop()
        # the old process may leave the ports briefly unavailable
        deadline = time.monotonic() + 15
        while (_port_open(self.port) or _port_open(self.controller_port)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.start(timeout=timeout)

    def _closed(self) -> None:
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        state = self.directory / "broker.json"
        state.unlink(missing_ok=True)

    def _write_state(self) -> None:
        (self.directory / "broker.json").write_text(
            json.dumps({"pid": self.pid, "bootstrap": self.bootstrap, "controller_port": self.controller_port})
        )

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(lines[-n:])

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_detached(directory: str | Path, timeout: float = 30.0) -> bool:
    """Stop a broker started detached in ``directory`` (by its recorded pid); False if none."""
    state = Path(directory) / "broker.json"
    try:
        pid = int(json.loads(state.read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        state.unlink(missing_ok=True)
        return False
    if b"kafka.Kafka" not in cmdline:  # the pid was reused by something else
        state.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)
    state.unlink(missing_ok=True)
    return True


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use scripts/kafka_broker.py")
