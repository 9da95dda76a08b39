"""The configurations an evaluation compares ("variants") and the oracle detector's options.

Variants: the base config, plus one per ``--ablate`` item:

* ``mask`` -> ``mask=on`` and ``mask=off``; ``mask=on|off`` for one of them. "On" uses, in order:
  the configured U-Net weights (the shipped one by default), the simulator's exact road masks
  (sim sequences), the sequence's road polygon; when none exists the variant runs without a mask
  and the report says "N/A". ``mask=oracle`` takes the simulator's exact masks even where a U-Net
  exists (isolates the detector and tracker from segmentation errors; sim sequences only).
* ``egomotion`` -> ego-motion compensation toggled; ``egomotion=on|off`` explicit.
* ``detector=PATH`` -> other detector weights; ``oracle`` -> the ground-truth oracle detector.
* ``section.key=value`` -> any config field (value parsed as YAML), e.g. ``tracker.lost_track_buffer=10``.
* ``effort=N`` -> the pipeline on rung N of a live stream's effort ladder (:mod:`pipelines.effort`,
  the server's default bounds): its detector, U-Net and ego-motion rates, and only every ``stride``-th
  frame processed, scored on the frames it saw (what a server that adapts to a slow box measures).
* ``a+b`` combines items into one variant, e.g. ``detector=m.onnx+detector.classes=coco``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import yaml

from pipelines.config import ConfigError, PipelineConfig


@dataclass(frozen=True, slots=True)
class OracleOptions:
    jitter_px: float = 0.0
    drop_rate: float = 0.0
    seed: int = 0
    min_visibility: float = 0.3


@dataclass(frozen=True, slots=True)
class Variant:
    """One pipeline configuration to evaluate."""

    name: str
    overrides: tuple[tuple[str, str, Any], ...] = ()  # (section, key, value)
    mask: str = "config"  # config | on | off | oracle
    oracle: bool = False
    effort: int = 0  # a rung of the live effort ladder (pipelines.effort); 0: full effort

    def apply(self, config: PipelineConfig) -> PipelineConfig:
        sections: dict[str, dict[str, Any]] = {}
        for section, key, value in self.overrides:
            sections.setdefault(section, {})[key] = value
        if self.mask == "off":
            sections.setdefault("road", {})["enabled"] = False
        elif self.mask in ("on", "oracle"):
            sections.setdefault("road", {})["enabled"] = True
        return config.with_overrides(**sections) if sections else config


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_ablations(text: str | None, base: Variant) -> list[Variant]:
    """``--ablate`` text -> variants (the base first). See the module docstring for the syntax."""
    variants = [base]
    if not text:
        return variants
    fields = set(PipelineConfig.model_fields)
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        if item == "mask":
            expanded = ["mask=on", "mask=off"]
        elif item == "egomotion":
            expanded = ["egomotion=off"]
        else:
            expanded = [item]
        for one in expanded:
            v = dataclasses.replace(base, name=one)
            overrides = list(base.overrides)
            for part in (p.strip() for p in one.split("+")):
                key, sep, value = part.partition("=")
                key = key.strip()
                if part == "oracle":
                    v = dataclasses.replace(v, oracle=True)
                elif key == "mask" and value in ("on", "off", "oracle"):
                    v = dataclasses.replace(v, mask=value)
                elif key == "effort" and value.isdigit():
                    v = dataclasses.replace(v, effort=int(value))
                elif key == "egomotion" and value in ("on", "off"):
                    overrides.append(("egomotion", "enabled", value == "on"))
                elif key == "detector" and sep:
                    overrides.append(("detector", "weights", value))
                    v = dataclasses.replace(v, oracle=False)
                elif "." in key and sep and key.split(".", 1)[0] in fields:
                    section, field_name = key.split(".", 1)
                    section_model = PipelineConfig.model_fields[section].annotation
                    if field_name not in getattr(section_model, "model_fields", {}):
                        raise ConfigError(f"--ablate {part!r}: {section} has no field {field_name!r}")
                    overrides.append((section, field_name, _parse_value(value)))
                else:
                    raise ConfigError(
                        f"--ablate: cannot read {part!r}; use mask, mask=on|off, egomotion, egomotion=on|off, "
                        "oracle, detector=PATH, effort=N or section.key=value (join with '+')"
                    )
            variants.append(dataclasses.replace(v, overrides=tuple(overrides)))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ConfigError(f"--ablate lists a configuration twice: {names}")
    return variants
