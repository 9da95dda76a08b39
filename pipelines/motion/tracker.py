"""Multi-object tracking in ego-motion-compensated (stabilised) coordinates.

ByteTrack associates boxes by IoU with a constant-velocity Kalman prediction. From a drone that
pans or rotates, a vehicle's image box can jump further than its own size between frames, so plain
IoU association breaks. Here every detection is mapped into a stabilised *reference* frame first:

* ``H_ref<-cur`` (current frame -> reference) is accumulated from the per-frame ego-motion
  homographies (``EgoMotion.homography`` maps previous -> current): ``H_ref<-cur = H_ref<-prev @
  inv(H_cur<-prev)``. The reference is the first frame.
* A box is mapped by its centre (through the homography) and its size (times the local areal scale
  ``sqrt|det J|`` of the homography at the centre). This keeps boxes compact under accumulated
  rotation (mapping the four corners and taking their hull would inflate them) and is consistent
  from frame to frame, which is all IoU association needs.
* ByteTrack runs on the reference boxes; the output is the caller's detections (current image
  coordinates, ``data`` preserved, input order) with ``tracker_id`` set (>= 1). Untracked boxes
  (not yet confirmed) are left out.
* When the accumulated homography becomes ill-conditioned (zoom drift, shear, strong perspective,
  a non-finite or flipped map) the reference is re-anchored to the current frame and every live
  track's Kalman state (position, size, velocity, covariance) is carried into the new reference,
  so ids survive the re-anchoring.

Backend: ``trackers.ByteTrackTracker`` is primary; ``sv.ByteTrack`` is the fallback when the
``trackers`` package is missing (``sv.ByteTrack`` is deprecated and gone from supervision 0.31).
Measured on the 2-core VM (this module's mapping included, median ms/frame): 50 synthetic boxes
1.9 (trackers) vs 9.8 (supervision); UAVDT M1303 ground-truth boxes (27/frame) 1.5 vs 4.8; both keep
the same ids in the tests here.

Both are driven with sv.ByteTrack's semantics, which are what :class:`TrackerConfig`'s names mean.
The ``trackers`` defaults differ and are overridden:

- ``track_activation_threshold`` t: sv splits high/low confidence at t and starts a track from an
  unmatched detection with confidence >= t + 0.1. trackers: ``high_conf_det_threshold = t`` and
  ``track_activation_threshold = t + 0.1`` (its own defaults are 0.6 and 0.7, which would start no
  track at all from a COCO model's typical 0.3-0.5 confidences on drone footage).
- ``minimum_matching_threshold`` m: sv accepts a match when 1 - IoU*score <= m. trackers:
  ``minimum_iou_threshold = 1 - m`` (plain IoU; its default 0.1 corresponds to m = 0.9).
- ``lost_track_buffer``, ``frame_rate``: same meaning in both.
- ``minimum_consecutive_frames``: same meaning; trackers' default is 2, ours (sv's) is 1. With
  trackers a new track reports its id from its second frame; sv confirms tracks of the very first
  frame at once.
- ids: trackers counts from 0, sv from 1; the output is shifted so both start at 1.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np
import supervision as sv

from pipelines.config import TrackerConfig
from pipelines.geometry import apply_homography
from pipelines.types import PROPAGATED_KEY, EgoMotion

log = logging.getLogger(__name__)

_INDEX_KEY = "_airpatrol_det_index"

# Re-anchor when the accumulated current->reference map leaves these bounds.
MAX_ABS_LOG_SCALE = float(np.log(2.0))  # areal scale outside [1/2, 2]
MAX_ANISOTROPY = 1.25  # ratio of the singular values of the local Jacobian
MAX_SCALE_VARIATION = 1.25  # max/min local scale over the image (accumulated perspective)
DEFAULT_EXTENT = (1920.0, 1080.0)  # until detections tell us the image size


# --------------------------------------------------------------------------------------------
# geometry (pure)
# --------------------------------------------------------------------------------------------


def jacobians(h: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """(N, 2, 2) Jacobians of the homography at (N, 2) points."""
    h = np.asarray(h, dtype=np.float64)
    pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
    w = pts @ h[2, :2] + h[2, 2]
    mapped = apply_homography(h, pts)
    # d(u)/d(x) = (h[0:2, 0:2] - mapped ⊗ h[2, 0:2]) / w
    return (h[None, :2, :2] - mapped[:, :, None] * h[None, 2, None, :2]) / w[:, None, None]


def map_boxes(h: np.ndarray, xyxy: np.ndarray) -> np.ndarray:
    """Boxes through a homography: centre mapped, width/height times the local scale sqrt|det J|."""
    b = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    if len(b) == 0:
        return b.copy()
    c = 0.5 * (b[:, :2] + b[:, 2:])
    half = 0.5 * (b[:, 2:] - b[:, :2])
    s = np.sqrt(np.abs(np.linalg.det(jacobians(h, c))))
    mc = apply_homography(h, c)
    return np.hstack([mc - half * s[:, None], mc + half * s[:, None]])


def needs_reanchor(h_cur_to_ref: np.ndarray, extent: tuple[float, float]) -> str | None:
    """Why the accumulated map is no longer a good stabilisation (``None`` when it is fine)."""
    h = np.asarray(h_cur_to_ref, dtype=np.float64)
    if not np.all(np.isfinite(h)) or abs(h[2, 2]) < 1e-12:
        return "degenerate homography"
    h = h / h[2, 2]
    w, ht = extent
    probe = np.array([[0, 0], [w, 0], [w, ht], [0, ht], [w / 2, ht / 2]], dtype=np.float64)
    if np.any(probe @ h[2, :2] + 1.0 < 0.5):
        return "image corners map towards the horizon"
    jac = jacobians(h, probe)
    dets = np.linalg.det(jac)
    if np.any(dets <= 0):
        return "orientation flip"
    scales = np.sqrt(dets)
    if abs(np.log(scales[-1])) > MAX_ABS_LOG_SCALE:
        return f"zoom drift (scale {scales[-1]:.2f})"
    sv_ = np.linalg.svd(jac[-1], compute_uv=False)
    if sv_[0] / sv_[1] > MAX_ANISOTROPY:
        return f"shear (anisotropy {sv_[0] / sv_[1]:.2f})"
    if scales.max() / scales.min() > MAX_SCALE_VARIATION:
        return f"perspective drift (scale {scales.min():.2f}..{scales.max():.2f})"
    return None


# --------------------------------------------------------------------------------------------
# backends
# --------------------------------------------------------------------------------------------


def frames_between(t: float, last: float | None, frame_rate: float) -> float:
    """Nominal frames from ``last`` to ``t`` (1.0 without a previous time): more than one where
    frames were skipped or dropped in between. Pure."""
    return 1.0 if last is None else (t - last) * float(frame_rate)


def gap_buffer(gap_frames: float, per_frame: float, most: float) -> float:
    """The buffer ratio (share of a box's size added on each side before IoU) for a step of
    ``gap_frames`` nominal frames: none for one frame, ``per_frame`` more for each frame skipped or
    dropped, at most ``most``. Pure."""
    if not np.isfinite(gap_frames) or gap_frames <= 1.5:
        return 0.0
    return float(min(most, per_frame * (gap_frames - 1.0)))


def spawn_threshold(cfg: TrackerConfig) -> float:
    """The confidence a detection needs to start a track (sv.ByteTrack's ``t + 0.1``)."""
    t = float(cfg.track_activation_threshold)
    return t + 0.1 if t + 0.1 <= 1.0 else t


def make_backend(cfg: TrackerConfig, prefer: str = "trackers") -> tuple[str, Any]:
    """``(name, tracker)``: ByteTrack configured with sv.ByteTrack semantics (see module doc).
    ``prefer="trackers"`` (default, ~3-5x faster) or ``"supervision"``."""
    t = float(cfg.track_activation_threshold)
    spawn = spawn_threshold(cfg)
    if prefer == "trackers":
        try:
            from trackers import ByteTrackTracker
            from trackers.utils.iou import BIoU
        except ImportError:
            log.warning("'trackers' package not installed; falling back to supervision's ByteTrack")
        else:
            return "trackers", ByteTrackTracker(
                iou=BIoU(buffer_ratio=0.0),  # buffered IoU (C-BIoU): Tracker sets it per update
                lost_track_buffer=cfg.lost_track_buffer,
                frame_rate=cfg.frame_rate,
                track_activation_threshold=spawn,
                minimum_consecutive_frames=cfg.minimum_consecutive_frames,
                minimum_iou_threshold=max(1e-6, 1.0 - cfg.minimum_matching_threshold),
                high_conf_det_threshold=t,
            )
    if not hasattr(sv, "ByteTrack"):
        raise ImportError("no ByteTrack available: install 'trackers' (or supervision < 0.31)")
    with warnings.catch_warnings():  # its deprecation notice: we only get here as the fallback
        warnings.simplefilter("ignore", FutureWarning)
        return "supervision", sv.ByteTrack(
            track_activation_threshold=t,
            lost_track_buffer=cfg.lost_track_buffer,
            minimum_matching_threshold=cfg.minimum_matching_threshold,
            frame_rate=cfg.frame_rate,
            minimum_consecutive_frames=cfg.minimum_consecutive_frames,
        )


def _warp_xyxy_kalman(states: np.ndarray, covs: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Carry XYXY constant-velocity Kalman states [x1 y1 x2 y2 vx1 vy1 vx2 vy2] through ``g``.

    Centre through the homography, size and size-rate times the local scale, centre velocity
    through the local Jacobian; covariance through the same (linearised) map.
    """
    x = states.reshape(-1, 8).astype(np.float64)
    c = 0.5 * (x[:, 0:2] + x[:, 2:4])
    jac = jacobians(g, c)
    s = np.sqrt(np.abs(np.linalg.det(jac)))
    # corners <-> (centre, half size): T maps [x1 y1 x2 y2] -> [cx cy hw hh]
    t = np.array([[0.5, 0, 0.5, 0], [0, 0.5, 0, 0.5], [-0.5, 0, 0.5, 0], [0, -0.5, 0, 0.5]])
    t_inv = np.linalg.inv(t)
    out = np.empty_like(x)
    new_covs = np.empty_like(covs, dtype=np.float64)
    mapped_c = apply_homography(g, c)
    for i in range(len(x)):
        m4 = np.zeros((4, 4))
        m4[:2, :2] = jac[i]
        m4[2:, 2:] = s[i] * np.eye(2)
        lin = t_inv @ m4 @ t  # linear part on corner coordinates
        pos = t @ x[i, :4]
        pos_new = np.concatenate([mapped_c[i], s[i] * pos[2:]])
        out[i, :4] = t_inv @ pos_new
        out[i, 4:] = lin @ x[i, 4:]
        m8 = np.zeros((8, 8))
        m8[:4, :4] = lin
        m8[4:, 4:] = lin
        new_covs[i] = m8 @ covs[i] @ m8.T
    return out, new_covs


def _warp_xyah_kalman(mean: np.ndarray, cov: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Carry an sv.ByteTrack state [cx cy a h vx vy va vh] through ``g`` (aspect a is kept)."""
    mean = np.asarray(mean, dtype=np.float64).copy()
    jac = jacobians(g, mean[None, :2])[0]
    s = float(np.sqrt(abs(np.linalg.det(jac))))
    m4 = np.zeros((4, 4))
    m4[:2, :2] = jac
    m4[2, 2] = 1.0
    m4[3, 3] = s
    mean[:2] = apply_homography(g, mean[None, :2])[0]
    mean[3] *= s
    mean[4:] = m4 @ mean[4:]
    m8 = np.zeros((8, 8))
    m8[:4, :4] = m4
    m8[4:, 4:] = m4
    return mean, m8 @ cov @ m8.T


# --------------------------------------------------------------------------------------------
# tracker
# --------------------------------------------------------------------------------------------


class Tracker:
    """ByteTrack on ego-motion-compensated boxes (see module docstring)."""

    def __init__(self, cfg: TrackerConfig | None = None, backend: str = "trackers") -> None:
        self.cfg = cfg or TrackerConfig()
        self._prefer = backend
        self.reset()

    def reset(self) -> None:
        self.backend_name, self._bt = make_backend(self.cfg, self._prefer)
        self._h_cur_to_ref = np.eye(3)
        self._image_size: tuple[float, float] | None = None
        self._seen_max = np.zeros(2)  # largest box x2, y2 seen: the image size when not given
        self.reanchor_count = 0
        self.frame_count = 0
        self.pending = _no_detections()
        self._pending_tracklets: list[Any] = []
        # tracks the last update confirmed that were pending before it: id -> the pending box
        # (previous frame's image coordinates) they started from
        self.confirmed: dict[int, np.ndarray] = {}
        self._last_t: float | None = None
        self.last_buffer = 0.0

    @property
    def homography_to_reference(self) -> np.ndarray:
        """Current frame -> stabilised reference (changes meaning at each re-anchoring)."""
        return self._h_cur_to_ref.copy()

    def set_image_size(self, width: int, height: int) -> None:
        """Image size used by the conditioning check (otherwise taken from the detections)."""
        self._image_size = (float(width), float(height))

    def _extent(self) -> tuple[float, float]:
        if self._image_size is not None:
            return self._image_size
        if np.all(self._seen_max > 0):
            return float(self._seen_max[0]), float(self._seen_max[1])
        return DEFAULT_EXTENT

    def update(
        self, detections: sv.Detections, ego: EgoMotion | None = None, timestamp_s: float | None = None
    ) -> sv.Detections:
        """Tracked detections of this frame: current-image boxes, ``data`` kept, ``tracker_id`` set.

        Afterwards :attr:`pending` holds the detections that started a track which is not confirmed
        yet (``tracker_id`` -1): a frame without detection propagates them, so the track can be
        confirmed there. Boxes marked ``data["propagated"]`` never start a track: their confidence
        is capped below the activation threshold (they still match the track they came from)."""
        self.frame_count += 1
        if ego is not None:
            self._accumulate(np.asarray(ego.homography, dtype=np.float64))
        if len(detections):
            self._seen_max = np.maximum(self._seen_max, detections.xyxy[:, 2:4].max(axis=0))
        reason = needs_reanchor(self._h_cur_to_ref, self._extent())
        if reason is not None:
            self._reanchor(reason)

        ref = self._to_reference(detections)
        timestamp_s = self._set_gap(timestamp_s)
        tracked = self._run_backend(ref, timestamp_s)
        offset = 1 if self.backend_name == "trackers" else 0
        out = self._back_to_image(detections, tracked, id_offset=offset)
        self.confirmed = {
            int(t.tracker_id) + offset: box
            for t, box in zip(self._pending_tracklets, self.pending.xyxy, strict=True)
            if t is not None and t.tracker_id >= 0
        }
        self.pending, index = self._pending(detections, tracked)
        self._pending_tracklets = self._tracklets_of(ref.xyxy[index])
        return out

    def _tracklets_of(self, ref_xyxy: np.ndarray) -> list[Any]:
        """The backend's unconfirmed track behind each pending box (the one whose box it is, in
        the reference frame), so the next update can tell which of them it confirmed."""
        if self.backend_name != "trackers" or len(ref_xyxy) == 0:
            return [None] * len(ref_xyxy)
        unconfirmed = [t for t in self._bt.tracks if t.tracker_id < 0]
        if not unconfirmed:
            return [None] * len(ref_xyxy)
        boxes = np.array(
            [np.asarray(t.get_state_bbox(), dtype=np.float64).reshape(-1)[:4] for t in unconfirmed]
        )
        out: list[Any] = []
        for box in ref_xyxy:
            err = np.abs(boxes - box).max(axis=1)
            best = int(np.argmin(err))
            out.append(unconfirmed[best] if err[best] < 0.5 else None)
        return out

    def _set_gap(self, timestamp_s: float | None) -> float | None:
        """The association buffer for this step: from the frames skipped or dropped since the last
        one (a new track has no velocity yet; its vehicle moved that many frames' worth). Returns the
        time for the backend: None (one nominal frame) where the clock did not advance - trackers
        would skip the whole update, and every one after until the clock passes its last time."""
        last = self._last_t
        advanced = (
            timestamp_s is not None and np.isfinite(timestamp_s) and (last is None or timestamp_s > last)
        )
        self._last_t = timestamp_s if advanced else None
        gap = frames_between(timestamp_s, last, self.cfg.frame_rate) if advanced else 1.0
        self.last_buffer = gap_buffer(gap, self.cfg.gap_buffer_per_frame, self.cfg.gap_buffer_max)
        iou = getattr(self._bt, "iou", None)
        if iou is not None and hasattr(iou, "buffer_ratio"):
            iou.buffer_ratio = self.last_buffer
        return timestamp_s if advanced else None

    def _pending(self, detections: sv.Detections, tracked: sv.Detections) -> tuple[sv.Detections, np.ndarray]:
        """Detections left without an id that were confident enough to start a track, and their
        indices in ``detections``."""
        none = (_no_detections(), np.zeros(0, dtype=int))
        if len(tracked) == 0 or _INDEX_KEY not in tracked.data or tracked.tracker_id is None:
            return none
        idx = np.asarray(tracked.data[_INDEX_KEY], dtype=int)[np.asarray(tracked.tracker_id) < 0]
        if len(idx) == 0 or detections.confidence is None:
            return none
        idx = idx[np.asarray(detections.confidence)[idx] >= spawn_threshold(self.cfg)]
        prop = detections.data.get(PROPAGATED_KEY)
        if prop is not None:
            idx = idx[~np.asarray(prop, dtype=bool)[idx]]
        idx = np.sort(idx)
        out = detections[idx]
        out.tracker_id = np.full(len(out), -1, dtype=int)
        return out, idx

    # --------------------------------------------------------------------------------------
    def _accumulate(self, h_prev_to_cur: np.ndarray) -> None:
        try:
            inv = np.linalg.inv(h_prev_to_cur)
        except np.linalg.LinAlgError:
            log.debug("tracker: singular ego-motion homography ignored")
            return
        h = self._h_cur_to_ref @ inv
        self._h_cur_to_ref = h / h[2, 2] if abs(h[2, 2]) > 1e-12 else h

    def _reanchor(self, reason: str) -> None:
        """Make the current frame the reference and carry the live tracks over."""
        old_to_new = np.linalg.inv(self._h_cur_to_ref) if np.all(np.isfinite(self._h_cur_to_ref)) else None
        if old_to_new is not None:
            old_to_new /= old_to_new[2, 2]
            self._warp_backend_tracks(old_to_new)
        else:
            log.warning("tracker: cannot carry tracks over a non-finite stabilisation; resetting ids")
            self.backend_name, self._bt = make_backend(self.cfg, self._prefer)
        self._h_cur_to_ref = np.eye(3)
        self.reanchor_count += 1
        log.info("tracker: re-anchored the stabilised reference (%s)", reason)

    def _warp_backend_tracks(self, g: np.ndarray) -> None:
        if self.backend_name == "trackers":
            tracks = list(self._bt.tracks)
            if not tracks:
                return
            states = np.array([t.state_estimator.kf.state.reshape(-1) for t in tracks])
            covs = np.array([t.state_estimator.kf.state_covariance for t in tracks])
            new_states, new_covs = _warp_xyxy_kalman(states, covs, g)
            for t, st, cv in zip(tracks, new_states, new_covs, strict=True):
                t.state_estimator.kf.state = st.reshape(-1, 1)
                t.state_estimator.kf.state_covariance = cv
        else:
            for t in [*self._bt.tracked_tracks, *self._bt.lost_tracks]:
                if t.mean is not None:
                    mean, cov = _warp_xyah_kalman(t.mean, t.covariance, g)
                    t.mean, t.covariance = mean.astype(t.mean.dtype), cov

    def _to_reference(self, detections: sv.Detections) -> sv.Detections:
        n = len(detections)
        ref_xyxy = map_boxes(self._h_cur_to_ref, detections.xyxy) if n else np.empty((0, 4))
        conf = detections.confidence if detections.confidence is not None else np.ones(n, dtype=np.float32)
        prop = detections.data.get(PROPAGATED_KEY) if n else None
        if prop is not None and np.any(prop):
            # high enough for the first association round, too low to start a track
            cap = min(float(self.cfg.track_activation_threshold) + 0.05, spawn_threshold(self.cfg) - 1e-3)
            conf = np.where(np.asarray(prop, dtype=bool), np.minimum(conf, cap), conf)
        ref = sv.Detections(
            xyxy=ref_xyxy.astype(np.float64),
            confidence=np.asarray(conf, dtype=np.float32),
            class_id=detections.class_id,
        )
        ref.data = {_INDEX_KEY: np.arange(n)}
        return ref

    def _run_backend(self, ref: sv.Detections, timestamp_s: float | None = None) -> sv.Detections:
        if self.backend_name == "trackers":
            return self._bt.update(ref, timestamp=timestamp_s)
        return self._bt.update_with_detections(ref)

    @staticmethod
    def _back_to_image(
        detections: sv.Detections, tracked: sv.Detections, id_offset: int = 0
    ) -> sv.Detections:
        if len(tracked) == 0 or _INDEX_KEY not in tracked.data:
            out = detections[np.zeros(len(detections), dtype=bool)]
            out.tracker_id = np.empty(0, dtype=int)
            return out
        ids = np.asarray(tracked.tracker_id, dtype=int)
        idx = np.asarray(tracked.data[_INDEX_KEY], dtype=int)
        keep = ids >= 0
        idx, ids = idx[keep], ids[keep]
        order = np.argsort(idx, kind="stable")
        out = detections[idx[order]]
        out.tracker_id = ids[order] + id_offset
        return out


def _no_detections() -> sv.Detections:
    out = sv.Detections.empty()
    out.tracker_id = np.empty(0, dtype=int)
    return out
