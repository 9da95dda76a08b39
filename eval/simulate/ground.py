"""The ground layer of a flight: one procedural texture in world metres (grass and soil fields,
buildings, trees, sidewalks, asphalt with lane markings and crosswalks) and its exact road mask."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from eval.simulate.geometry import Road
from pipelines.geometry import apply_homography


@dataclass(frozen=True, slots=True, eq=False)
class GroundLayer:
    """The rendered ground: BGR texture, road mask and the texture-pixel -> world transform."""

    texture: np.ndarray  # H x W x 3 uint8
    texture_half: np.ndarray  # pyrDown of texture (far field of oblique views)
    road_mask: np.ndarray  # H x W uint8 (255 road)
    res_m: float
    tex_to_world: np.ndarray  # 3x3

    @property
    def world_to_tex(self) -> np.ndarray:
        return np.linalg.inv(self.tex_to_world)


def _noise(shape: tuple[int, int], cell_px: float, rng: np.random.Generator) -> np.ndarray:
    """Smooth value noise in [-1, 1] with features of about ``cell_px`` pixels."""
    h, w = shape
    gh, gw = max(2, int(h / max(cell_px, 1.0)) + 2), max(2, int(w / max(cell_px, 1.0)) + 2)
    small = rng.uniform(-1.0, 1.0, (gh, gw)).astype(np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


class GroundPainter:
    """Paints the ground over ``bounds`` (world metres x0, y0, x1, y1) at ``res`` metres per pixel.

    Every random draw comes from ``rng``, in a fixed order (fields, buildings, trees, asphalt).
    """

    def __init__(self, bounds: tuple[float, float, float, float], res: float, rng: np.random.Generator):
        x0, y0, x1, y1 = bounds
        self.res = res
        self.rng = rng
        self.w = int(math.ceil((x1 - x0) / res)) + 1
        self.h = int(math.ceil((y1 - y0) / res)) + 1
        self.tex_to_world = np.array([[res, 0.0, x0], [0.0, -res, y1], [0.0, 0.0, 1.0]])
        self.world_to_tex = np.linalg.inv(self.tex_to_world)

    def px(self, pts: np.ndarray) -> np.ndarray:
        return apply_homography(self.world_to_tex, np.asarray(pts, dtype=np.float64).reshape(-1, 2))

    def fixed(self, pts: np.ndarray) -> np.ndarray:
        """World points -> int32 pixel coordinates with 4 fractional bits (cv2 ``shift=4``)."""
        return np.round(self.px(pts) * 16).astype(np.int32)

    def m(self, metres: float) -> float:
        return metres / self.res

    def paint(self, roads: Sequence[Road], crossings: Sequence[np.ndarray]) -> GroundLayer:
        """The ground layer of ``roads``, with crosswalks around each point of ``crossings``."""
        rng, h, w = self.rng, self.h, self.w
        # --- background: grass / soil fields with multi-scale texture
        big = _noise((h, w), self.m(60.0), rng)
        mid = _noise((h, w), self.m(9.0), rng)
        fine = _noise((h, w), self.m(1.6), rng)
        finer = _noise((h, w), max(self.m(0.45), 1.5), rng)
        soil = np.clip(big * 1.6, -1, 1) * 0.5 + 0.5  # 0 grass .. 1 soil
        grass = np.array([62, 118, 86], np.float32)
        dry = np.array([88, 132, 150], np.float32)
        base = grass[None, None, :] * (1 - soil[..., None]) + dry[None, None, :] * soil[..., None]
        shade = 1.0 + 0.16 * mid + 0.10 * fine + 0.08 * finer
        tex = base * shade[..., None]
        del big, soil, base
        tex += rng.normal(0.0, 5.0, (h, w, 1)).astype(np.float32)
        tex = np.clip(tex, 0, 255).astype(np.uint8)

        # --- road corridors (asphalt + sidewalks) as masks first: buildings must avoid them
        road_mask = np.zeros((h, w), np.uint8)
        corridor = np.zeros((h, w), np.uint8)
        for road in roads:
            pts = self.fixed(road.centre.points).reshape(-1, 1, 2)
            cv2.polylines(
                road_mask, [pts], False, 255, max(1, int(round(self.m(2 * road.half_width)))), cv2.LINE_8, 4
            )
            cv2.polylines(
                corridor, [pts], False, 255, int(round(self.m(2 * road.half_width + 16.0))), cv2.LINE_8, 4
            )
        sidewalk = np.zeros((h, w), np.uint8)
        for road in roads:
            pts = self.fixed(road.centre.points).reshape(-1, 1, 2)
            cv2.polylines(
                sidewalk, [pts], False, 255, int(round(self.m(2 * road.half_width + 5.0))), cv2.LINE_8, 4
            )

        self._buildings(tex, corridor)
        self._trees(tex, corridor)

        # sidewalks / kerbs: light concrete
        concrete = np.array([150, 158, 162], np.float32)
        sw = sidewalk > 0
        tex[sw] = np.clip(concrete * (1.0 + 0.06 * mid[sw, None] + 0.05 * finer[sw, None]), 0, 255).astype(
            np.uint8
        )

        # asphalt with patches and wear
        patches = np.clip(_noise((h, w), self.m(14.0), rng) * 2.5, -1, 1)
        asphalt = np.array([74, 74, 78], np.float32)
        rm = road_mask > 0
        val = asphalt * (1.0 + 0.10 * patches[rm, None] + 0.06 * fine[rm, None] + 0.07 * finer[rm, None])
        val += rng.normal(0.0, 4.0, (int(rm.sum()), 1)).astype(np.float32)
        tex[rm] = np.clip(val, 0, 255).astype(np.uint8)
        del patches, mid, fine, finer, val

        self._markings(tex, roads, road_mask)
        for crossing in crossings:
            self._crosswalks(tex, roads, crossing)
        texture_half = cv2.pyrDown(tex)
        return GroundLayer(tex, texture_half, road_mask, self.res, self.tex_to_world)

    def _area_m2(self) -> float:
        return self.w * self.h * self.res**2

    def _buildings(self, tex: np.ndarray, corridor: np.ndarray) -> None:
        """Gabled roofs with shadows and roof fixtures, never inside a road corridor."""
        rng = self.rng
        area_m2 = self._area_m2()
        roof_colours = np.array(
            [[120, 120, 125], [70, 80, 150], [95, 100, 110], [160, 165, 170], [60, 70, 90], [130, 150, 175]],
            np.float32,
        )
        n_buildings = int(area_m2 / 900)
        for _ in range(n_buildings):
            cx, cy = rng.uniform(0, self.w), rng.uniform(0, self.h)
            bl, bw = self.m(rng.uniform(8, 28)), self.m(rng.uniform(7, 18))
            ang = rng.uniform(0, 180)
            rect = ((cx, cy), (bl, bw), ang)
            box = cv2.boxPoints(rect)
            x0, y0 = np.floor(box.min(0)).astype(int)
            x1, y1 = np.ceil(box.max(0)).astype(int)
            if x0 < 0 or y0 < 0 or x1 >= self.w or y1 >= self.h or corridor[y0:y1, x0:x1].any():
                continue
            colour = roof_colours[rng.integers(len(roof_colours))] * rng.uniform(0.85, 1.15)
            shadow = box + np.array([self.m(2.0), self.m(1.5)], np.float32)
            cv2.fillConvexPoly(tex, np.round(shadow * 16).astype(np.int32), (35, 45, 40), cv2.LINE_AA, 4)
            cv2.fillConvexPoly(tex, np.round(box * 16).astype(np.int32), colour.tolist(), cv2.LINE_AA, 4)
            # gable: one half darker, a ridge line, a few roof fixtures
            half = np.array([box[0], box[1], (box[1] + box[2]) / 2, (box[0] + box[3]) / 2], np.float32)
            cv2.fillConvexPoly(
                tex, np.round(half * 16).astype(np.int32), (colour * 0.78).tolist(), cv2.LINE_AA, 4
            )
            a, b = (box[0] + box[3]) / 2, (box[1] + box[2]) / 2
            cv2.line(
                tex,
                tuple(np.round(a * 16).astype(int)),
                tuple(np.round(b * 16).astype(int)),
                (colour * 1.15).clip(0, 255).tolist(),
                max(1, int(self.m(0.3))),
                cv2.LINE_AA,
                4,
            )
            for _ in range(int(rng.integers(0, 4))):
                p = box[0] + (box[2] - box[0]) * rng.uniform(0.2, 0.8, 2).astype(np.float32)
                s = self.m(rng.uniform(0.8, 2.0))
                cv2.rectangle(
                    tex,
                    tuple((p * 16).astype(int)),
                    tuple(((p + s) * 16).astype(int)),
                    (200, 200, 200),
                    -1,
                    cv2.LINE_AA,
                    4,
                )

    def _trees(self, tex: np.ndarray, corridor: np.ndarray) -> None:
        """Round crowns with shadows and a sunlit highlight, never inside a road corridor."""
        rng = self.rng
        n_trees = int(self._area_m2() / 220)
        for _ in range(n_trees):
            cx, cy = rng.uniform(0, self.w), rng.uniform(0, self.h)
            r = self.m(rng.uniform(1.8, 4.5))
            ix, iy = int(cx), int(cy)
            if corridor[iy, ix] or ix < r or iy < r or ix + r >= self.w or iy + r >= self.h:
                continue
            c16 = np.array([cx, cy]) * 16
            green = np.array([40, 85, 45], np.float32) * rng.uniform(0.75, 1.25)
            cv2.circle(
                tex,
                tuple((c16 + np.array([self.m(1.6), self.m(1.2)]) * 16).astype(int)),
                int(r * 16),
                (30, 45, 35),
                -1,
                cv2.LINE_AA,
                4,
            )
            cv2.circle(tex, tuple(c16.astype(int)), int(r * 16), green.tolist(), -1, cv2.LINE_AA, 4)
            cv2.circle(
                tex,
                tuple((c16 - r * 4).astype(int)),
                int(r * 8),
                (green * 1.3).clip(0, 255).tolist(),
                -1,
                cv2.LINE_AA,
                4,
            )

    def _stroke(self, layer: np.ndarray, pts_world: np.ndarray, width_m: float) -> None:
        """Draw a line of ``width_m`` metres into an alpha layer (sub-pixel widths fade)."""
        width_px = self.m(width_m)
        thick = max(1, int(round(width_px)))
        strength = int(round(255 * min(1.0, width_px / thick)))
        pts = self.fixed(pts_world).reshape(-1, 1, 2)
        cv2.polylines(layer, [pts], False, strength, thick, cv2.LINE_AA, 4)

    def _markings(self, tex: np.ndarray, roads: Sequence[Road], road_mask: np.ndarray) -> None:
        white = np.array([225, 228, 230], np.float32)
        for i, road in enumerate(roads):
            layer = np.zeros(road_mask.shape, np.uint8)
            n, lw = road.lanes_per_direction, road.lane_width_m
            for k in range(-n, n + 1):
                line = road.centre.offset(k * lw) if k else road.centre
                if abs(k) == n or k == 0:  # edges and centre: solid
                    self._stroke(layer, line.points, 0.15)
                    if k == 0:
                        self._stroke(layer, road.centre.offset(0.3).points, 0.12)
                    continue
                dash, gap = 3.0, 6.0
                s = 0.0
                while s < line.length:
                    seg = np.linspace(s, min(s + dash, line.length), 4)
                    self._stroke(layer, line.at(seg)[0], 0.13)
                    s += dash + gap
            # markings stop where another road's asphalt crosses this one
            for j, other in enumerate(roads):
                if j != i:
                    pts = self.fixed(other.centre.points).reshape(-1, 1, 2)
                    cv2.polylines(
                        layer, [pts], False, 0, int(round(self.m(2 * other.half_width))), cv2.LINE_8, 4
                    )
            alpha = layer.astype(np.float32)[..., None] / 255.0
            sel = layer > 0
            tex[sel] = (tex[sel] * (1 - alpha[sel]) + white * alpha[sel]).astype(np.uint8)

    def _crosswalks(self, tex: np.ndarray, roads: Sequence[Road], crossing: np.ndarray) -> None:
        """Zebra stripes on every road, just outside the crossing with the other roads."""
        white = (222, 226, 228)
        for i, road in enumerate(roads):
            s_c = float(road.centre.cum[np.argmin(np.linalg.norm(road.centre.points - crossing, axis=1))])
            clearance = max(r.half_width for j, r in enumerate(roads) if j != i) + 2.5
            for sign in (-1.0, 1.0):
                s_mid = s_c + sign * (clearance + 1.5)
                pos, tang = road.centre.at(np.array([s_mid]))
                pos, tang = pos[0], tang[0]
                right = np.array([tang[1], -tang[0]])
                stripes = np.arange(-road.half_width + 0.75, road.half_width - 0.5, 1.0)
                for off in stripes:
                    c = pos + right * off
                    quad = np.array(
                        [
                            c - tang * 1.5 - right * 0.25,
                            c + tang * 1.5 - right * 0.25,
                            c + tang * 1.5 + right * 0.25,
                            c - tang * 1.5 + right * 0.25,
                        ]
                    )
                    cv2.fillConvexPoly(tex, self.fixed(quad), white, cv2.LINE_AA, 4)
                stop = pos - sign * tang * 2.5
                # stop line across the incoming lanes only
                line = (
                    np.array([stop, stop + right * (road.half_width - 0.5)])
                    if sign < 0
                    else np.array([stop, stop - right * (road.half_width - 0.5)])
                )
                layer_pts = self.fixed(line).reshape(-1, 1, 2)
                cv2.polylines(tex, [layer_pts], False, white, max(1, int(round(self.m(0.4)))), cv2.LINE_AA, 4)
