"""The lens and the shutter: where a point really is in the ideal (pinhole) image, and when its row
was read.

**Lens.** OpenCV's radial + tangential model (Brown-Conrady: ``k1, k2, p1, p2, k3``) in the video
frame's normalised coordinates ``x = (u - cx) / fx``, with the intrinsics the frame is measured with
(:func:`pipelines.camera.intrinsics_for`). The engine undistorts the points it measures (box anchors,
flow-carried positions: :class:`pipelines.geometry.GroundProjector`), never whole images. A DJI still
carries its lens's calibration in its XMP (``drone-dji:DewarpData``, "date;fx,fy,cx,cy,k1,k2,p1,p2,k3"
for the full-sensor still): the coefficients are dimensionless, so they hold for a video that is a
scaled crop of the full sensor width (:func:`lens_from_dewarp_data`); a video the camera already
corrects (DJI's "distortion correction" / dewarp setting) has none to undistort.

**Shutter.** A CMOS sensor reads its rows one after another over the readout time: row ``v`` of a
frame is seen at ``timestamp + (v / height - 1/2) * readout`` (the frame's timestamp is taken as its
middle row's: any constant offset is the same for every frame and moves no speed). A vehicle moving
down the image is seen a little later in each frame than in the one before, so it covers more road
between two frames' timestamps than their interval holds: it reads fast, one moving up reads slow, by
``readout x (the share of the frame's height it crosses per second)``: 1.4 % for a car crossing
the frame in 2 s with a 30 ms readout. The speed fit takes each position at its row's time
(:func:`row_time_offsets`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from pipelines.types import Intrinsics

# undistortion: OpenCV's iterative solve, to a residual far below a pixel's thousandth
_CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 40, 1e-10)
MAX_ABS_COEFF = 5.0  # beyond this a coefficient is not a camera lens (a typo, a wrong unit)


class LensError(ValueError):
    """A lens description that cannot be used; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class LensModel:
    """Radial (k1, k2, k3) and tangential (p1, p2) distortion, OpenCV's order and meaning, in the
    frame's normalised coordinates; ``source`` says where the figures come from."""

    k1: float = 0.0
    k2: float = 0.0
    p1: float = 0.0
    p2: float = 0.0
    k3: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("k1", "k2", "p1", "p2", "k3"):
            value = getattr(self, name)
            if not (math.isfinite(value) and abs(value) <= MAX_ABS_COEFF):
                raise LensError(
                    f"lens coefficient {name}={value} is not a camera's (|{name}| <= {MAX_ABS_COEFF})"
                )

    @property
    def coeffs(self) -> np.ndarray:
        return np.array([self.k1, self.k2, self.p1, self.p2, self.k3], dtype=np.float64)

    @property
    def identity(self) -> bool:
        return not any((self.k1, self.k2, self.p1, self.p2, self.k3))

    def describe(self) -> str:
        parts = ", ".join(
            f"{n}={getattr(self, n):+.4g}" for n in ("k1", "k2", "p1", "p2", "k3") if getattr(self, n)
        )
        return f"{parts or 'no distortion'}" + (f" ({self.source})" if self.source else "")


def _matrix(k: Intrinsics) -> np.ndarray:
    return np.array([[k.fx, 0.0, k.cx], [0.0, k.fy, k.cy], [0.0, 0.0, 1.0]], dtype=np.float64)


def _undistort(src: np.ndarray, m: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """OpenCV's iterative undistortion with our criteria (OpenCV 4: ``undistortPointsIter``; 5: the
    criteria are ``undistortPoints``'s own)."""
    solve = getattr(cv2, "undistortPointsIter", None)
    if solve is not None:
        return solve(src, m, coeffs, None, m, _CRITERIA)
    return cv2.undistortPoints(src, m, coeffs, R=None, P=m, criteria=_CRITERIA)


def distort_points(points: np.ndarray, intrinsics: Intrinsics, lens: LensModel | None) -> np.ndarray:
    """Ideal (pinhole) pixels (N, 2) -> where the lens images them (N, 2)."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if lens is None or lens.identity or not len(pts):
        return pts.copy()
    k = intrinsics
    x = (pts[:, 0] - k.cx) / k.fx
    y = (pts[:, 1] - k.cy) / k.fy
    r2 = x * x + y * y
    radial = 1.0 + r2 * (lens.k1 + r2 * (lens.k2 + r2 * lens.k3))
    xd = x * radial + 2.0 * lens.p1 * x * y + lens.p2 * (r2 + 2.0 * x * x)
    yd = y * radial + lens.p1 * (r2 + 2.0 * y * y) + 2.0 * lens.p2 * x * y
    return np.column_stack([xd * k.fx + k.cx, yd * k.fy + k.cy])


def undistort_points(points: np.ndarray, intrinsics: Intrinsics, lens: LensModel | None) -> np.ndarray:
    """Image pixels (N, 2) -> the ideal (pinhole) pixels the lens moved them from (N, 2); NaN rows
    stay NaN."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    if lens is None or lens.identity or not len(pts):
        return pts.copy()
    ok = np.isfinite(pts).all(axis=1)
    if ok.all():  # the usual case: one call, no copies
        return _undistort(pts.reshape(-1, 1, 2), _matrix(intrinsics), lens.coeffs).reshape(-1, 2)
    out = np.full_like(pts, np.nan)
    if ok.any():
        out[ok] = _undistort(pts[ok].reshape(-1, 1, 2), _matrix(intrinsics), lens.coeffs).reshape(-1, 2)
    return out


def max_shift_px(intrinsics: Intrinsics, lens: LensModel | None) -> float:
    """The largest distance (px) the lens moves a point of the frame: at its corners and edges' middles."""
    k = intrinsics
    w, h = k.width, k.height
    probe = np.array([[0, 0], [w, 0], [0, h], [w, h], [w / 2, 0], [w / 2, h], [0, h / 2], [w, h / 2]], float)
    return float(np.max(np.linalg.norm(undistort_points(probe, k, lens) - probe, axis=1)))


def row_time_offsets(rows: np.ndarray, height: int, readout_s: float) -> np.ndarray:
    """When each image row (pixel ``v``, any shape) was read, relative to the frame's timestamp (its
    middle row's), in seconds."""
    v = np.asarray(rows, dtype=np.float64)
    if not readout_s:
        return np.zeros_like(v)
    return (v / float(height) - 0.5) * float(readout_s)


def lens_from_dewarp_data(text: str, source: str = "DJI DewarpData") -> LensModel:
    """The lens of DJI's XMP ``drone-dji:DewarpData`` ("date;fx,fy,cx,cy,k1,k2,p1,p2,k3"; the date
    and its semicolon may be missing). Its focal lengths and centre are the full-sensor still's
    pixels and are not used: the coefficients are dimensionless."""
    body = text.strip().split(";")[-1]
    try:
        values = [float(v) for v in body.split(",")]
    except ValueError as exc:
        raise LensError(f"DewarpData {text!r}: not 'date;fx,fy,cx,cy,k1,k2,p1,p2,k3' ({exc})") from None
    if len(values) != 9:
        raise LensError(
            f"DewarpData {text!r}: {len(values)} numbers, expected 9 (fx,fy,cx,cy,k1,k2,p1,p2,k3)"
        )
    k1, k2, p1, p2, k3 = values[4:]
    return LensModel(k1, k2, p1, p2, k3, source=source)


_DEWARP_XMP = re.compile(
    rb'drone-dji:DewarpData\s*=\s*"([^"]*)"|<drone-dji:DewarpData>([^<]*)</drone-dji:DewarpData>'
)
XMP_SEARCH_BYTES = 1 << 20  # a JPEG's XMP packet sits in its first segments


def dewarp_data_from_image(path: str | Path) -> str:
    """The ``drone-dji:DewarpData`` string in a DJI still's XMP (attribute or element form)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(XMP_SEARCH_BYTES)
    except OSError as exc:
        raise LensError(f"cannot read {path}: {exc.strerror or exc}") from None
    found = _DEWARP_XMP.search(head)
    if found is None:
        raise LensError(f"{path} has no drone-dji:DewarpData in its XMP (a DJI still carries one)")
    text = (found.group(1) or found.group(2) or b"").decode("ascii", "replace").strip()
    lens_from_dewarp_data(text)  # says what is wrong with it, if anything
    return text


__all__ = [
    "LensError",
    "LensModel",
    "dewarp_data_from_image",
    "distort_points",
    "lens_from_dewarp_data",
    "max_shift_px",
    "row_time_offsets",
    "undistort_points",
]
