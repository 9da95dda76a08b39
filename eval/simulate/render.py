"""Rendering a frame: the ground layer warped into the image, vehicles (shadow and sprite) projected
through the same homography, sensor noise; and the exact ground truth (boxes, visibility) of it.

:class:`FrameRenderer` is the ideal camera's: a pinhole with a global shutter, every pixel seen at the
frame's time. A flight with a lens or a rolling shutter is rendered by its subclass
:class:`eval.simulate.lens_render.SensorRenderer` (:func:`eval.simulate.lens_render.frame_renderer`
picks the one a flight needs), which reuses the vehicle drawing here through two hooks: where the
sensor sees a pinhole pixel (``_to_sensor``) and the homography a sprite is warped with
(``_sprite_warp``; ``_plane_warp`` for a face at any height). With ``FlightSpec.vehicle_height`` the
vehicles are drawn as solids (:mod:`eval.simulate.body3d`): all shadows first, then the solids from
the farthest to the nearest, and their boxes bound the whole solid."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from eval.simulate.body3d import SolidView, body_colour, draw_solid, far_first, footprint, outline, parts
from eval.simulate.camera import CameraPath
from eval.simulate.ground import GroundLayer
from eval.simulate.spec import FlightSpec
from eval.simulate.traffic import Vehicle
from pipelines.geometry import apply_homography

SUN_OFFSET_M = np.array([0.45, -0.30])  # shadow offset on the ground (m), the same for all vehicles


@dataclass(frozen=True, slots=True, eq=False)
class Projected:
    """A vehicle in view, as it is drawn: where (world), through which world -> pinhole homography
    (the camera at the instant it is seen), its footprint corners in the image (4, 2: where the
    sensor sees them) and its box (x0, y0, x1, y1): the footprint's, or a solid's (``solid``: how it
    is seen, drawn as a solid) all its corners'."""

    vehicle: Vehicle
    centre: np.ndarray
    heading: np.ndarray
    hw: np.ndarray
    uv: np.ndarray
    box: np.ndarray
    solid: SolidView | None = None


class FrameRenderer:
    """Renders frames of a flight in any order (caches only what does not depend on the frame)."""

    def __init__(
        self,
        spec: FlightSpec,
        camera: CameraPath,
        ground: GroundLayer,
        vehicles: Sequence[Vehicle],
        res: float,
    ):
        self.spec = spec
        self.camera = camera
        self.ground = ground
        self.vehicles = vehicles
        self.res = res
        self._blend_cache: dict[float, np.ndarray | None] = {}
        self._scaled_sprites: dict[int, np.ndarray] = {}
        self._colours: dict[int, np.ndarray] = {}

    def render(
        self, k: int, rng: np.random.Generator | None = None
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """BGR image of frame ``k`` and its ground-truth rows (one dict per visible vehicle)."""
        hw = self.camera.world_to_image(k)
        img = self._ground_image(k, hw)
        boxes = self._project(k, hw)
        if self.spec.vehicle_height:
            boxes = self._draw_solids(img, k, boxes)
        else:
            for p in boxes:
                self._draw_vehicle(img, p)
        rows = _gt_rows(k, boxes, self.spec.width, self.spec.height)
        if self.spec.noise_sigma > 0:
            img = self._add_noise(img, rng or np.random.default_rng([self.spec.seed, 4, k]))
        return img, rows

    def road_mask(self, k: int) -> np.ndarray:
        """Exact road mask (uint8, 255 = road) of frame ``k``."""
        hmat = self.camera.world_to_image(k) @ self.ground.tex_to_world
        return cv2.warpPerspective(
            self.ground.road_mask,
            hmat,
            (self.spec.width, self.spec.height),
            flags=cv2.INTER_NEAREST,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )

    # ---- ground ----------------------------------------------------------------------------------

    def _far_blend(self, k: int) -> np.ndarray | None:
        """Per-row weight of the half-resolution ground for oblique views (anti-aliasing)."""
        key = round(float(self.camera.altitude[k]), 2)
        if key in self._blend_cache:
            return self._blend_cache[key]
        spec = self.spec
        rows = np.linspace(0, spec.height - 1, 25)
        gsd = np.array([self.camera.gsd_at(k, (spec.width / 2, r)) for r in rows])
        level = np.log2(np.maximum(gsd / self.res, 1e-6))
        if level.max() < 0.6:
            self._blend_cache[key] = None
            return None
        weight_rows = np.clip(np.interp(np.arange(spec.height), rows, level) - 0.5, 0.0, 1.0).astype(
            np.float32
        )
        self._blend_cache[key] = weight_rows
        return weight_rows

    def _ground_image(self, k: int, hw: np.ndarray) -> np.ndarray:
        """Warp the ground layer into the image; the far rows of oblique views blend in the
        half-resolution layer (less aliasing). Gimbal roll is zero, so the ground sampling
        distance depends on the row only and each layer is warped over its band of rows."""
        w, h = self.spec.width, self.spec.height
        full = hw @ self.ground.tex_to_world
        weight = self._far_blend(k)
        if weight is None:
            return cv2.warpPerspective(
                self.ground.texture, full, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
            )

        def near(a0: int) -> np.ndarray:
            shift = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -a0], [0.0, 0.0, 1.0]])
            return cv2.warpPerspective(
                self.ground.texture,
                shift @ full,
                (w, h - a0),
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_REFLECT,
            )

        def far(b1: int) -> np.ndarray:
            half = hw @ self.ground.tex_to_world @ np.diag([2.0, 2.0, 1.0])
            return cv2.warpPerspective(
                self.ground.texture_half, half, (w, b1), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
            )

        return blend_layers(weight, w, near, far)

    # ---- vehicles --------------------------------------------------------------------------------

    def _project(self, k: int, hw: np.ndarray) -> list[Projected]:
        """The vehicles whose footprint is in front of the camera and overlaps the image, in order."""
        t = float(self.camera.times[k])
        placed = (self._place(v, v.positions[k], v.headings[k], hw, t) for v in self.vehicles)
        return [p for p in placed if p is not None]

    def _place(self, v: Vehicle, c: np.ndarray, f: np.ndarray, hw: np.ndarray, t: float) -> Projected | None:
        """Vehicle ``v`` at ``c`` heading ``f`` seen through ``hw`` (the camera at time ``t``); None
        when its footprint (a solid: any corner) is not in front of the camera or it misses the image."""
        w, h = self.spec.width, self.spec.height
        corners = footprint(c, f, v.length_m / 2, v.width_m / 2)
        homog = np.column_stack([corners, np.ones(4)]) @ hw.T
        if (homog[:, 2] <= 1e-9).any():
            return None
        uv = self._to_sensor(homog[:, :2] / homog[:, 2:3])
        solid, extent = None, uv
        if self.spec.vehicle_height and v.height_m > 0:
            solid = self._solid_view(t)
            extent = outline(parts(v.length_m, v.width_m, v.height_m, c, f, v.body), solid)
            if extent is None:
                return None
        bx0, by0 = extent.min(0)
        bx1, by1 = extent.max(0)
        if bx1 < 0 or by1 < 0 or bx0 >= w or by0 >= h:
            return None
        return Projected(v, c, f, hw, uv, np.array([bx0, by0, bx1, by1]), solid)

    def _solid_view(self, t: float) -> SolidView:
        """How solids are seen at time ``t``: the pinhole camera then, through this renderer's lens."""
        xy, yaw, altitude = self.camera.pose_at(t)
        return SolidView(
            self.camera.intrinsics,
            self.spec.pitch_deg,
            xy,
            float(yaw),
            float(altitude),
            self._to_sensor,
            self._plane_warp,
            self.camera.surface,
        )

    def _to_sensor(self, uv: np.ndarray) -> np.ndarray:
        """Where the sensor sees pinhole pixels ``uv`` (N, 2): the pinhole camera's own."""
        return uv

    def _sprite_warp(self, p: Projected) -> np.ndarray:
        """World metres -> image pixels for the sprite of ``p``: the pinhole homography."""
        return p.hw

    def _plane_warp(self, h: np.ndarray, corners: np.ndarray) -> np.ndarray:
        """World metres -> image pixels for a face with world corners ``corners`` (4, 2) on a plane
        seen through the pinhole homography ``h``: ``h`` itself."""
        return h

    def _sprite_image(self, v: Vehicle) -> np.ndarray:
        """Sprite resized once to about the ground-layer resolution (avoids aliasing)."""
        key = v.id
        if key not in self._scaled_sprites:
            img = v.sprite.image
            tw = max(4, int(round(v.length_m / self.res)))
            th = max(3, int(round(v.width_m / self.res)))
            interp = cv2.INTER_AREA if tw < img.shape[1] else cv2.INTER_LINEAR
            self._scaled_sprites[key] = cv2.resize(img, (tw, th), interpolation=interp)
        return self._scaled_sprites[key]

    def _draw_solids(self, img: np.ndarray, k: int, boxes: list[Projected]) -> list[Projected]:
        """Draw the vehicles as solids: every shadow, then the solids farthest first (flat vehicles,
        if any, as ever); the vehicles in the order drawn."""
        order = far_first(self.camera.drone_xy[k], [p.centre for p in boxes])
        drawn = [boxes[i] for i in order]
        for p in drawn:
            if p.solid is not None:
                self._draw_shadow(img, p)
        for p in drawn:
            v = p.vehicle
            if p.solid is None:
                self._draw_vehicle(img, p)
                continue
            sprite = self._sprite_image(v)
            if v.id not in self._colours:
                self._colours[v.id] = body_colour(sprite)
            solid = parts(v.length_m, v.width_m, v.height_m, p.centre, p.heading, v.body)
            draw_solid(img, solid, p.solid, sprite, self._colours[v.id], v.body)
        return drawn

    def _shadowed(self, img: np.ndarray, p: Projected) -> tuple[tuple[int, int], np.ndarray] | None:
        """The region of ``img`` around the vehicle's footprint and shadow: its top-left corner and
        its pixels darkened by the shadow, as floats; None when none of it is in the image."""
        h, w = img.shape[:2]
        v, c, f = p.vehicle, p.centre, p.heading
        shadow_w = footprint(c, f, v.length_m / 2 * 1.02, v.width_m / 2 * 1.04) + SUN_OFFSET_M
        shadow_uv = self._to_sensor(apply_homography(p.hw, shadow_w))
        allpts = np.vstack([p.uv, shadow_uv])
        x0 = int(max(0, math.floor(allpts[:, 0].min()) - 1))
        y0 = int(max(0, math.floor(allpts[:, 1].min()) - 1))
        x1 = int(min(w, math.ceil(allpts[:, 0].max()) + 2))
        y1 = int(min(h, math.ceil(allpts[:, 1].max()) + 2))
        if x1 <= x0 or y1 <= y0:
            return None
        roi = img[y0:y1, x0:x1]
        smask = np.zeros(roi.shape[:2], np.uint8)
        cv2.fillConvexPoly(smask, np.round((shadow_uv - [x0, y0]) * 16).astype(np.int32), 255, cv2.LINE_AA, 4)
        sa = smask.astype(np.float32)[..., None] * (0.45 / 255.0)
        return (x0, y0), roi.astype(np.float32) * (1.0 - sa)

    def _draw_shadow(self, img: np.ndarray, p: Projected) -> None:
        """Darken the vehicle's shadow on the ground."""
        shadowed = self._shadowed(img, p)
        if shadowed is not None:
            (x0, y0), roi_f = shadowed
            img[y0 : y0 + roi_f.shape[0], x0 : x0 + roi_f.shape[1]] = np.clip(roi_f, 0, 255).astype(np.uint8)

    def _draw_vehicle(self, img: np.ndarray, p: Projected) -> None:
        """Darken the vehicle's shadow, then alpha-blend its sprite warped through the homography."""
        shadowed = self._shadowed(img, p)
        if shadowed is None:
            return
        (x0, y0), roi_f = shadowed
        y1, x1 = y0 + roi_f.shape[0], x0 + roi_f.shape[1]
        roi = img[y0:y1, x0:x1]
        v, c, f = p.vehicle, p.centre, p.heading
        r = np.array([f[1], -f[0]])
        sprite = self._sprite_image(v)
        sh, sw = sprite.shape[:2]
        a_sprite = np.array(
            [
                [f[0] * v.length_m / sw, r[0] * v.width_m / sh, 0.0],
                [f[1] * v.length_m / sw, r[1] * v.width_m / sh, 0.0],
                [0.0, 0.0, 1.0],
            ]
        )
        origin = c - f * v.length_m / 2 - r * v.width_m / 2
        a_sprite[:2, 2] = origin + 0.5 * (a_sprite[:2, 0] + a_sprite[:2, 1])
        shift = np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0], [0.0, 0.0, 1.0]])
        warped = cv2.warpPerspective(
            sprite,
            shift @ self._sprite_warp(p) @ a_sprite,
            (x1 - x0, y1 - y0),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=(0, 0, 0, 0),
        )
        alpha = warped[..., 3:4].astype(np.float32) / 255.0
        roi_f = roi_f * (1.0 - alpha) + warped[..., :3].astype(np.float32) * alpha
        roi[:] = np.clip(roi_f, 0, 255).astype(np.uint8)

    def _add_noise(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Grey sensor noise at half resolution (2x2 blocks, like a demosaiced sensor)."""
        w, h = self.spec.width, self.spec.height
        noise = rng.normal(0.0, self.spec.noise_sigma, (h // 2, w // 2, 1)).astype(np.float32)
        noise = cv2.resize(noise, (w, h), interpolation=cv2.INTER_NEAREST)
        pos = np.clip(noise, 0, 255).astype(np.uint8)
        neg = np.clip(-noise, 0, 255).astype(np.uint8)
        return cv2.subtract(cv2.add(img, cv2.merge([pos, pos, pos])), cv2.merge([neg, neg, neg]))


def blend_layers(
    weight: np.ndarray, width: int, near: Callable[[int], np.ndarray], far: Callable[[int], np.ndarray]
) -> np.ndarray:
    """The ground image of an oblique view from its two layers, each rendered over its band of rows
    only: ``near(a0)`` the full-resolution rows [a0, height), ``far(b1)`` the half-resolution rows
    [0, b1); ``weight`` (one per row, float32) is the far layer's share."""
    h, w = len(weight), width
    near_rows = np.nonzero(weight < 1.0)[0]
    far_rows = np.nonzero(weight > 0.0)[0]
    a0 = int(near_rows.min()) if len(near_rows) else h  # near layer: rows [a0, h)
    b1 = int(far_rows.max()) + 1 if len(far_rows) else 0  # far layer: rows [0, b1)
    img = np.empty((h, w, 3), np.uint8)
    if a0 < h:
        img[a0:] = near(a0)
    if b1 > 0:
        far_img = far(b1)
        img[: min(a0, b1)] = far_img[: min(a0, b1)]
        if a0 < b1:
            wr = np.repeat(weight[a0:b1, None], w, axis=1)
            img[a0:b1] = cv2.blendLinear(img[a0:b1], far_img[a0:b1], 1.0 - wr, wr)
    return img


def _gt_rows(k: int, boxes: Sequence[Projected], w: int, h: int) -> list[dict[str, Any]]:
    """Ground truth of frame ``k``: boxes clipped to the image; visibility = the share inside the
    image times the share not covered by a vehicle drawn later (boxes in drawing order)."""
    rows: list[dict[str, Any]] = []
    for i, p in enumerate(boxes):
        v, box = p.vehicle, p.box
        full = (box[2] - box[0]) * (box[3] - box[1])
        cb = np.array([max(box[0], 0.0), max(box[1], 0.0), min(box[2], w - 1.0), min(box[3], h - 1.0)])
        cw, ch = cb[2] - cb[0], cb[3] - cb[1]
        if cw < 2 or ch < 2 or full <= 0:
            continue
        inside = cw * ch / full
        covered = 0.0
        for b2 in (q.box for q in boxes[i + 1 :]):
            ix = max(0.0, min(cb[2], b2[2]) - max(cb[0], b2[0]))
            iy = max(0.0, min(cb[3], b2[3]) - max(cb[1], b2[1]))
            covered = max(covered, ix * iy / (cw * ch))
        rows.append(
            {
                "id": v.id,
                "class_name": v.class_name,
                "xywh": (float(cb[0]), float(cb[1]), float(cw), float(ch)),
                "visibility": float(np.clip(inside * (1.0 - covered), 0.0, 1.0)),
                "speed_kmh": float(v.speeds_mps[k] * 3.6),
                "ground_xy": (float(v.positions[k][0]), float(v.positions[k][1])),
            }
        )
    return rows
