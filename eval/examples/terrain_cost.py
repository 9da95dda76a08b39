"""What a terrain model costs a frame (issue 39): the lift of a frame's track steps onto the model,
measuring them along the ground (``GroundProjector.ground_step``) and the scale check's comparison of
cars standing on the model's ground (``scale_check.observe``), each against flat ground, on a
synthetic lidar model (eval/site_terrain.py) of a 60 m / -45 flight over a road rising 8 %.

A benchmark, not CI:   .venv/bin/python eval/examples/terrain_cost.py [--tracks 30]
Prints milliseconds per call (the median of repeats). Needs rasterio and pyproj (the engine's).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from eval.simulate import FlightSpec, scene_roads
from eval.site_terrain import takeoff_point, write_site_terrain
from pipelines.config import PipelineConfig
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel
from pipelines.scale_check import CAR_PRIORS, observe
from pipelines.terrain_io import load_terrain
from pipelines.types import Frame


def _ms(call: Callable[[], object], repeats: int = 7, number: int = 50) -> float:
    call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        times.append((time.perf_counter() - t0) / number * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tracks", type=int, default=30)
    args = p.parse_args(argv)
    spec = FlightSpec(
        width=1920, height=1080, altitude_m=60, pitch_deg=-45, road_heading_deg=0, yaw_deg=0,
        road_grade_pct=8, duration_s=2,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        dem = Path(tmp) / "site.tif"
        write_site_terrain(dem, spec, 0.0, "lidar", np.random.default_rng(0))
        terrain = {"dem": str(dem), "takeoff": list(takeoff_point(spec))}
        cfg = PipelineConfig().with_overrides(camera={"name": spec.camera, "terrain": terrain})
        tel = scene_roads(spec)[0].telemetry()[30]
        ground = GroundModel(cfg.camera, load_terrain(cfg.camera.terrain))
        proj = ground.projector(Frame(30, tel.timestamp_s, np.zeros((1080, 1920, 3), np.uint8), tel))
        if proj is None:
            raise SystemExit(f"no ground projection: {ground.status.reason}")
        flat = GroundProjector(proj.intrinsics, proj.altitude_m, proj.pitch_deg, proj.image_to_ground)
        rng = np.random.default_rng(1)
        then = np.column_stack([rng.uniform(200, 1700, args.tracks), rng.uniform(200, 1000, args.tracks)])
        now = then + [0.0, -6.0]
        boxes = np.column_stack([then, then + [40.0, 30.0]])
        headings = np.tile([0.0, 1.0], (args.tracks, 1))
        rows = [
            ("steps, flat ground", lambda: flat.ground_step(now, then)),
            ("steps lifted onto the model", lambda: proj.to_ground(now) - proj.to_ground(then)),
            ("steps along the model's ground", lambda: proj.ground_step(now, then)),
            ("scale check, flat ground", lambda: observe(flat, boxes, headings, CAR_PRIORS["eu"])),
            ("scale check over the model", lambda: observe(proj, boxes, headings, CAR_PRIORS["eu"])),
        ]
        for name, call in rows:
            print(f"{name:34s} {_ms(call):7.3f} ms ({args.tracks} tracks)")  # noqa: T201 - the result
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
