"""The simulator's driver: :func:`simulate_flight` renders a scene into a flight folder (see the
package docstring for its files); :func:`iter_frames` renders one in memory."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from eval.simulate.scene import Scene
from eval.simulate.spec import FlightSpec
from eval.simulate.sprites import Sprite, load_sprite_crops
from eval.simulate.writers import (
    TruthLog,
    VideoWriter,
    write_camera,
    write_seqinfo,
    write_spec,
    write_vehicles,
    write_violations,
)
from pipelines.telemetry import write_srt
from pipelines.types import Intrinsics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SimulatedFlight:
    """Paths and metadata of one generated flight."""

    out_dir: Path
    video: Path
    srt: Path
    gt: Path
    speeds: Path
    violations: Path
    vehicles: Path
    road_mask_dir: Path | None
    seqinfo: Path
    spec_path: Path
    spec: FlightSpec
    n_frames: int
    fps: float
    width: int
    height: int
    intrinsics: Intrinsics
    texture_res_m: float
    n_vehicles: int
    n_violations: int
    elapsed_s: float = 0.0
    camera: Path | None = None  # gt/camera.csv: exact world -> image homography per frame


def simulate_flight(
    spec: FlightSpec, out_dir: str | Path, *, sprites: Sequence[Sprite] | None = None, progress: bool = False
) -> SimulatedFlight:
    """Generate a flight: video, telemetry, exact ground truth and road masks in ``out_dir``."""
    t_start = time.perf_counter()
    out = Path(out_dir)
    (out / "gt").mkdir(parents=True, exist_ok=True)
    if sprites is None and spec.sprites_dir:
        sprites = load_sprite_crops(spec.sprites_dir)
    scene = Scene(spec, sprites)
    log.info(
        "scene: %s, %d vehicles, ground %.0fx%.0f m at %.3f m/px, %d frames",
        spec.layout,
        len(scene.vehicles),
        scene.bounds[2] - scene.bounds[0],
        scene.bounds[3] - scene.bounds[1],
        scene.res,
        spec.n_frames,
    )
    mask_dir = out / "road_mask" if spec.mask_every > 0 else None
    if mask_dir is not None:
        mask_dir.mkdir(exist_ok=True)
    truth = _render_frames(scene, out / "video.mp4", mask_dir, progress)

    gt_dir = out / "gt"
    truth.write(gt_dir / "gt.txt", gt_dir / "speeds.csv")
    violations = scene.gt_violations(truth.visible)
    write_violations(gt_dir / "violations.json", spec, violations)
    write_vehicles(gt_dir / "vehicles.json", scene.vehicles)
    write_camera(gt_dir / "camera.csv", scene.camera)
    write_srt(scene.telemetry(), out / "video.SRT", start_time=spec.start_datetime)
    write_spec(out / "flight.yaml", spec)
    write_seqinfo(out / "seqinfo.ini", spec, scene.camera)
    elapsed = time.perf_counter() - t_start
    log.info(
        "wrote %s (%d frames, %d vehicles, %d gt violations) in %.1f s",
        out,
        spec.n_frames,
        len(scene.vehicles),
        len(violations),
        elapsed,
    )
    return SimulatedFlight(
        out_dir=out,
        video=out / "video.mp4",
        srt=out / "video.SRT",
        gt=gt_dir / "gt.txt",
        speeds=gt_dir / "speeds.csv",
        violations=gt_dir / "violations.json",
        vehicles=gt_dir / "vehicles.json",
        road_mask_dir=mask_dir,
        seqinfo=out / "seqinfo.ini",
        spec_path=out / "flight.yaml",
        spec=spec,
        n_frames=spec.n_frames,
        fps=spec.fps,
        width=spec.width,
        height=spec.height,
        intrinsics=scene.camera.intrinsics,
        texture_res_m=scene.res,
        n_vehicles=len(scene.vehicles),
        n_violations=len(violations),
        elapsed_s=elapsed,
        camera=gt_dir / "camera.csv",
    )


def _render_frames(scene: Scene, video_path: Path, mask_dir: Path | None, progress: bool) -> TruthLog:
    """Encode every frame into ``video_path``, write the road masks; the ground truth of all frames."""
    spec = scene.spec
    truth = TruthLog(spec, scene.vehicles)
    writer = VideoWriter(video_path, spec)
    try:
        for k in tqdm(range(spec.n_frames), desc="simulate", unit="frame", disable=not progress):
            image, rows = scene.render(k)
            writer.write(k, image)
            truth.add(k, scene.times[k], rows)
            if mask_dir is not None and k % spec.mask_every == 0:
                cv2.imwrite(str(mask_dir / f"{k:06d}.png"), scene.road_mask(k))
    finally:
        writer.close()
    return truth


def iter_frames(
    spec: FlightSpec, sprites: Sequence[Sprite] | None = None
) -> Iterator[tuple[np.ndarray, list[dict]]]:
    """Render a flight in memory (no files): yields (BGR image, ground-truth rows) per frame."""
    scene = Scene(spec, sprites)
    for k in range(spec.n_frames):
        yield scene.render(k)
