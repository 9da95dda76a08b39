"""docker/compose.yaml works as shipped: every file it bind-mounts exists and the site config loads;
docker/Dockerfile builds the wheel from every package the wheel has and installs it, not the tree.

No Docker engine runs in CI; the compose file is read as Compose would read it with an empty
docker/.env (``${VAR:-default}`` -> default). The image itself is built and checked (doctor, demo, a
simulated DJI Pilot 2 stream) by docker/build-offline.sh, by hand: docs/install.md has its figures.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from edge_server.settings import ServerSettings
from pipelines.config import PipelineConfig

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())
FLEET = yaml.safe_load((DOCKER / "compose.fleet.yaml").read_text())


def _unset_env(value: str) -> str:
    """Compose interpolation with no variables set: ``${X:-d}`` / ``${X-d}`` -> d, others -> ''."""
    return re.sub(r"\$\{\w+(?::?-([^}]*))?(?::?\?[^}]*)?\}", lambda m: m.group(1) or "", value)


def _binds(service: dict) -> list[tuple[str, str, dict]]:
    """(host source, container target, long-syntax entry or {}) of a service's bind mounts."""
    out = []
    for vol in service.get("volumes", []):
        if isinstance(vol, str):
            source, target = _unset_env(vol).split(":")[:2]
            if source.startswith((".", "/", "~")):
                out.append((source, target, {}))
        elif vol.get("type") == "bind":
            out.append((_unset_env(vol["source"]), vol["target"], vol))
    return out


@pytest.mark.parametrize(
    ("compose", "name"), [(c, n) for c in (COMPOSE, FLEET) for n in sorted(c["services"])]
)
def test_compose_bind_mounts_exist_by_default(compose: dict, name: str) -> None:
    for source, target, entry in _binds(compose["services"][name]):
        host = (DOCKER / source).resolve()
        assert host.is_file(), f"{name}: {source} -> {target} is missing: Docker would create a directory"
        # a long-syntax bind must not create a missing source either (a typo in docker/.env)
        assert entry.get("bind", {}).get("create_host_path") is False, entry


def test_default_site_config_is_mounted_where_the_server_reads_it() -> None:
    server = COMPOSE["services"]["server"]
    wanted = server["environment"]["AIRPATROL_PIPELINE_CONFIG"]
    mounted = {target: source for source, target, _ in _binds(server)}
    assert wanted in mounted
    config = PipelineConfig.from_yaml(DOCKER / mounted[wanted])
    assert config.rules.speed_limit_kmh > 0


def _setup_call() -> dict:
    tree = ast.parse((DOCKER.parent / "setup.py").read_text())
    values = {n.targets[0].id: n.value for n in tree.body if isinstance(n, ast.Assign)}
    call = next(n.value for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call))
    return {"PACKAGES": ast.literal_eval(values["PACKAGES"]), **{k.arg: k.value for k in call.keywords}}


def test_the_wheel_stage_copies_every_package_of_the_wheel() -> None:
    setup = _setup_call()
    folders = {pattern.rstrip("*") for pattern in setup["PACKAGES"]}
    folders |= set(ast.literal_eval(setup["package_dir"]).values())  # weights/, docs/
    dockerfile = (DOCKER / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\w+) \./\1$", dockerfile, re.M))
    assert folders <= copied, f"not copied into the wheel stage: {sorted(folders - copied)}"
    assert "pip wheel" in dockerfile and "pip install --no-deps /dist/airpatrol-*.whl" in dockerfile
    assert "pip install -e" not in dockerfile and "rm -rf /dist" in dockerfile


def test_the_offline_build_script_parses() -> None:
    run = subprocess.run(["bash", "-n", str(DOCKER / "build-offline.sh")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_fleet_shares_database_and_media_not_ids_ports_or_data() -> None:
    servers = {name: svc for name, svc in FLEET["services"].items() if name != "postgres"}
    assert len(servers) == 2
    env = [svc["environment"] for svc in servers.values()]
    for key in ("AIRPATROL_DATABASE_URL", "AIRPATROL_MEDIA_DIR", "AIRPATROL_API_TOKEN"):
        assert env[0][key] == env[1][key], key
    for key in ("AIRPATROL_SERVER_ID", "AIRPATROL_PORT", "AIRPATROL_RTMP_PORT", "AIRPATROL_MQTT_PORT"):
        assert env[0][key] != env[1][key], key
    for value in (e["AIRPATROL_SERVER_ID"] for e in env):
        ServerSettings(server_id=value)  # a valid id
    data = [
        next(v for v in svc["volumes"] if isinstance(v, str) and v.endswith(":/var/lib/airpatrol/data"))
        for svc in servers.values()
    ]
    assert data[0] != data[1]  # each its own token file, id, nginx and Mosquitto files
    config = PipelineConfig.from_yaml(DOCKER / _binds(next(iter(servers.values())))[0][0])
    assert config.rules.speed_limit_kmh > 0
