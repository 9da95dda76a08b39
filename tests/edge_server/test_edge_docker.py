"""docker/compose.yaml works as shipped: every file it bind-mounts exists and the site config loads.

Docker is not run here; the compose file is read as Compose would read it with an empty
docker/.env (``${VAR:-default}`` -> default).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pipelines.config import PipelineConfig

DOCKER = Path(__file__).resolve().parents[2] / "docker"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())


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


@pytest.mark.parametrize("name", sorted(COMPOSE["services"]))
def test_compose_bind_mounts_exist_by_default(name: str) -> None:
    for source, target, entry in _binds(COMPOSE["services"][name]):
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
