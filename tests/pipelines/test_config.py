"""Site configuration: YAML in, clear errors out, CLI overrides on top."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.config import ConfigError, PipelineConfig

REPO = Path(__file__).resolve().parents[2]


def test_example_site_config_loads():
    cfg = PipelineConfig.from_yaml(REPO / "configs" / "site.example.yaml")
    assert cfg.rules.zones[0].speed_limit_kmh == 30
    assert cfg.camera.name == "dji_mavic_3"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("rules: {speed_limit_kmh: -5}", "speed_limit_kmh"),
        ("camera: {altitude_m: 20000}", "altitude_m"),
        ("camera: {pitch_deg: 45}", "pitch_deg"),
        ("detectr: {imgsz: 640}", "detectr"),  # typo in a section name is not silently ignored
        ("road: {polygon_mode: sideways}", "polygon_mode"),
        ("- just\n- a list", "mapping"),
        ("rules: {speed_limit_kmh: [", "not valid YAML"),
    ],
)
def test_bad_site_config_is_a_clear_error(tmp_path, text, match):
    path = tmp_path / "site.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        PipelineConfig.from_yaml(path)


def test_missing_config_file():
    with pytest.raises(ConfigError, match="not found"):
        PipelineConfig.from_yaml("/nonexistent/site.yaml")


def test_overrides_ignore_unset_flags():
    cfg = PipelineConfig().with_overrides(
        camera={"altitude_m": 80.0, "name": None}, rules={"speed_limit_kmh": None}
    )
    assert cfg.camera.altitude_m == 80.0
    assert cfg.camera.name is None
    assert cfg.rules.speed_limit_kmh == PipelineConfig().rules.speed_limit_kmh


def test_empty_sections_mean_defaults(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text("detector:\nroad:\n")
    assert PipelineConfig.from_yaml(path) == PipelineConfig()
