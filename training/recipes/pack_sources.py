"""Pack detector v3/v4's training sources small enough to send to a remote GPU machine.

The training clips of VisDrone-DET (the held-out clips, ``@visdrone-det``, are left out), the
aerial-cars frames and every 20th frame of the simulated training flights, re-encoded as WebP
(quality 70: about 0.62 of the originals' JPEG bytes) under the same names and layouts, so the
same converters read them (``visdrone-det=``, ``aerial-cars=``, ``mot=`` with ``--every 1``).
``--parts N`` deals the VisDrone images over N folders (``OUT/A``, ``OUT/B``, ...) for transfers
with a size cap; merged again (``cp -r OUT/*/. DATA/``) they are one source tree.

    python training/recipes/pack_sources.py OUT [--sim runs/sim_train_real] [--quality 70] [--parts 2]

Used for detector v4 (weights/airpatrol_vehicles_n.md): two transfers of ~55 MiB each.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import string
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2

from training.datasets import read_mot, read_visdrone_det, visdrone_det_heldout_among
from training.samples import iter_loaded

log = logging.getLogger("pack_sources")
SHARED = Path(
    os.environ.get("AIRPATROL_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)


def _webp(job: tuple[Path, Path, int]) -> int:
    src, dst, quality = job
    image = cv2.imread(str(src))
    if image is None:
        raise ValueError(f"cannot read {src}")
    cv2.imwrite(str(dst), image, [cv2.IMWRITE_WEBP_QUALITY, quality])
    return dst.stat().st_size


def pack(out: Path, sim: Path | None, quality: int = 70, parts: int = 2, every: int = 20) -> int:
    """Write the packed tree(s) under ``out``; returns the bytes written for images."""
    names = string.ascii_uppercase[:parts]
    jobs: list[tuple[Path, Path, int]] = []
    samples = read_visdrone_det(SHARED / "visdrone_det")
    held = set(visdrone_det_heldout_among(s.group for s in samples))
    train = [s for s in samples if s.group not in held]
    for i, s in enumerate(train):
        d = out / names[i % parts] / "visdrone_det"
        (d / "images").mkdir(parents=True, exist_ok=True)
        (d / "annotations").mkdir(exist_ok=True)
        shutil.copy(SHARED / "visdrone_det" / "annotations" / f"{s.image.stem}.txt", d / "annotations")
        jobs.append((s.image, d / "images" / f"{s.image.stem}.webp", quality))
    cars = out / names[0] / "aerial_cars"
    cars.mkdir(parents=True, exist_ok=True)
    for p in sorted((SHARED / "aerial_cars_dji_frames" / "dji_video_frames").glob("*.jpg")):
        shutil.copy(p.with_suffix(".txt"), cars)
        jobs.append((p, cars / f"{p.stem}.webp", quality))
    for flight in sorted(p for p in (sim.iterdir() if sim else ()) if (p / "gt" / "gt.txt").exists()):
        d = out / names[-1] / "sim" / flight.name
        (d / "img1").mkdir(parents=True, exist_ok=True)
        (d / "gt").mkdir(exist_ok=True)
        shutil.copy(flight / "gt" / "gt.txt", d / "gt")
        for meta in ("flight.yaml", "seqinfo.ini"):
            shutil.copy(flight / meta, d)
        # the frames the CPU recipe trains on (`--dataset mot=SIM --every 20`), read by the same reader
        for sample, frame in iter_loaded(read_mot(flight, every=every)):
            index = sample.frame  # 0-based; MOT frame numbers (the file names) are 1-based
            cv2.imwrite(str(d / "img1" / f"{index + 1:06d}.webp"), frame, [cv2.IMWRITE_WEBP_QUALITY, quality])
    with ThreadPoolExecutor(os.cpu_count() or 1) as ex:  # OpenCV codecs release the GIL
        total = sum(ex.map(_webp, jobs))
    log.info(
        "packed %d VisDrone training images (%d clips held out) and %d more: %.1f MB",
        len(train),
        len(held),
        len(jobs) - len(train),
        total / 1e6,
    )
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument(
        "--sim", type=Path, help="simulated training flights (training/recipes/sim_train_flights.sh)"
    )
    p.add_argument("--quality", type=int, default=70)
    p.add_argument("--parts", type=int, default=2)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pack(args.out, args.sim, args.quality, args.parts)


if __name__ == "__main__":
    main()
