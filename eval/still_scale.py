"""Issue 40 on real stills: what the scale check says of frames with an altitude and no camera tilt.

AU-AIR (``../shared/data/auair_subset``: 80 frames of eight Parrot Bebop 2 videos over Aarhus, each
frame with the drone's altitude, 4.8-30 m) is real footage whose scale the telemetry gives, which
issue 40 asks the check to judge. A still has no tracks, and AU-AIR does not record the camera's
tilt, so per video (the frames of one recording, :func:`training.datasets.auair_flight`):

1. the cars' boxes (the shipped detector's, or AU-AIR's labels with ``--boxes labels``: loose, about
   twice the vehicles), each car's heading its box's longer side (a still shows no motion; boxes
   within ``SQUARE`` of square, a car seen diagonally, are left out);
2. the camera's tilt from the cars themselves, as the engine finds it where no pitch is given
   (:mod:`pipelines.pitch_fit`): the candidate tilt at which the cars' log size ratio against the
   prior car's (:func:`pipelines.scale_check.observe`, each frame through its own altitude) has no
   trend down the image, its sigma floored at ``PITCH_FLOOR_DEG``; nadir where no tilt crosses and
   the trend at nadir is within its uncertainty;
3. at that tilt the check's rule on the cars (:func:`pipelines.scale_judge.judge`, one still a
   vehicle): ``ok`` where the cars' scale ratio is within the tolerance z standard errors included,
   ``suspect`` beyond it, else ``unverified`` with the reason; the ratio again at the tilt +- its
   sigma, whose spread joins the ratio's sigma (a verdict must hold over the tilt the cars leave
   open: ``ok`` or ``suspect`` that does not becomes ``unverified``, saying so).

The ratio is the cars' size in the image over a prior car's at the telemetry's altitude: above 1 the
camera is lower than the altitude says (every speed that much too high).

    python -m eval.still_scale [--auair ../shared/data/auair_subset] [--boxes detector|labels] [--json F]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import DetectorConfig, ScaleCheckConfig
from pipelines.displacement import box_anchors
from pipelines.geometry import GroundProjector
from pipelines.pitch_fit import PITCH_FLOOR_DEG, find_crossing, row_trend
from pipelines.scale_check import CAR_PRIORS, VehiclePrior, observe
from pipelines.scale_judge import judge
from pipelines.scale_session import track_value
from pipelines.types import OK, SUSPECT, UNVERIFIED, Frame, Intrinsics

log = logging.getLogger(__name__)

SQUARE = 1.2  # a box whose sides are within this ratio has no heading a still can tell
CAMERA = "parrot_bebop_2"
MIN_CARS = 10


@dataclass(frozen=True, slots=True)
class Still:
    """One frame: its video, the telemetry's altitude (m) and its cars' boxes (N, 4, full pixels)."""

    video: str
    altitude_m: float
    boxes: np.ndarray


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the check says of one video: its tilt (deg) and sigma as the cars give it (NaN: not
    found), the check at that tilt (status, ratio, sigma, reason, cars) and the ratio at tilt -+ its
    sigma."""

    video: str
    frames: int
    altitudes_m: tuple[float, float]
    cars: int
    tilt_deg: float
    tilt_sigma_deg: float
    status: str
    ratio: float
    sigma: float
    reason: str
    ratio_at_tilt_range: tuple[float, float]


def headings_in_image(boxes: np.ndarray) -> np.ndarray:
    """(N, 2) unit image directions along each box's longer side; NaN where it is nearly square."""
    b = np.asarray(boxes, dtype=float).reshape(-1, 4)
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    out = np.where((w >= h)[:, None], [1.0, 0.0], [0.0, 1.0])
    square = np.maximum(w, h) < SQUARE * np.minimum(w, h)
    out[square] = np.nan
    return out


def _ground_headings(proj: GroundProjector, boxes: np.ndarray, directions: np.ndarray) -> np.ndarray:
    px = box_anchors(boxes)
    ahead, here = proj.to_ground(px + 5.0 * directions, ideal=True), proj.to_ground(px, ideal=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ahead - here) / np.linalg.norm(ahead - here, axis=1, keepdims=True)


def observations(
    stills: Sequence[Still], intrinsics: Intrinsics, tilt_deg: float, prior: VehiclePrior, margin_px: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each car's :func:`~pipelines.scale_session.track_value` row (n, 6) through ``tilt_deg`` and
    its frame's altitude, and its row in the image (share of the height from the middle)."""
    rows, where = [], []
    for s in stills:
        proj = GroundProjector.create(intrinsics, s.altitude_m, tilt_deg)
        d = headings_in_image(s.boxes)
        keep = np.isfinite(d).all(axis=1)
        if not keep.any():
            continue
        boxes = s.boxes[keep]
        headings = _ground_headings(proj, boxes, d[keep])
        fine = np.isfinite(headings).all(axis=1)
        o = observe(proj, boxes[fine], headings[fine], prior, margin_px=margin_px)
        centre = (boxes[fine, 1] + boxes[fine, 3]) / 2 / intrinsics.height - 0.5
        for i in range(len(o.log_ratio)):
            if not np.isfinite(o.log_ratio[i]):
                continue
            loose = np.array([[o.loose_px[i], o.loose_var[i], o.loose_var_prior[i]]])
            rows.append(
                track_value([o.log_ratio[i]], [o.var[i]], [o.var_prior[i]], [o.per_margin_px[i]], loose)
            )
            where.append(float(centre[i]))
    return np.array(rows, dtype=float).reshape(-1, 6), np.array(where)


def _trend(stills, intrinsics, tilt, prior, margin_px) -> tuple[float, float, int]:
    values, where = observations(stills, intrinsics, tilt, prior, margin_px)
    return row_trend(values[:, 0], values[:, 1], where) if len(values) else (math.nan, math.nan, 0)


def fit_tilt(
    stills: Sequence[Still], intrinsics: Intrinsics, prior: VehiclePrior, margin_px: float, z: float = 2.5
) -> tuple[float, float]:
    """(tilt, sigma) in degrees at which the cars' size ratio has no trend down the image
    (:func:`pipelines.pitch_fit.find_crossing`, the engine's search, each still through its own
    altitude), the sigma at least ``PITCH_FLOOR_DEG``; (NaN, NaN) where fewer than ``MIN_CARS`` cars
    measure or no tilt fits."""
    fit = find_crossing(lambda p: _trend(stills, intrinsics, p, prior, margin_px), min_vehicles=MIN_CARS, z=z)
    if fit is None:
        return math.nan, math.nan
    return fit.pitch_deg, max(PITCH_FLOOR_DEG, fit.sigma_deg)


def check_video(
    stills: Sequence[Still], intrinsics: Intrinsics, cfg: ScaleCheckConfig | None = None
) -> Verdict:
    """The check of one video's stills (see the module)."""
    cfg = cfg or ScaleCheckConfig()
    prior = CAR_PRIORS[cfg.region]
    margin = cfg.box_margin_px
    alts = [s.altitude_m for s in stills]
    head = {"video": stills[0].video, "frames": len(stills), "altitudes_m": (min(alts), max(alts))}
    tilt, sigma = fit_tilt(stills, intrinsics, prior, margin, cfg.z)
    cars = sum(int(np.isfinite(headings_in_image(s.boxes)).all(axis=1).sum()) for s in stills)
    if not math.isfinite(tilt):
        reason = f"the cars give no tilt ({cars} cars with a heading)"
        return Verdict(**head, cars=cars, tilt_deg=math.nan, tilt_sigma_deg=math.nan, status=UNVERIFIED,
                       ratio=math.nan, sigma=math.nan, reason=reason, ratio_at_tilt_range=(math.nan, math.nan))  # fmt: skip
    values, _ = observations(stills, intrinsics, tilt, prior, margin)
    result = judge(values, cfg, lambda n: f"{n} cars: too few to judge")
    ends = []
    for t in (max(-90.0, tilt - sigma), min(-20.0, tilt + sigma)):
        v, _ = observations(stills, intrinsics, t, prior, margin)
        r = judge(v, cfg, lambda n: "")
        ends.append(r.ratio if r.ratio is not None else math.nan)
    status, reason, ratio = result.status, result.reason, result.ratio
    total = math.nan
    if ratio is not None and result.sigma is not None:
        # the tilt is the cars' own fit: its sigma moves the ratio too, and a verdict must hold over it
        tilt_se = abs(math.log(ends[1] / ends[0])) / 2 if all(e > 0 for e in ends) else math.inf
        se = math.hypot(result.sigma / ratio, tilt_se)
        total, mu = ratio * se, math.log(ratio)
        held = (status == OK and abs(mu) + cfg.z * se > math.log1p(cfg.tolerance)) or (
            status == SUSPECT and abs(mu) <= math.log1p(cfg.suspect_share) + cfg.z * se
        )
        if held:
            status = UNVERIFIED
            reason = (f"the cars read {ratio:.2f}, but their tilt (fitted {tilt:+.1f} +- {sigma:.1f} deg) leaves "
                      f"+-{100 * tilt_se:.0f} %: not determined to {cfg.tolerance:.0%}")  # fmt: skip
    return Verdict(
        **head,
        cars=len(values),
        tilt_deg=round(tilt, 2),
        tilt_sigma_deg=round(sigma, 2),
        status=status,
        ratio=math.nan if ratio is None else round(ratio, 4),
        sigma=round(total, 4),
        reason=reason,
        ratio_at_tilt_range=(round(ends[0], 4), round(ends[1], 4)),
    )


def auair_stills(root: Path, boxes: str = "detector", imgsz: int = 960) -> list[Still]:
    """AU-AIR's frames as stills: the altitude (its millimetres) and the cars, detected by the
    shipped detector (``boxes="detector"``) or AU-AIR's own labels (``"labels"``)."""
    from training.datasets import read_auair
    from training.samples import CLASSES

    try:
        entries = {
            e["image_name"]: e for e in json.loads((root / "annotations.json").read_text())["annotations"]
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{root / 'annotations.json'} is not AU-AIR's annotations: {exc!r}") from None
    detector = None
    if boxes == "detector":
        from pipelines.builder import build_detector_model

        detector = build_detector_model(DetectorConfig(imgsz=imgsz))
    car = CLASSES.index("car")
    out = []
    for n, sample in enumerate(read_auair(root)):
        altitude = entries.get(sample.image.name, {}).get("altitude")
        if not isinstance(altitude, (int, float)) or not 0 < altitude / 1000.0 <= 1000:
            raise ValueError(f"{sample.image.name}: no altitude in millimetres ({altitude!r})")
        if detector is None:
            lab = np.asarray(sample.boxes, dtype=float).reshape(-1, 5)
            xyxy = lab[lab[:, 0] == car, 1:5]
        else:
            dets = detector.detect(Frame(n, n / 30.0, sample.load()))
            names = dets.data.get("class_name")
            xyxy = dets.xyxy if names is None else dets.xyxy[np.asarray(names) == "car"]
        out.append(Still(sample.group, float(altitude) / 1000.0, xyxy.reshape(-1, 4)))
    return out


def check_stills(stills: Sequence[Still], intrinsics: Intrinsics) -> list[Verdict]:
    """:func:`check_video` of each video among ``stills``, in order of first appearance."""
    videos = list(dict.fromkeys(s.video for s in stills))
    return [check_video([s for s in stills if s.video == v], intrinsics) for v in videos]


def format_verdicts(verdicts: Sequence[Verdict]) -> str:
    lines = ["video                 frames  altitude m   cars  tilt deg       check       ratio           "
             "at tilt -+ sigma   reason"]  # fmt: skip
    for v in verdicts:
        tilt = "none" if not math.isfinite(v.tilt_deg) else f"{v.tilt_deg:+.1f} +- {v.tilt_sigma_deg:.1f}"
        ratio = "-" if not math.isfinite(v.ratio) else f"{v.ratio:.3f} +- {v.sigma:.3f}"
        ends = "-" if not all(map(math.isfinite, v.ratio_at_tilt_range)) else (
            f"{v.ratio_at_tilt_range[0]:.3f} .. {v.ratio_at_tilt_range[1]:.3f}")  # fmt: skip
        lines.append(
            f"{v.video:<21} {v.frames:>6}  {v.altitudes_m[0]:4.1f}-{v.altitudes_m[1]:4.1f}  {v.cars:>5}  "
            f"{tilt:<13}  {v.status:<10}  {ratio:<15} {ends:<18} {v.reason}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    shared = Path(
        os.environ.get("AIRPATROL_SHARED_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    )
    p = argparse.ArgumentParser(prog="python -m eval.still_scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--auair", type=Path, default=shared / "auair_subset", help="AU-AIR folder")
    p.add_argument("--boxes", choices=("detector", "labels"), default="detector")
    p.add_argument("--imgsz", type=int, default=960, help="the detector's input size")
    p.add_argument("--json", type=Path, help="also write the verdicts here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not (args.auair / "annotations.json").is_file():
        raise SystemExit(f"still_scale: no AU-AIR at {args.auair} (annotations.json + images/)")
    profile = get_profile(CAMERA)
    intrinsics = intrinsics_for(profile, 1920, 1080)  # AU-AIR frames: the video's size
    try:
        stills = auair_stills(args.auair, args.boxes, args.imgsz)
    except ValueError as exc:
        raise SystemExit(f"still_scale: {exc}") from None
    verdicts = check_stills(stills, intrinsics)
    print(format_verdicts(verdicts))  # noqa: T201 - a bench prints its table
    if args.json:
        args.json.write_text(json.dumps([asdict(v) for v in verdicts], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
