"""compose.yaml: structure, replicas, health checks, volumes, shared config, GPU reservation,
loopback-only ports, and every service command parsed by the real CLI.

No Docker engine (nor the compose plugin) exists here, so the file is checked with PyYAML and the
Typer app itself; ``docker compose config`` runs in CI where the plugin is installed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.config import EngineConfig
from spade_engine.engine.worker import ROLES

ROOT = Path(__file__).resolve().parent.parent
ROLE_SERVICES = ("designer", "validator", "rollout", "regret", "consumers", "trainer")
SPADE_SERVICES = (*ROLE_SERVICES, "dashboard")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_services_and_infrastructure(compose: dict) -> None:
    services = compose["services"]
    assert set(services) == {"kafka", "postgres", *SPADE_SERVICES}
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft: no ZooKeeper
    assert "CONTROLLER" in env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{env['KAFKA_NODE_ID']}@")
    assert "zookeeper" not in yaml.safe_dump(compose).lower()
    assert services["postgres"]["image"].startswith("postgres:")
    for name in ("kafka", "postgres"):
        assert services[name]["healthcheck"]["test"], name
        assert any(str(v).split(":")[0] in compose["volumes"] for v in services[name]["volumes"]), name


def test_spade_services_share_config_data_and_wait_for_health(compose: dict) -> None:
    services = compose["services"]
    for name in SPADE_SERVICES:
        svc = services[name]
        assert svc["image"] == "spade-engine:latest" and svc["build"] == ".", name
        assert "./spade.toml:/config/spade.toml:ro" in svc["volumes"], name
        assert "spade-data:/data" in svc["volumes"], name
        assert svc["environment"]["SPADE_KAFKA_BOOTSTRAP"] == "kafka:9092", name
        assert svc["depends_on"]["kafka"]["condition"] == "service_healthy", name
        assert svc["healthcheck"]["test"], name
        assert svc["deploy"]["replicas"] >= 1 if "deploy" in svc else name == "dashboard"
    for name in ROLE_SERVICES:
        cmd = services[name]["command"]
        assert cmd[:2] == ["worker", name] and name in ROLES
        assert cmd[cmd.index("--backend") + 1] == "kafka"
        assert cmd[cmd.index("--config") + 1] == "/config/spade.toml"
    assert services["validator"]["deploy"]["replicas"] >= 2
    assert services["rollout"]["deploy"]["replicas"] >= 2
    assert services["designer"]["deploy"]["replicas"] == 1
    # the shared config is a valid engine config for the Kafka backend
    cfg = EngineConfig.model_validate(tomllib.loads((ROOT / "spade.toml").read_text()))
    assert cfg.log.backend == "kafka"
    assert cfg.log.partitions >= services["validator"]["deploy"]["replicas"]


def test_trainer_reserves_a_gpu(compose: dict) -> None:
    devices = compose["services"]["trainer"]["deploy"]["resources"]["reservations"]["devices"]
    assert any("gpu" in d["capabilities"] and d["driver"] == "nvidia" for d in devices)
    for name in ("validator", "rollout", "designer", "regret"):
        assert "resources" not in compose["services"][name].get("deploy", {}), name


def test_ports_bind_loopback_only(compose: dict) -> None:
    published = []
    for name, svc in compose["services"].items():
        for port in svc.get("ports", []):
            published.append(port)
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), f"{name} publishes {port!r} beyond loopback"
    assert {p.split(":")[1] for p in published} == {"29092", "5432", "8765"}


def _cli_commands() -> dict:
    return typer.main.get_command(app).commands  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ROLE_SERVICES)
def test_worker_commands_parse_with_the_cli(compose: dict, name: str) -> None:
    cmd = compose["services"][name]["command"]
    result = CliRunner().invoke(app, [*cmd, "--help"])
    assert result.exit_code == 0, result.output
    # every option the service passes is one the command declares (--help alone stops early)
    params = {opt for p in _cli_commands()["worker"].params for opt in getattr(p, "opts", [])}
    for arg in cmd[2:]:
        if arg.startswith("--"):
            assert arg in params, f"{name}: unknown option {arg}"
    bad = CliRunner().invoke(app, ["worker", "no-such-role", "--backend", "kafka"])
    assert bad.exit_code == 2 and "unknown role" in bad.output


def test_dashboard_command_parses_with_the_cli(compose: dict) -> None:
    commands = _cli_commands()
    if "dashboard" not in commands:
        pytest.skip("the dashboard command is not on this branch yet (it arrives with the dashboard branch)")
    cmd = compose["services"]["dashboard"]["command"]
    params = {opt for p in commands["dashboard"].params for opt in getattr(p, "opts", [])}
    for arg in cmd[1:]:
        if arg.startswith("--"):
            assert arg in params, f"dashboard: unknown option {arg}"
    result = CliRunner().invoke(app, [*cmd, "--help"])
    assert result.exit_code == 0, result.output
