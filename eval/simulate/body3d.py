"""Vehicles as solids (``FlightSpec.vehicle_height``): each vehicle is three cuboids on its footprint -
the wheels (dark, inset, up to ``GROUND_CLEARANCE_M``), the lower body (the whole footprint, up to
``BODY_SHARE`` of the height, in the body's colour) and the cabin (inset by ``CABIN_INSET``, up to
the vehicle's height, its sides glass on cars, vans and buses) with the vehicle's sprite warped onto
its roof - seen in perspective from the drone.

The horizontal plane ``z = c`` seen from a camera at altitude ``A`` is exactly the ground seen from
``A - c`` (over a graded road, the plane ``c`` above it:
:func:`eval.simulate.geometry.plane_homography`): every corner is projected through the homography
of its own plane (:meth:`SolidView.plane`), then through the renderer's lens (``to_sensor``). Only the side faces
turned towards the camera are drawn (their outward normal points to the drone's position), the
parts bottom up: a ray from the drone descends, so it meets anything higher first. Vehicles are
drawn farthest from the drone's nadir first (:func:`far_first`). A solid's ground-truth box bounds
all its projected corners (:func:`outline`): what a labeller boxes, the whole visible vehicle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from eval.simulate.geometry import GroundSurface, plane_homography, world_to_camera_ground
from pipelines.types import Intrinsics

GROUND_CLEARANCE_M = 0.25  # the lower body's bottom (at most a quarter of the height)
BODY_SHARE = 0.55  # the lower body's top, a share of the height; the cabin above it
CABIN_INSET = (0.03, 0.07)  # the cabin's inset on each end (share of the length) and side (width)
# a passenger car's cabin is shorter than its body: a sedan's glasshouse about 0.6 of its length, an
# SUV's 0.75, a van's 0.85 (pipelines.scale_check's prior: 0.65 +- 0.10 for what is labelled car)
CABIN_INSETS: dict[str, tuple[float, float]] = {
    "car": (0.20, 0.07),
    "suv": (0.125, 0.07),
    "van": (0.075, 0.07),
}
WHEELS_INSET = (0.10, 0.06)  # the wheels' inset, likewise
WHEELS_BGR = (30.0, 30.0, 32.0)
GLASS_BGR = np.array([52.0, 46.0, 42.0])  # side windows (a little of the body's colour shows through)
GLASS_BODIES = frozenset({"car", "suv", "van", "bus"})  # a cabin with windows along its sides
SIDE_SHADE = (0.5, 0.3)  # a side's brightness: a + b * cos(its angle to the sun), the roof's 1
RIM_SHADE = 0.92  # the lower body's top, around the cabin
SUN_DIR = np.array([-0.45, 0.30]) / math.hypot(0.45, 0.30)  # towards the sun (shadows fall opposite)


def footprint(centre: np.ndarray, heading: np.ndarray, half_length: float, half_width: float) -> np.ndarray:
    """The corners (4, 2) of a rectangle on the ground: rear right, front right, front left, rear left."""
    c, f = centre, heading
    r = np.array([f[1], -f[0]])
    hl, hw_ = half_length, half_width
    return np.array([c - f * hl - r * hw_, c + f * hl - r * hw_, c + f * hl + r * hw_, c - f * hl + r * hw_])


@dataclass(frozen=True, slots=True, eq=False)
class Part:
    """One cuboid of a solid vehicle: its corners (4, 2, world metres, as :func:`footprint`) from
    ``z_lo`` to ``z_hi`` metres above the ground; ``kind``: wheels, body or cabin."""

    corners: np.ndarray
    z_lo: float
    z_hi: float
    kind: str


def parts(
    length: float, width: float, height: float, centre: np.ndarray, heading: np.ndarray, body: str = ""
) -> list[Part]:
    """The cuboids of a vehicle of that size and ``body`` type at ``centre`` heading ``heading``,
    bottom up (the cabin's length by body: ``CABIN_INSETS``, else ``CABIN_INSET``)."""
    clear = min(GROUND_CLEARANCE_M, 0.25 * height)
    top = BODY_SHARE * height
    hl, hw = length / 2, width / 2

    def box(inset: tuple[float, float]) -> np.ndarray:
        return footprint(centre, heading, hl * (1 - 2 * inset[0]), hw * (1 - 2 * inset[1]))

    return [
        Part(box(WHEELS_INSET), 0.0, clear, "wheels"),
        Part(box((0.0, 0.0)), clear, top, "body"),
        Part(box(CABIN_INSETS.get(body, CABIN_INSET)), top, height, "cabin"),
    ]


@dataclass(frozen=True, slots=True, eq=False)
class SolidView:
    """How a renderer sees solids at one instant: the pinhole camera then (its intrinsics, pitch, the
    drone's position ``eye`` (x, y world metres), yaw and altitude), where its sensor sees pinhole
    pixels (``to_sensor``: (N, 2) -> (N, 2)) and the world -> sensor homography of a plane's face
    (``face_warp``: the plane's pinhole homography and the face's world corners (4, 2)); ``surface``:
    the ground's (a graded plane; None: flat), which heights count from."""

    intrinsics: Intrinsics
    pitch_deg: float
    eye: np.ndarray
    yaw_deg: float
    altitude: float
    to_sensor: Callable[[np.ndarray], np.ndarray]
    face_warp: Callable[[np.ndarray, np.ndarray], np.ndarray]
    surface: GroundSurface | None = None

    def plane(self, z: float) -> np.ndarray:
        """3x3 homography: world metres on the plane ``z`` metres above the ground -> pinhole pixels
        (flat ground: the ground seen from ``altitude - z``)."""
        to_ground = world_to_camera_ground(self.eye, self.yaw_deg)
        return plane_homography(self.intrinsics, self.altitude, self.pitch_deg, to_ground, self.surface, z)

    def project(self, xy: np.ndarray, z: float) -> np.ndarray | None:
        """Sensor pixels (N, 2) of the points ``xy`` (N, 2) at height ``z``; None when any is not in
        front of the camera."""
        homog = np.column_stack([xy, np.ones(len(xy))]) @ self.plane(z).T
        if (homog[:, 2] <= 1e-9).any():
            return None
        return self.to_sensor(homog[:, :2] / homog[:, 2:3])


def outline(solid: list[Part], view: SolidView) -> np.ndarray | None:
    """Sensor pixels (N, 2) of every corner of the solid's parts (their box is the vehicle's); None
    when any is not in front of the camera."""
    pts = []
    for part in solid:
        for z in (part.z_lo, part.z_hi):
            uv = view.project(part.corners, z)
            if uv is None:
                return None
            pts.append(uv)
    return np.vstack(pts)


def far_first(eye: np.ndarray, centres: list[np.ndarray]) -> list[int]:
    """Indices of ``centres`` (world metres) from the farthest from the drone's nadir ``eye`` to the
    nearest: the painter's order of separate solids seen from above."""
    dist = [float(np.hypot(*(np.asarray(c) - eye))) for c in centres]
    return sorted(range(len(centres)), key=lambda i: -dist[i])


def body_colour(sprite: np.ndarray) -> np.ndarray:
    """The body's colour (BGR floats) of a top view (BGRA): the median of its opaque pixels (the
    body's panels cover most of a top view; the roof and windows are a minority)."""
    opaque = sprite[..., 3] > 200
    pixels = sprite[..., :3][opaque] if opaque.any() else sprite[..., :3].reshape(-1, 3)
    return np.median(pixels.astype(np.float64), axis=0)


def draw_solid(
    img: np.ndarray, solid: list[Part], view: SolidView, sprite: np.ndarray, colour: np.ndarray, body: str
) -> None:
    """Draw a vehicle's parts (:func:`parts`) into ``img`` (BGR uint8, in place): the sides turned
    towards the camera, shaded by the sun; the lower body's top in the body's colour; the sprite
    (BGRA, front to +x) on the cabin's roof."""
    glass = body in GLASS_BODIES
    for part in solid:
        lo, hi = view.project(part.corners, part.z_lo), view.project(part.corners, part.z_hi)
        if lo is None or hi is None:
            return
        centre = part.corners.mean(0)
        for i in range(4):
            j = (i + 1) % 4
            a, b = part.corners[i], part.corners[j]
            normal = np.array([b[1] - a[1], a[0] - b[0]])
            mid = (a + b) / 2
            if normal @ (mid - centre) < 0:
                normal = -normal
            if normal @ (view.eye - mid) <= 0:  # turned away from the drone
                continue
            normal = normal / max(float(np.hypot(*normal)), 1e-12)
            shade = SIDE_SHADE[0] + SIDE_SHADE[1] * max(0.0, float(normal @ SUN_DIR))
            if part.kind == "wheels":
                bgr = np.array(WHEELS_BGR)
            elif part.kind == "cabin" and glass:
                bgr = 0.3 * colour * shade + 0.7 * GLASS_BGR
            else:
                bgr = colour * shade
            _fill(img, np.array([lo[i], lo[j], hi[j], hi[i]]), bgr)
        if part.kind == "body":
            _fill(img, hi, colour * RIM_SHADE)
        elif part.kind == "cabin":
            _roof(img, part, view, sprite, hi)


def _fill(img: np.ndarray, uv: np.ndarray, bgr: np.ndarray) -> None:
    """A convex polygon ``uv`` (N, 2, pixels) of one colour, anti-aliased (4 bits of sub-pixel)."""
    pts = np.round(uv * 16).astype(np.int32)
    colour = tuple(float(c) for c in np.clip(bgr, 0, 255))
    cv2.fillConvexPoly(img, pts, colour, cv2.LINE_AA, 4)


def _roof(img: np.ndarray, part: Part, view: SolidView, sprite: np.ndarray, uv: np.ndarray) -> None:
    """Alpha-blend ``sprite`` onto the roof of ``part`` (its top face, whose sensor pixels are ``uv``)."""
    h, w = img.shape[:2]
    x0 = int(max(0, math.floor(uv[:, 0].min()) - 1))
    y0 = int(max(0, math.floor(uv[:, 1].min()) - 1))
    x1 = int(min(w, math.ceil(uv[:, 0].max()) + 2))
    y1 = int(min(h, math.ceil(uv[:, 1].max()) + 2))
    if x1 <= x0 or y1 <= y0:
        return
    # sprite pixels -> world metres, as the flat renderer's: columns to the front, rows across
    # (footprint corners 0 -> 1 and 0 -> 3), pixel centres inside the face
    c0, c1, _c2, c3 = part.corners
    sh, sw = sprite.shape[:2]
    along, across = (c1 - c0) / sw, (c3 - c0) / sh
    a_sprite = np.array([[along[0], across[0], 0.0], [along[1], across[1], 0.0], [0.0, 0.0, 1.0]])
    a_sprite[:2, 2] = c0 + 0.5 * (along + across)
    shift = np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0], [0.0, 0.0, 1.0]])
    warp = view.face_warp(view.plane(part.z_hi), part.corners)
    warped = cv2.warpPerspective(
        sprite,
        shift @ warp @ a_sprite,
        (x1 - x0, y1 - y0),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(0, 0, 0, 0),
    )
    roi = img[y0:y1, x0:x1]
    alpha = warped[..., 3:4].astype(np.float32) / 255.0
    blended = roi.astype(np.float32) * (1.0 - alpha) + warped[..., :3].astype(np.float32) * alpha
    roi[:] = np.clip(blended + 0.5, 0, 255).astype(np.uint8)
