"""Realistic vehicle sizes and vehicles as solids in the simulator (``FlightSpec.vehicle_sizes``,
``suv_share``, ``van_as_car_share``, ``vehicle_height``): the sizes follow the documented table, the
labels are what a labeller gives, a solid's box is the one an independent camera model
(``cv2.projectPoints``) puts around its corners, and a flight without the options renders exactly as
before."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math

import cv2
import numpy as np
import pytest

from eval.simulate import FlightSpec, Scene, SimulationError, procedural_sprite, scene_roads
from eval.simulate.body3d import CABIN_INSET, CABIN_INSETS, GROUND_CLEARANCE_M, parts
from eval.simulate.geometry import compass_dir
from eval.simulate.lens_render import SensorRenderer, frame_renderer
from eval.simulate.render import FrameRenderer
from eval.simulate.spec import NOMINAL_HEIGHT_M, SIZE_CLIP_SIGMA, VEHICLE_BODIES
from eval.simulate.traffic import Vehicle, _VehicleSampler

TINY = {"width": 320, "height": 240, "duration_s": 0.2, "fps": 10.0, "noise_sigma": 0.0, "mask_every": 0}
SOLID = {"vehicle_height": True}
REALISTIC = {"vehicle_sizes": "realistic"}


@functools.cache
def _scene(**changes) -> Scene:
    return Scene(FlightSpec(**(TINY | changes)))


def _sampler(**changes) -> _VehicleSampler:
    """The traffic sampler of a flight (its camera and roads only: no ground painted)."""
    spec = FlightSpec(**(TINY | {"duration_s": 1.0} | changes))
    camera, roads = scene_roads(spec)
    rng = np.random.default_rng(0)
    pool = {c: [procedural_sprite(c, rng)] for c in ("car", "van", "truck", "bus", "motorcycle")}
    return _VehicleSampler(spec, roads, camera, pool, [])


def _draws(n: int, seed: int = 1, **changes) -> list[Vehicle]:
    sampler, rng = _sampler(**changes), np.random.default_rng(seed)
    drawn = (sampler.draw(i, rng) for i in range(n))
    return [v for v in drawn if v is not None]


# ---- sizes and labels ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "changes"),
    [
        ("car", {"class_mix": {"car": 1.0}, "suv_share": 0.0}),
        ("suv", {"class_mix": {"car": 1.0}, "suv_share": 1.0}),
        ("van", {"class_mix": {"van": 1.0}}),
        ("truck", {"class_mix": {"truck": 1.0}}),
        ("bus", {"class_mix": {"bus": 1.0}}),
        ("motorcycle", {"class_mix": {"motorcycle": 1.0}}),
    ],
)
def test_realistic_sizes_follow_the_table(body: str, changes: dict) -> None:
    vehicles = _draws(1500, **REALISTIC, **changes)
    assert len(vehicles) > 400 and {v.body for v in vehicles} == {body}
    table = VEHICLE_BODIES[body]
    for name, (mean, sigma) in (
        ("length_m", table.length_m),
        ("width_m", table.width_m),
        ("height_m", table.height_m),
    ):
        x = np.array([getattr(v, name) for v in vehicles])
        # 5 standard errors of the mean; the spread of a normal clipped at 2.5 sigma is 0.989 sigma,
        # its sample's within a few percent (standard error 1 / sqrt(2n))
        assert abs(x.mean() - mean) < 5 * sigma / math.sqrt(len(x)), name
        assert 0.90 * sigma < x.std() < 1.06 * sigma, name
        assert (
            x.min() >= mean - SIZE_CLIP_SIGMA * sigma - 1e-9
            and x.max() <= mean + SIZE_CLIP_SIGMA * sigma + 1e-9
        )


@pytest.mark.parametrize(
    ("changes", "suvs", "vans_as_cars"),
    [
        ({**REALISTIC, "suv_share": 0.3, "van_as_car_share": 0.3}, 0.3, 0.3),
        ({**REALISTIC, "suv_share": 0.0, "van_as_car_share": 0.0}, 0.0, 0.0),
        ({"suv_share": 0.5, "van_as_car_share": 0.5}, 0.0, 0.5),  # nominal sizes: no SUVs
    ],
)
def test_suvs_and_a_share_of_vans_are_labelled_car(changes: dict, suvs: float, vans_as_cars: float) -> None:
    vehicles = _draws(1200, **changes, class_mix={"car": 1.0, "van": 1.0})
    cars = [v for v in vehicles if v.body in ("car", "suv")]
    vans = [v for v in vehicles if v.body == "van"]
    assert all(v.class_name == "car" for v in cars)
    assert {v.class_name for v in vans} <= {"car", "van"}
    # binomial shares of a few hundred draws: within 0.08 (about 3 standard errors)
    assert abs(np.mean([v.body == "suv" for v in cars]) - suvs) < 0.08
    assert abs(np.mean([v.class_name == "car" for v in vans]) - vans_as_cars) < 0.08


@pytest.mark.parametrize(
    ("changes", "heights"),
    [
        ({}, "zero"),  # the defaults: flat, body = label, height 0
        (SOLID, "nominal"),  # solids of nominal size: the class's nominal height
        (REALISTIC, "drawn"),  # realistic sizes draw the height even when drawn flat
    ],
)
def test_vehicles_json_carries_body_and_height(changes: dict, heights: str) -> None:
    for v in _scene(n_vehicles=6, **changes).vehicles:
        d = v.to_dict()
        assert d["body"] == v.body and d["height_m"] == round(v.height_m, 3)
        assert {"id", "class_name", "class_id", "length_m", "width_m", "real_sprite"} <= set(d)
        if heights == "zero":
            assert (v.body, v.height_m) == (v.class_name, 0.0)
        elif heights == "nominal":
            assert v.height_m == NOMINAL_HEIGHT_M[v.body]
        else:
            assert v.height_m > 0.5


# ---- the options off: the flight as it was ----------------------------------------------------------

# sha256 of the frames and ground-truth rows of two small flights, rendered before these options existed
BEFORE = {
    "nadir": "9ad0e950ac112c4ef88de3fa3144985f98a302c81c75a9f1eaea2a0c7d0d9a24",
    "oblique": "0424f25bf651c67c0fcfa23b0712825bc7b9d1ff7daf5d080a06bd615c05d63d",
}
OBLIQUE = {"pitch_deg": -45.0, "altitude_m": 40.0, "layout": "intersection"}
DEFAULTS = {
    "vehicle_sizes": "nominal",
    "suv_share": 0.3,
    "van_as_car_share": 0.0,
    "vehicle_height": False,
    "road_grade_pct": 0.0,
}


@pytest.mark.parametrize(("name", "changes"), [("nadir", {}), ("oblique", OBLIQUE)])
@pytest.mark.parametrize("explicit", [False, True])
def test_without_the_options_a_flight_renders_as_before(name: str, changes: dict, explicit: bool) -> None:
    spec = FlightSpec(
        seed=7,
        width=320,
        height=240,
        duration_s=0.2,
        fps=10.0,
        n_vehicles=10,
        **changes,
        **(DEFAULTS if explicit else {}),
    )
    scene = Scene(spec)
    digest = hashlib.sha256()
    for k in range(spec.n_frames):
        image, rows = scene.render(k)
        digest.update(image.tobytes())
        digest.update(json.dumps(rows, sort_keys=True).encode())
    assert digest.hexdigest() == BEFORE[name]


# ---- solids: boxes and pixels -------------------------------------------------------------------------


def _one_vehicle(scene: Scene, length: float, width: float, height: float, along: bool = True) -> Vehicle:
    """A still car at the centre of frame 0, heading along the view (``along``) or across it."""
    n = scene.spec.n_frames
    yaw = float(scene.camera.yaw[0]) + (0.0 if along else 90.0)
    return Vehicle(
        id=1,
        class_name="car",
        length_m=length,
        width_m=width,
        road=0,
        lane=0,
        s0=0.0,
        v0_mps=0.0,
        accel_mps2=0.0,
        v_lo_mps=0.0,
        v_hi_mps=0.0,
        speeding=False,
        sprite=procedural_sprite("car", np.random.default_rng(3)),
        positions=np.tile(scene.camera.frame_centre(0), (n, 1)),
        headings=np.tile(compass_dir(yaw), (n, 1)),
        speeds_mps=np.zeros(n),
        body="car",
        height_m=height,
    )


def _projected(scene: Scene, v: Vehicle, k: int, lens: tuple | None = None) -> np.ndarray:
    """Every corner of ``v``'s parts in frame ``k`` by OpenCV's camera model: the drone at its
    position and altitude, its optical axis ``pitch`` below the horizon along its yaw."""
    spec, cam = scene.spec, scene.camera
    psi, p = math.radians(cam.yaw[k]), math.radians(spec.pitch_deg)
    forward, right, up = (
        np.array([math.sin(psi), math.cos(psi), 0.0]),
        np.array([math.cos(psi), -math.sin(psi), 0.0]),
        np.array([0.0, 0.0, 1.0]),
    )
    axis = math.cos(p) * forward + math.sin(p) * up
    rot = np.array([right, np.cross(axis, right), axis])  # camera x right, y down the image, z the axis
    eye = np.array([*cam.drone_xy[k], cam.altitude[k]])
    pts = np.vstack(
        [
            np.column_stack([q.corners, np.full(4, z)])
            for q in parts(v.length_m, v.width_m, v.height_m, v.positions[k], v.headings[k], v.body)
            for z in (q.z_lo, q.z_hi)
        ]
    )
    i = cam.intrinsics
    matrix = np.array([[i.fx, 0.0, i.cx], [0.0, i.fy, i.cy], [0.0, 0.0, 1.0]])
    uv, _ = cv2.projectPoints(pts, cv2.Rodrigues(rot)[0], -rot @ eye, matrix, np.array(lens or (0.0,) * 5))
    return uv.reshape(-1, 2)


def _box(scene: Scene, v: Vehicle, solid: bool) -> np.ndarray:
    """x0, y0, x1, y1 of ``v``'s ground-truth row in frame 0, drawn as a solid or flat."""
    spec = scene.spec.replace(vehicle_height=solid)
    _image, rows = FrameRenderer(spec, scene.camera, scene.ground, [v], scene.res).render(0)
    (row,) = rows
    x, y, w, h = row["xywh"]
    return np.array([x, y, x + w, y + h])


@pytest.mark.parametrize("height", [1.5, 3.0])
def test_a_nadir_box_barely_grows_with_height(height: float) -> None:
    scene = _scene(altitude_m=60.0, pitch_deg=-90.0, n_vehicles=0)
    v = _one_vehicle(scene, 4.4, 1.8, height)
    flat, solid = _box(scene, v, False), _box(scene, v, True)
    uv = _projected(scene, v, 0)
    assert np.allclose(solid, [*uv.min(0), *uv.max(0)], atol=0.02)
    # straight below, a solid is its lower body seen from 60 - 0.55 h m: at most 3 % larger
    grow = (solid[2:] - solid[:2]) / (flat[2:] - flat[:2])
    assert (grow >= 1.0).all() and (grow < 1.0 + 0.55 * height / (60.0 - 0.55 * height) + 0.002).all()


@pytest.mark.parametrize(("length", "height"), [(4.4, 1.5), (12.0, 3.1)])
def test_an_oblique_box_grows_by_the_height_along_the_view(length: float, height: float) -> None:
    scene = _scene(altitude_m=60.0, pitch_deg=-45.0, n_vehicles=0)
    v = _one_vehicle(scene, length, 2.0, height)
    flat, solid = _box(scene, v, False), _box(scene, v, True)
    uv = _projected(scene, v, 0)
    assert np.allclose(solid, [*uv.min(0), *uv.max(0)], atol=0.02)  # the box of every corner

    def ground_extent(box: np.ndarray) -> float:
        u = (box[0] + box[2]) / 2
        near, far = scene.camera.image_to_world(0, np.array([[u, box[3]], [u, box[1]]]))
        return float(np.linalg.norm(far - near))

    growth = ground_extent(solid) - ground_extent(flat)
    # about h * cot(45 deg) = h (A = 60 m). A point h up, d from the drone's nadir, is seen where the
    # ground d * A / (A - h) away is: the roof's far edge, d = A + L / 2 at most (cot <= 1 + L / 2A),
    # moves at most h * (1 + L / 2A) * A / (A - h), less the cabin's inset (a car's 20 % of L on each
    # end, a bus's 3 %); the near edge is the lower body's bottom, 0.25 m up, which moves it at most
    # 0.25 m away
    inset = CABIN_INSETS.get(v.body, CABIN_INSET)[0]
    assert height - GROUND_CLEARANCE_M - inset * length < growth
    assert growth < height * (1 + length / 120.0) * 60.0 / (60.0 - height)


def test_a_solid_is_drawn_where_its_box_is() -> None:
    spec = {"altitude_m": 40.0, "pitch_deg": -50.0, "n_vehicles": 8}
    flat_scene, solid_scene = _scene(**spec), _scene(**spec, **SOLID)
    assert [v.to_dict() | {"height_m": 0.0} for v in flat_scene.vehicles] == [
        v.to_dict() | {"height_m": 0.0} for v in solid_scene.vehicles
    ]  # nominal sizes: the same traffic
    (flat, flat_rows), (solid, solid_rows) = flat_scene.render(1), solid_scene.render(1)
    assert {r["id"] for r in flat_rows} == {r["id"] for r in solid_rows}
    for r in solid_rows:  # the truth on the ground stays exact
        (r0,) = [q for q in flat_rows if q["id"] == r["id"]]
        assert (r["speed_kmh"], r["ground_xy"]) == (r0["speed_kmh"], r0["ground_xy"])
    diff = np.abs(flat.astype(int) - solid).max(axis=2)
    inside = np.zeros(diff.shape, bool)
    for r in flat_rows + solid_rows:
        x, y, w, h = r["xywh"]
        inside[max(0, int(y) - 4) : int(y + h) + 5, max(0, int(x) - 4) : int(x + w) + 5] = True  # + shadow
    assert not diff[~inside].any()  # the ground is untouched
    for r in solid_rows:
        x, y, w, h = (int(round(a)) for a in r["xywh"])
        assert (diff[y : y + h, x : x + w] > 4).mean() > 0.2  # each vehicle looks different (dark ones too)


@pytest.mark.parametrize("pitch", [-90.0, -50.0])
def test_the_sensor_path_draws_solids_as_the_pinhole_one(pitch: float) -> None:
    scene = _scene(altitude_m=40.0, pitch_deg=pitch, n_vehicles=8, **SOLID, **REALISTIC)
    sensor = SensorRenderer(scene.spec, scene.camera, scene.ground, scene.vehicles, scene.res)
    (a, rows_a), (b, rows_b) = scene.render(1), sensor.render(1)
    diff = np.abs(a.astype(int) - b)
    assert rows_a == rows_b and diff.max() <= 1 and diff.mean() < 0.01


def test_a_solid_through_a_lens() -> None:
    barrel = (-0.1, 0.0, 0.0, 0.0, 0.0)
    scene = _scene(altitude_m=60.0, pitch_deg=-45.0, n_vehicles=0)
    v = _one_vehicle(scene, 4.4, 1.8, 1.5)
    v = dataclasses.replace(v, positions=v.positions + [12.0, 5.0])  # off centre: the lens bends it
    spec = scene.spec.replace(vehicle_height=True, lens_distortion=barrel)
    renderer = frame_renderer(spec, type(scene.camera)(spec), scene.ground, [v], scene.res)
    assert isinstance(renderer, SensorRenderer)
    image, (row,) = renderer.render(0)
    uv = _projected(scene, v, 0, barrel)
    x, y, w, h = row["xywh"]
    assert np.allclose([x, y, x + w, y + h], [*uv.min(0), *uv.max(0)], atol=0.02)


# ---- validation ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"suv_share": -0.1}, "suv_share"),
        ({"suv_share": 1.5}, "suv_share"),
        ({"van_as_car_share": -0.01}, "van_as_car_share"),
        ({"van_as_car_share": 1.01}, "van_as_car_share"),
        ({"vehicle_sizes": "huge"}, "vehicle_sizes"),
        ({"vehicle_height": "tall"}, "vehicle_height"),
    ],
)
def test_invalid_options_are_user_errors(changes: dict, field: str) -> None:
    with pytest.raises(SimulationError, match=f"^invalid flight spec: {field}: "):
        FlightSpec(**changes)


def test_the_options_go_through_flight_yaml() -> None:
    spec = FlightSpec(**TINY, **REALISTIC, **SOLID, suv_share=0.4, van_as_car_share=0.3)
    assert FlightSpec.from_dict(spec.to_dict()) == spec
    assert FlightSpec.from_dict(FlightSpec(**TINY).to_dict()).vehicle_sizes == "nominal"
