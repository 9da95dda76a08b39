"""The files of a simulated flight: H.264 video, ground-truth tables, MOT ``seqinfo.ini`` and the
spec (the SRT telemetry is written by :func:`pipelines.telemetry.write_srt`)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from eval.simulate.camera import CameraPath
from eval.simulate.spec import SIM_CLASS_IDS, FlightSpec
from eval.simulate.traffic import Vehicle


class VideoWriter:
    """H.264 video at the spec's constant frame rate; frame ``k`` gets pts ``k``."""

    def __init__(self, path: Path, spec: FlightSpec):
        import av  # heavy; only the writer needs it

        self._av = av
        self.container = av.open(str(path), mode="w")
        rate = spec.fps_fraction
        self.stream = self.container.add_stream("libx264", rate=rate)
        self.stream.width, self.stream.height = spec.width, spec.height
        self.stream.pix_fmt = "yuv420p"
        self.time_base = Fraction(rate.denominator, rate.numerator)
        self.stream.options = {"crf": str(spec.crf), "preset": spec.preset, "g": str(int(round(spec.fps)))}

    def write(self, k: int, image: np.ndarray) -> None:
        frame = self._av.VideoFrame.from_ndarray(image, format="bgr24")
        frame.pts = k
        frame.time_base = self.time_base
        for packet in self.stream.encode(frame):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()


class TruthLog:
    """Collects the ground-truth rows of every frame: MOT lines, true speeds and, per vehicle, the
    frames in which it is visible enough (``min_visibility``) to count towards a violation."""

    def __init__(self, spec: FlightSpec, vehicles: Sequence[Vehicle]):
        self.min_visibility = spec.min_visibility
        self.gt_lines: list[str] = []
        self.speed_rows: list[tuple] = []
        self.visible = {v.id: np.zeros(spec.n_frames, bool) for v in vehicles}

    def add(self, k: int, t: float, rows: Sequence[dict[str, Any]]) -> None:
        for row in rows:
            x, y, w, h = row["xywh"]
            self.gt_lines.append(
                f"{k + 1},{row['id']},{x:.2f},{y:.2f},{w:.2f},{h:.2f},1,{SIM_CLASS_IDS[row['class_name']]},"
                f"{row['visibility']:.3f}"
            )
            self.speed_rows.append(
                (
                    k + 1,
                    f"{t:.6f}",
                    row["id"],
                    f"{row['speed_kmh']:.4f}",
                    f"{row['ground_xy'][0]:.4f}",
                    f"{row['ground_xy'][1]:.4f}",
                )
            )
            self.visible[row["id"]][k] = row["visibility"] >= self.min_visibility

    def write(self, gt_path: Path, speeds_path: Path) -> None:
        gt_path.write_text("\n".join(self.gt_lines) + "\n")
        with speeds_path.open("w", newline="") as fh:
            wr = csv.writer(fh)
            wr.writerow(["frame", "time_s", "id", "speed_kmh", "ground_x_m", "ground_y_m"])
            wr.writerows(self.speed_rows)


def write_violations(path: Path, spec: FlightSpec, violations: list[dict[str, Any]]) -> None:
    data = {
        "speed_limit_kmh": spec.speed_limit_kmh,
        "min_duration_s": spec.min_violation_s,
        "tolerance_kmh": 0.0,
        "frame_base": 1,
        "violations": violations,
    }
    path.write_text(json.dumps(data, indent=2))


def write_vehicles(path: Path, vehicles: Sequence[Vehicle]) -> None:
    path.write_text(json.dumps([v.to_dict() for v in vehicles], indent=2))


def write_spec(path: Path, spec: FlightSpec) -> None:
    path.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))


CAMERA_COLUMNS = ("frame", "time_s", *(f"h{i}{j}" for i in range(1, 4) for j in range(1, 4)))


def write_camera(path: Path, camera: CameraPath) -> None:
    """``gt/camera.csv``: the exact world -> image homography of every frame.

    One row per frame: ``frame`` (1-based, as in the MOT files), ``time_s`` and ``h11 .. h33``, the
    3x3 matrix row by row (scaled so that ``h33 = 1``), mapping ground metres (X east, Y north) to
    full-resolution pixels of that frame. The camera motion from frame ``k - 1`` to ``k`` in pixels is
    ``H(k) @ inv(H(k - 1))`` (:func:`eval.egomotion.true_interframe`).

    It is the ideal pinhole camera's, before the lens (``FlightSpec.lens_distortion``: a point's
    pixel in the video is :func:`pipelines.lens.distort_points` of it), at the frame's timestamp,
    which is its middle row's time (``FlightSpec.readout_ms``: row ``v`` is read
    :func:`pipelines.lens.row_time_offsets` later).
    """
    with path.open("w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(CAMERA_COLUMNS)
        for k, t in enumerate(camera.times):
            h = camera.world_to_image(k)
            h = h / h[2, 2]
            wr.writerow([k + 1, f"{t:.6f}", *(repr(float(v)) for v in h.reshape(-1))])


def write_seqinfo(path: Path, spec: FlightSpec, camera: CameraPath) -> None:
    """MOTChallenge sequence info, plus the camera, altitude and pitch of the flight."""
    path.write_text(
        "[Sequence]\n"
        f"name={path.parent.name}\nimDir=img1\nvideo=video.mp4\nframeRate={spec.fps:g}\n"
        f"seqLength={spec.n_frames}\nimWidth={spec.width}\nimHeight={spec.height}\nimExt=.jpg\n"
        f"camera={camera.profile.name}\naltitude_m={spec.altitude_m:g}\npitch_deg={spec.pitch_deg:g}\n"
        f"focal_length_mm={camera.focal_mm:g}\nfx={camera.intrinsics.fx:.4f}\nlayout=sim\n"
    )
