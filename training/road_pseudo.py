"""Road pseudo-labels from the footprints of vehicles: where traffic drove is road.

From tracks (:func:`pseudo_mask_from_tracks`, :func:`pseudo_mask_from_mot`, fixed camera or with
per-frame ego homographies) or from untracked boxes of frames registered to a reference frame
(:func:`pseudo_mask_from_boxes` + :func:`register_to_reference`); :func:`write_pseudo_pairs` turns
annotated frames of hovering flights into image / mask training pairs.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

import cv2
import numpy as np

from training.road_data import RoadPair

log = logging.getLogger(__name__)


def read_mot_tracks(path: str | Path) -> dict[int, dict[int, np.ndarray]]:
    """MOT tracks (``frame,id,x,y,w,h,...``, frame 1-based) -> {frame0: {id: xyxy}}."""
    out: dict[int, dict[int, np.ndarray]] = defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        p = line.split(",")
        if len(p) < 6:
            continue
        f, tid, x, y, w, h = int(float(p[0])) - 1, int(float(p[1])), *(float(v) for v in p[2:6])
        out[f][tid] = np.array([x, y, x + w, y + h], np.float64)
    return dict(out)


def load_homographies(path: str | Path | None) -> dict[int, np.ndarray] | None:
    """Per-frame ego homographies (previous frame -> this frame, the engine's ``EgoMotion``):
    ``.npy`` (N,3,3) indexed by frame, or JSON ``{"<frame>": [[...],[...],[...]]}``."""
    if path is None:
        return None
    path = Path(path)
    if path.suffix == ".npy":
        arr = np.load(path)
        return {i: arr[i] for i in range(len(arr))}
    data = json.loads(path.read_text())
    return {int(k): np.asarray(v, np.float64).reshape(3, 3) for k, v in data.items()}


def _frame_to_ref(ego: Mapping[int, np.ndarray] | None, frames: Iterable[int]) -> dict[int, np.ndarray]:
    """Frame -> reference (first frame) homography by chaining the ego homographies."""
    frames = sorted(frames)
    if not frames:
        return {}
    if ego is None:
        return {f: np.eye(3) for f in frames}
    acc = np.eye(3)  # first frame -> current
    out = {}
    for f in range(frames[0], frames[-1] + 1):
        if f != frames[0] and f in ego:
            acc = np.asarray(ego[f], np.float64) @ acc
        out[f] = np.linalg.inv(acc)
    return {f: out[f] for f in frames}


def pseudo_mask_from_tracks(
    tracks: Mapping[int, Mapping[int, np.ndarray]],
    size: tuple[int, int],
    ego_homographies: Mapping[int, np.ndarray] | None = None,
    min_track_frames: int = 5,
    min_motion_px: float = 0.0,
    close_px: int = 15,
    dilate_px: int = 5,
    reference_frame: int | None = None,
    to_reference: Mapping[int, np.ndarray] | None = None,
) -> np.ndarray:
    """Road mask (uint8 0/255, in the reference frame's pixels) from vehicle footprints.

    Each tracked box is warped into stabilised coordinates (the first frame, via the chained ego
    homographies; identity for a fixed camera) and painted; tracks seen in fewer than
    ``min_track_frames`` frames (likely false positives) and, with ``min_motion_px``, tracks
    that never move (parked cars) are skipped. A closing (``close_px``) joins consecutive
    footprints into lanes, and a dilation adds a margin. The result is the road as traffic used it
    during the flight: lanes nobody drove on are missing, so treat it as a lower bound.
    ``to_reference`` (frame -> reference homographies) replaces the chained ego homographies,
    e.g. for sparse frames registered by :func:`register_to_reference`; frames missing from it are
    skipped.
    """
    w, h = size
    by_track: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)
    for f, boxes in tracks.items():
        for tid, xyxy in boxes.items():
            by_track[tid].append((f, np.asarray(xyxy, np.float64)))
    if to_reference is not None:
        to_ref = {f: np.asarray(hm, np.float64) for f, hm in to_reference.items()}
        by_track = {t: [(f, b) for f, b in obs if f in to_ref] for t, obs in by_track.items()}
    else:
        to_ref = _frame_to_ref(ego_homographies, tracks.keys())
    ref_from = np.eye(3)
    if reference_frame is not None and reference_frame in to_ref:
        ref_from = np.linalg.inv(to_ref[reference_frame])
    acc = np.zeros((h, w), np.uint8)
    used = 0
    for _tid, obs in by_track.items():
        if len(obs) < min_track_frames:
            continue
        centres = np.array([apply_h(to_ref[f], [[(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]])[0] for f, b in obs])
        if min_motion_px > 0 and np.linalg.norm(centres.max(0) - centres.min(0)) < min_motion_px:
            continue
        used += 1
        for f, (x1, y1, x2, y2) in obs:
            corners = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]])
            poly = apply_h(ref_from @ to_ref[f], corners)
            cv2.fillPoly(acc, [np.round(poly).astype(np.int32).reshape(-1, 1, 2)], 255)
    if close_px > 0:
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * close_px + 1, 2 * close_px + 1))
        acc = cv2.morphologyEx(acc, cv2.MORPH_CLOSE, k)
    if dilate_px > 0:
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * dilate_px + 1, 2 * dilate_px + 1))
        acc = cv2.dilate(acc, k)
    log.info("pseudo road mask from %d tracks: %.1f %% of the frame", used, 100 * (acc > 0).mean())
    return acc


def apply_h(hmat: np.ndarray, pts) -> np.ndarray:
    pts = np.asarray(pts, np.float64).reshape(-1, 2)
    ph = np.column_stack([pts, np.ones(len(pts))]) @ np.asarray(hmat, np.float64).T
    return ph[:, :2] / ph[:, 2:3]


def warp_mask_to_frame(
    mask_ref: np.ndarray, frame: int, ego_homographies: Mapping[int, np.ndarray] | None, frames: Iterable[int]
) -> np.ndarray:
    """The reference-frame mask seen from ``frame`` (for per-frame training pairs)."""
    to_ref = _frame_to_ref(ego_homographies, frames)
    h, w = mask_ref.shape[:2]
    return cv2.warpPerspective(mask_ref, np.linalg.inv(to_ref[frame]), (w, h), flags=cv2.INTER_NEAREST)


def pseudo_mask_from_boxes(
    boxes_per_frame: Mapping[int, np.ndarray],
    size: tuple[int, int],
    to_reference: Mapping[int, np.ndarray] | None = None,
    close_px: int = 15,
    dilate_px: int = 5,
) -> np.ndarray:
    """Road mask from untracked boxes per frame (``{frame: (N,4) xyxy}``), painted in the
    reference frame through ``to_reference`` (frame -> reference homographies, e.g. from
    :func:`register_to_reference`). Every box counts: use tracks where false positives matter."""
    tracks = {
        f: {i: b for i, b in enumerate(np.asarray(bx).reshape(-1, 4))} for f, bx in boxes_per_frame.items()
    }
    # every box is its own one-frame "track"
    renum: dict[int, dict[int, np.ndarray]] = {}
    n = 0
    for f, d in tracks.items():
        renum[f] = {}
        for b in d.values():
            renum[f][n] = b
            n += 1
    return pseudo_mask_from_tracks(
        renum, size, min_track_frames=1, close_px=close_px, dilate_px=dilate_px, to_reference=to_reference
    )


def register_to_reference(
    images: Mapping[int, np.ndarray], reference: int, work_width: int = 960, min_inliers: int = 30
) -> dict[int, np.ndarray]:
    """Frame -> reference homographies of frames of one flight (SIFT + ratio test + RANSAC on a
    downscaled grey image). Frames that cannot be registered are left out."""

    def gray(img):
        s = work_width / img.shape[1]
        return cv2.cvtColor(
            cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY
        ), s

    sift = cv2.SIFT_create(nfeatures=3000)
    ref_g, s = gray(images[reference])
    kr, dr = sift.detectAndCompute(ref_g, None)
    matcher = cv2.BFMatcher(cv2.NORM_L2)
    scale = np.diag([s, s, 1.0])
    out = {reference: np.eye(3)}
    for f, img in images.items():
        if f == reference:
            continue
        g, _ = gray(img)
        kf, df = sift.detectAndCompute(g, None)
        if df is None or dr is None or len(kf) < min_inliers:
            continue
        good = [
            m
            for m, n in (p for p in matcher.knnMatch(df, dr, k=2) if len(p) == 2)
            if m.distance < 0.75 * n.distance
        ]
        if len(good) < min_inliers:
            log.info("frame %s: %d matches, not registered", f, len(good))
            continue
        src = np.float32([kf[m.queryIdx].pt for m in good])
        dst = np.float32([kr[m.trainIdx].pt for m in good])
        hmat, inl = cv2.findHomography(src, dst, cv2.RANSAC, 3.0)
        if hmat is None or int(inl.sum()) < min_inliers:
            log.info("frame %s: too few RANSAC inliers, not registered", f)
            continue
        out[f] = np.linalg.inv(scale) @ hmat @ scale
    return out


def pseudo_mask_from_mot(
    tracks_path: str | Path,
    size: tuple[int, int],
    homographies: str | Path | None = None,
    min_track_frames: int = 5,
    **kwargs,
) -> np.ndarray:
    """:func:`pseudo_mask_from_tracks` on a MOT tracks file (e.g. ``airpatrol process`` output)."""
    return pseudo_mask_from_tracks(
        read_mot_tracks(tracks_path), size, load_homographies(homographies), min_track_frames, **kwargs
    )


def write_pseudo_pairs(
    samples, out_dir: str | Path, close_px: int = 25, dilate_px: int = 8
) -> list[RoadPair]:
    """Road pseudo-label pairs from annotated frames of hovering flights (``training.samples.Sample``).

    Per group (video), every frame is registered to the frame with the most boxes
    (:func:`register_to_reference`), all boxes are painted there (:func:`pseudo_mask_from_boxes`),
    and the mask is warped back into each frame; a frame's own boxes are always road. Writes
    ``images/<name>.jpg`` (symlinks when possible) and ``masks/<name>.png``.
    """
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "masks").mkdir(parents=True, exist_ok=True)
    by_group: dict[str, list] = defaultdict(list)
    for s in samples:
        by_group[s.group].append(s)
    pairs = []
    for group, ss in sorted(by_group.items()):
        imgs = {i: s.load() for i, s in enumerate(ss)}
        ref = max(range(len(ss)), key=lambda i: len(ss[i].boxes))
        to_ref = register_to_reference(imgs, ref)
        h, w = imgs[ref].shape[:2]
        m_ref = pseudo_mask_from_boxes(
            {i: ss[i].boxes[:, 1:] for i in to_ref}, (w, h), to_ref, close_px, dilate_px
        )
        for i in to_ref:
            mask = cv2.warpPerspective(m_ref, np.linalg.inv(to_ref[i]), (w, h), flags=cv2.INTER_NEAREST)
            for x1, y1, x2, y2 in ss[i].boxes[:, 1:].astype(int):
                mask[max(0, y1) : y2, max(0, x1) : x2] = 255
            mask_path = out_dir / "masks" / f"{ss[i].name}.png"
            cv2.imwrite(str(mask_path), mask)
            img_path = out_dir / "images" / f"{ss[i].name}.jpg"
            if not img_path.exists():
                try:
                    img_path.symlink_to(Path(ss[i].image).resolve())
                except OSError:
                    cv2.imwrite(str(img_path), imgs[i])
            pairs.append(RoadPair(img_path, mask_path, group, boxes=ss[i].boxes[:, 1:].copy()))
        log.info(
            "pseudo road masks for %s: %d/%d frames registered, %.1f %% road",
            group,
            len(to_ref),
            len(ss),
            100 * (m_ref > 0).mean(),
        )
    return pairs
