"""Synthetic drone flights over procedural roads, with exact ground truth.

A flight is a ground plane in metres (X east, Y north) carrying a procedural texture (grass, soil,
buildings, trees, asphalt roads with lane markings) and vehicles that drive along lane centre-lines
with known speeds and accelerations. A drone at a chosen altitude drifts, yaws and looks down through
a gimbal at a chosen pitch with the intrinsics of a real camera profile. Each frame is rendered by
warping the pre-rendered ground layer with :func:`pipelines.geometry.ground_to_image_homography`
composed with the drone's world -> camera-ground transform, then projecting vehicle sprites
(procedural, or real aerial crops cut from YOLO-labelled images) through the same homography. A
flight may see through a distorting lens (``lens_distortion``: OpenCV's k1, k2, p1, p2, k3 with the
flight's intrinsics) and a rolling shutter (``readout_ms``: row ``v`` is read ``(v / height - 1/2) *
readout`` after the frame's timestamp); then every pixel is remapped from the ground the pinhole ray
of its undistorted position meets at its row's time, and each vehicle is drawn, distorted, where it
is when its centre's row is read (``lens_render``). Without either (the default) a flight renders
exactly as it always did. The road may be graded (``road_grade_pct``): the ground is then a plane
level with the take-off point where the camera looks mid-flight (:class:`GroundSurface`), every
homography is that plane's, the vehicles' solids stand on it and their true speed is along it.

Outputs of :func:`simulate_flight` (one folder per flight)::

    video.mp4            H.264, constant frame rate (pts = frame index)
    video.SRT            DJI <font>-style telemetry (altitude, gimbal pitch/yaw, focal length, GPS)
    gt/gt.txt            MOTChallenge: frame(1-based),id,x,y,w,h,1,class,visibility (boxes of the
                         drawn vehicles: through the lens, at their rows' time)
    gt/speeds.csv        frame,time_s,id,speed_kmh,ground_x_m,ground_y_m (exact at the frame's time)
    gt/violations.json   ground-truth speeding events for the spec's limit and minimum duration
    gt/vehicles.json     per-vehicle truth (class, size, lane, initial speed, acceleration)
    gt/camera.csv        frame(1-based),time_s,h11..h33: exact world (m) -> image (px) homography
                         of the pinhole camera (before the lens) at the frame's (middle row's) time
    road_mask/NNNNNN.png exact road masks (255 = road) every ``mask_every`` frames (0-based index),
                         through the lens and shutter as the video
    seqinfo.ini          MOTChallenge sequence info (+ altitude, pitch, camera)
    flight.yaml          the spec; ``FlightSpec.from_yaml`` reads it back and reproduces the flight

MOT class ids of simulated vehicles: see :data:`SIM_CLASS_IDS`. Everything is deterministic by seed.

Modules, from the bottom up: ``spec`` (FlightSpec, class tables), ``geometry`` (polylines, roads,
layouts), ``camera`` (the drone's path and homographies), ``ground`` (the painted ground layer),
``sprites`` (vehicle top views), ``traffic`` (vehicles and their motion, ground-truth violations),
``render`` (one frame and its ground truth), ``lens_render`` (the same through a lens and a rolling
shutter), ``scene`` (all of it for one spec), ``writers`` (the output files) and ``flight``
(:func:`simulate_flight`); ``telemetry_errors`` derives a flight whose
telemetry has a real drone's errors (the road's level against the take-off point, the barometer's
bias and drift, the gimbal's pitch bias, delay and rate) from a simulated one, without rendering it
again (:func:`derive_flight`).

It imports the engine's geometry, camera profiles and SRT writer (``pipelines``), so that a flight
is seen exactly as the engine models it; ``airpatrol simulate``, ``airpatrol demo``, the evaluator's
benchmarks and the tests import it, never the engine or the server.
"""

from eval.simulate.camera import CameraPath
from eval.simulate.flight import SimulatedFlight, iter_frames, simulate_flight
from eval.simulate.geometry import GroundSurface, Polyline, Road, world_to_camera_ground
from eval.simulate.ground import GroundLayer
from eval.simulate.scene import MAX_TEXTURE_PX, Scene, scene_roads
from eval.simulate.spec import (
    LAYOUTS,
    SIM_CLASS_IDS,
    SIM_CLASS_NAMES,
    VEHICLE_DIMS_M,
    FlightSpec,
    SimulationError,
)
from eval.simulate.sprites import AERIAL_CARS_CLASSES, Sprite, load_sprite_crops, procedural_sprite
from eval.simulate.telemetry_errors import (
    ERRORS_FILE,
    FLIGHT_CONFIG,
    ErrorPrior,
    LaserSim,
    TelemetryErrors,
    derive_flight,
    read_errors,
)
from eval.simulate.traffic import Vehicle, kinematics

__all__ = [
    "AERIAL_CARS_CLASSES",
    "ERRORS_FILE",
    "FLIGHT_CONFIG",
    "LAYOUTS",
    "MAX_TEXTURE_PX",
    "SIM_CLASS_IDS",
    "SIM_CLASS_NAMES",
    "VEHICLE_DIMS_M",
    "CameraPath",
    "ErrorPrior",
    "FlightSpec",
    "LaserSim",
    "GroundLayer",
    "GroundSurface",
    "Polyline",
    "Road",
    "Scene",
    "SimulatedFlight",
    "SimulationError",
    "Sprite",
    "TelemetryErrors",
    "Vehicle",
    "derive_flight",
    "iter_frames",
    "kinematics",
    "load_sprite_crops",
    "procedural_sprite",
    "read_errors",
    "scene_roads",
    "simulate_flight",
    "world_to_camera_ground",
]
