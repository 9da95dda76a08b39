"""Top views of vehicles: procedural ones drawn with OpenCV, or real crops cut from YOLO-labelled
aerial images (held in memory only)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from eval.simulate.spec import VEHICLE_DIMS_M, SimulationError

log = logging.getLogger(__name__)

# YOLO class ids of the aerial-cars dataset (aerial.names: car, truck, bus, minibus, cyclist).
AERIAL_CARS_CLASSES: dict[int, str] = {0: "car", 1: "truck", 2: "bus", 3: "van"}

CAR_COLOURS_BGR = (
    ((236, 236, 234), 0.24),
    ((188, 190, 194), 0.15),
    ((118, 118, 124), 0.14),
    ((32, 32, 35), 0.19),
    ((38, 40, 178), 0.08),
    ((150, 82, 40), 0.08),
    ((88, 52, 30), 0.05),
    ((60, 112, 52), 0.03),
    ((40, 196, 232), 0.02),
    ((168, 198, 214), 0.02),
)


@dataclass(frozen=True, slots=True, eq=False)
class Sprite:
    """Top view of a vehicle, front pointing to +x (image right), BGRA uint8."""

    image: np.ndarray
    class_name: str
    aspect: float  # width / length of the vehicle body
    real: bool = False


def _rounded_rect(img: np.ndarray, x0: float, y0: float, x1: float, y1: float, r: float, colour) -> None:
    r = max(0.0, min(r, (x1 - x0) / 2, (y1 - y0) / 2))
    s = 16
    p = lambda x, y: (int(round(x * s)), int(round(y * s)))  # noqa: E731
    cv2.rectangle(img, p(x0 + r, y0), p(x1 - r, y1), colour, -1, cv2.LINE_AA, 4)
    cv2.rectangle(img, p(x0, y0 + r), p(x1, y1 - r), colour, -1, cv2.LINE_AA, 4)
    for cx, cy in ((x0 + r, y0 + r), (x1 - r, y0 + r), (x0 + r, y1 - r), (x1 - r, y1 - r)):
        cv2.circle(img, p(cx, cy), int(round(r * s)), colour, -1, cv2.LINE_AA, 4)


def _q(v: float) -> int:
    """A coordinate or length in cv2's fixed point with 4 fractional bits (``shift=4``), truncated."""
    return int(v * 16)


def _pt(x: float, y: float) -> tuple[int, int]:
    return _q(x), _q(y)


def _line(img: np.ndarray, a: tuple[float, float], b: tuple[float, float], colour, thickness: int) -> None:
    cv2.line(img, _pt(*a), _pt(*b), colour, thickness, cv2.LINE_AA, 4)


def _poly(img: np.ndarray, pts: list[list[float]], colour) -> None:
    cv2.fillConvexPoly(img, np.round(np.array(pts) * 16).astype(np.int32), colour, cv2.LINE_AA, 4)


@dataclass(frozen=True, slots=True)
class _Paint:
    """The colours of one procedural vehicle (BGRA tuples; ``body`` as BGR floats)."""

    body: np.ndarray
    bodyc: tuple
    dark: tuple
    light: tuple
    glass: tuple = (38, 34, 30, 255)


def procedural_sprite(class_name: str, rng: np.random.Generator, px_per_m: float = 24.0) -> Sprite:
    """Draw a top-view vehicle: body, windscreen, rear window, roof, mirrors (front at +x)."""
    length, width = VEHICLE_DIMS_M[class_name]
    lw, ww = int(round(length * px_per_m)), int(round(width * px_per_m))
    img = np.zeros((ww, lw, 4), np.uint8)
    colours = [c for c, _ in CAR_COLOURS_BGR]
    weights = np.array([w for _, w in CAR_COLOURS_BGR])
    body = np.array(colours[rng.choice(len(colours), p=weights / weights.sum())], np.float64)
    body = np.clip(body * rng.uniform(0.9, 1.08), 0, 255)
    paint = _Paint(
        body=body,
        bodyc=tuple(body.tolist()) + (255,),
        dark=tuple((body * 0.72).tolist()) + (255,),
        light=tuple(np.clip(body * 1.12 + 8, 0, 255).tolist()) + (255,),
    )
    L, W = lw - 1.0, ww - 1.0
    if class_name == "motorcycle":
        _motorcycle(img, L, W, paint)
    elif class_name == "truck":
        _truck(img, L, W, paint, rng)
    elif class_name == "bus":
        _bus(img, L, W, paint)
    else:
        _car(img, L, W, paint, rng, van=class_name == "van")
    return Sprite(img, class_name, width / length, real=False)


def _motorcycle(img: np.ndarray, L: float, W: float, paint: _Paint) -> None:
    cx, cy = img.shape[1] // 2, img.shape[0] // 2
    cv2.ellipse(img, _pt(cx, cy), _pt(L / 2, W / 2.6), 0, 0, 360, (30, 30, 30, 255), -1, cv2.LINE_AA, 4)
    cv2.ellipse(img, _pt(L * 0.62, cy), _pt(L * 0.18, W * 0.32), 0, 0, 360, paint.bodyc, -1, cv2.LINE_AA, 4)
    cv2.circle(img, _pt(L * 0.42, cy), _q(W * 0.34), (40, 40, 40, 255), -1, cv2.LINE_AA, 4)
    cv2.circle(img, _pt(L * 0.42, cy), _q(W * 0.26), paint.light, -1, cv2.LINE_AA, 4)


def _truck(img: np.ndarray, L: float, W: float, paint: _Paint, rng: np.random.Generator) -> None:
    cab = 0.24 * L
    cargo = (np.array([225, 228, 230]) if rng.random() < 0.5 else paint.body * 0.9 + 20).clip(0, 255)
    _rounded_rect(img, 0, 0, L - cab - 0.02 * L, W, 0.03 * W, tuple(cargo.tolist()) + (255,))
    cv2.rectangle(
        img,
        _pt(0.05 * L, 0.1 * W),
        _pt(L - cab - 0.06 * L, 0.9 * W),
        tuple((cargo * 0.92).tolist()) + (255,),
        max(1, int(0.02 * W)),
        cv2.LINE_AA,
        4,
    )
    _rounded_rect(img, L - cab, 0.03 * W, L, 0.97 * W, 0.12 * W, paint.bodyc)
    _rounded_rect(img, L - 0.10 * L, 0.12 * W, L - 0.02 * L, 0.88 * W, 0.05 * W, paint.glass)


def _bus(img: np.ndarray, L: float, W: float, paint: _Paint) -> None:
    _rounded_rect(img, 0, 0, L, W, 0.08 * W, paint.bodyc)
    _rounded_rect(img, L - 0.045 * L, 0.08 * W, L - 0.005 * L, 0.92 * W, 0.04 * W, paint.glass)
    for k in range(3):  # roof hatches
        x = (0.18 + 0.25 * k) * L
        cv2.rectangle(
            img, _pt(x, 0.28 * W), _pt(x + 0.09 * L, 0.72 * W), (205, 208, 210, 255), -1, cv2.LINE_AA, 4
        )
    _line(img, (0.03 * L, 0.5 * W), (0.93 * L, 0.5 * W), paint.dark, max(1, int(0.03 * W)))


def _car(img: np.ndarray, L: float, W: float, paint: _Paint, rng: np.random.Generator, van: bool) -> None:
    glass = paint.glass
    _rounded_rect(img, 0, 0, L, W, 0.22 * W, paint.bodyc)
    # windscreen front/back edge (ws0, ws1) and rear window (rw0, rw1), as shares of the length
    ws0, ws1, rw0, rw1 = (0.80, 0.90, 0.02, 0.06) if van else (0.58, 0.72, 0.12, 0.22)
    # hood / boot slightly darker, roof lighter
    hood = paint.dark if rng.random() < 0.3 else paint.bodyc
    _rounded_rect(img, ws1 * L, 0.06 * W, 0.98 * L, 0.94 * W, 0.18 * W, hood)
    _poly(img, [[ws0 * L, 0.12 * W], [ws1 * L, 0.04 * W], [ws1 * L, 0.96 * W], [ws0 * L, 0.88 * W]], glass)
    _poly(img, [[rw0 * L, 0.08 * W], [rw1 * L, 0.14 * W], [rw1 * L, 0.86 * W], [rw0 * L, 0.92 * W]], glass)
    roof = (40, 40, 42, 255) if rng.random() < 0.12 else paint.light
    _rounded_rect(img, rw1 * L + 0.01 * L, 0.16 * W, ws0 * L - 0.01 * L, 0.84 * W, 0.1 * W, roof)
    # side windows as thin dark strips, mirrors
    for y in (0.1 * W, 0.9 * W):
        _line(img, (rw1 * L, y), (ws0 * L, y), glass, max(1, int(0.05 * W)))
    for y in (0.0, W):
        cv2.circle(img, _pt(ws1 * L, y), _q(0.07 * W), paint.dark, -1, cv2.LINE_AA, 4)
    # headlights
    for y0, y1 in ((0.15 * W, 0.3 * W), (0.7 * W, 0.85 * W)):
        _line(img, (0.995 * L, y0), (0.995 * L, y1), (220, 235, 240, 255), max(1, int(0.04 * W)))


def load_sprite_crops(
    sprites_dir: str | Path, class_map: dict[int, str] | None = None, max_per_class: int = 400
) -> list[Sprite]:
    """Cut vehicle crops from image + YOLO-txt pairs (``class xc yc w h`` normalised).

    Only boxes clearly elongated along an image axis are kept (the box then is the vehicle's
    footprint); they are rotated so the vehicle's long side runs along +x. Crops live in memory only.
    """
    class_map = AERIAL_CARS_CLASSES if class_map is None else class_map
    root = Path(sprites_dir)
    if not root.is_dir():
        raise SimulationError(f"sprites folder not found: {root}")
    images = sorted(p for p in root.rglob("*") if p.suffix.lower() in {".jpg", ".jpeg", ".png"})
    sprites: list[Sprite] = []
    counts: dict[str, int] = {}
    for img_path in images:
        label = img_path.with_suffix(".txt")
        if not label.exists():
            continue
        image = None
        for line in label.read_text().splitlines():
            parts = line.split()
            if len(parts) < 5:
                continue
            cls = class_map.get(int(float(parts[0])))
            if cls is None or counts.get(cls, 0) >= max_per_class:
                continue
            if image is None:
                image = cv2.imread(str(img_path), cv2.IMREAD_COLOR)
                if image is None:
                    break
            ih, iw = image.shape[:2]
            xc, yc, bw, bh = (float(v) for v in parts[1:5])
            x0, x1 = int(round((xc - bw / 2) * iw)), int(round((xc + bw / 2) * iw))
            y0, y1 = int(round((yc - bh / 2) * ih)), int(round((yc + bh / 2) * ih))
            x0, y0, x1, y1 = max(0, x0), max(0, y0), min(iw, x1), min(ih, y1)
            w, h = x1 - x0, y1 - y0
            if min(w, h) < 8:
                continue
            ratio = max(w, h) / min(w, h)
            if ratio < 1.6:  # diagonal vehicle: its box holds background too
                continue
            crop = image[y0:y1, x0:x1]
            if h > w:
                crop = cv2.rotate(crop, cv2.ROTATE_90_CLOCKWISE)
            ch, cw = crop.shape[:2]
            alpha = np.zeros((ch, cw), np.uint8)
            _rounded_rect(alpha, 0.5, 0.5, cw - 1.5, ch - 1.5, 0.25 * ch, 255)
            alpha = cv2.GaussianBlur(alpha, (0, 0), max(0.6, 0.04 * ch))
            sprites.append(Sprite(np.dstack([crop, alpha]), cls, ch / cw, real=True))
            counts[cls] = counts.get(cls, 0) + 1
    log.info("cut %d vehicle crops from %s (%s)", len(sprites), root, counts)
    if not sprites:
        raise SimulationError(f"no usable vehicle crops (image + YOLO txt pairs) in {root}")
    return sprites
