"""A fully specified flight: it builds the camera path, the ground region and its texture, the roads
and the traffic (each from its own random stream of the seed) and renders any frame of it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from eval.simulate.camera import CameraPath
from eval.simulate.geometry import GroundSurface, Road, road_layout
from eval.simulate.ground import GroundPainter
from eval.simulate.lens_render import frame_renderer
from eval.simulate.spec import VEHICLE_DIMS_M, FlightSpec, SimulationError
from eval.simulate.sprites import Sprite, procedural_sprite
from eval.simulate.traffic import place_traffic, speeding_events
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

MAX_TEXTURE_PX = 4096
GROUND_MARGIN_M = 25.0  # ground painted beyond what the camera ever sees
# ground painted beyond what a distorting lens sees; within GROUND_MARGIN_M the world (ground and
# traffic) of a flight with a lens is the one of the same flight without it
LENS_MARGIN_M = 10.0
MAX_GROUND_M = 3000.0


class Scene:
    """A fully specified flight: camera path, ground layer, roads and vehicles.

    Building a scene is deterministic by ``spec.seed`` (streams ``[seed, 1]`` world, ``[seed, 2]``
    traffic, ``[seed, 3]`` procedural sprites, ``[seed, 4, k]`` noise of frame ``k``); frames can be
    rendered in any order.
    """

    def __init__(self, spec: FlightSpec, sprites: Sequence[Sprite] | None = None):
        self.spec = spec
        layout = _layout(spec)
        self.camera, self.bounds, self.centre = layout.camera, layout.bounds, layout.centre
        self.roads = layout.roads
        crossings, rng_world = layout.crossings, layout.rng_world
        rng_traffic = np.random.default_rng([spec.seed, 2])
        rng_sprites = np.random.default_rng([spec.seed, 3])
        self.res = _texture_resolution(self.camera, self.bounds)
        self.ground = GroundPainter(self.bounds, self.res, rng_world).paint(self.roads, crossings)

        procedural_pool = {c: [procedural_sprite(c, rng_sprites) for _ in range(6)] for c in VEHICLE_DIMS_M}
        self.vehicles = place_traffic(
            spec, self.roads, self.camera, rng_traffic, procedural_pool, list(sprites or [])
        )
        self._renderer = frame_renderer(spec, self.camera, self.ground, self.vehicles, self.res)

    @property
    def times(self) -> np.ndarray:
        """Time (s) of every frame."""
        return self.camera.times

    def world_to_image(self, k: int) -> np.ndarray:
        """3x3 homography: world metres -> image pixels of frame ``k`` (0-based)."""
        return self.camera.world_to_image(k)

    def telemetry(self) -> list[Telemetry]:
        return self.camera.telemetry()

    def render(
        self, k: int, rng: np.random.Generator | None = None
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """BGR image of frame ``k`` and its ground-truth rows (one dict per visible vehicle)."""
        return self._renderer.render(k, rng)

    def road_mask(self, k: int) -> np.ndarray:
        """Exact road mask (uint8, 255 = road) of frame ``k``."""
        return self._renderer.road_mask(k)

    def gt_violations(self, visible: dict[int, np.ndarray]) -> list[dict[str, Any]]:
        """Speeding events: speed above the limit for at least ``min_violation_s`` while visible."""
        return speeding_events(self.spec, self.vehicles, self.camera.times, visible)


@dataclass(frozen=True, slots=True, eq=False)
class _Layout:
    camera: CameraPath
    bounds: tuple[float, float, float, float]
    centre: np.ndarray
    roads: list[Road]
    crossings: list[np.ndarray]
    rng_world: np.random.Generator  # the world stream, where the ground painter goes on with it


def _layout(spec: FlightSpec) -> _Layout:
    """The camera path and the roads of ``spec``, from the world stream ``[seed, 1]``."""
    camera = CameraPath(spec)
    rng_world = np.random.default_rng([spec.seed, 1])
    centre = camera.frame_centre(spec.n_frames // 2)
    heading = spec.road_heading_deg if spec.road_heading_deg is not None else float(rng_world.uniform(0, 180))
    if spec.road_grade_pct:  # the ground a plane through the road's centre point, at the take-off level
        uphill = heading if spec.grade_heading_deg is None else spec.grade_heading_deg
        camera = CameraPath(spec, GroundSurface.graded(centre, uphill, spec.road_grade_pct))
    bounds = _ground_bounds(camera)
    roads, crossings = road_layout(spec, bounds, centre, heading, rng_world)
    return _Layout(camera, bounds, centre, roads, crossings, rng_world)


def scene_roads(spec: FlightSpec) -> tuple[CameraPath, list[Road]]:
    """The camera path and the roads of the flight of ``spec``, exactly as :class:`Scene` has them,
    without painting the ground or placing the traffic (milliseconds, not seconds)."""
    layout = _layout(spec)
    return layout.camera, layout.roads


def _ground_bounds(camera: CameraPath) -> tuple[float, float, float, float]:
    """World region (x0, y0, x1, y1) seen over the flight (25 sampled frames), plus a margin. The
    pinhole view's: a lens that sees within its margin (``LENS_MARGIN_M`` short of its edge) leaves
    the world (ground and traffic) the flight without the lens has; one that sees further widens it."""
    spec = camera.spec
    n, w, h = spec.n_frames, spec.width, spec.height
    border = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1], [w / 2, 0], [w / 2, h - 1]], float)
    frames = np.unique(np.linspace(0, n - 1, min(n, 25)).astype(int))
    pts = np.vstack([camera.image_to_world(int(k), border) for k in frames])
    x0, y0 = pts.min(0) - GROUND_MARGIN_M
    x1, y1 = pts.max(0) + GROUND_MARGIN_M
    if camera.distorts:  # a barrel lens sees beyond the pinhole border: paint wider only if it must
        seen = np.vstack([camera.image_to_world(int(k), camera.sensor_border()) for k in frames])
        lo, hi = seen.min(0) - LENS_MARGIN_M, seen.max(0) + LENS_MARGIN_M
        if (lo < [x0, y0]).any() or (hi > [x1, y1]).any():
            wider = max(float(np.max([x0, y0] - lo)), float(np.max(hi - [x1, y1])), 0.0)
            log.info("the lens sees beyond the pinhole view: the ground is painted up to %.0f m wider", wider)
            x0, y0 = np.minimum([x0, y0], lo)
            x1, y1 = np.maximum([x1, y1], hi)
    if max(x1 - x0, y1 - y0) > MAX_GROUND_M:
        raise SimulationError("the flight covers more than 3 km of ground; shorten it or steepen the pitch")
    return float(x0), float(y0), float(x1), float(y1)


def _texture_resolution(camera: CameraPath, bounds: tuple[float, float, float, float]) -> float:
    """Metres per texture pixel: finer than the finest ground sampling distance in view (image
    centre and bottom rows of the first, middle and last frame), within ``MAX_TEXTURE_PX``."""
    spec = camera.spec
    n, w, h = spec.n_frames, spec.width, spec.height
    frames = (0, n // 2, n - 1)
    gsd_min = min(camera.gsd_at(k, (w / 2, h - 1)) for k in frames)
    gsd_min = min(gsd_min, min(camera.gsd_at(k, (w / 2, h / 2)) for k in frames))
    x0, y0, x1, y1 = bounds
    res = max(0.75 * gsd_min, 0.02)
    return max(res, max(x1 - x0, y1 - y0) / MAX_TEXTURE_PX)
