"""``airpatrol calibrate``: a measured base on a recorded flight's frame.

Give the frame (1-based), one or more lines between road marks in its pixels and their lengths on
the road; the command solves the camera's height above the road and the gimbal's pitch bias
(:func:`pipelines.calibrate.solve_base`) against that frame's telemetry, prints the solution and,
with ``--out DIR``, writes ``height_reference.yaml`` (pass it to ``airpatrol process
--height-reference``, or paste its ``camera:`` block into the site YAML) and ``frame.png``, the frame
with the lines drawn and numbered: the record of what was measured.

    airpatrol calibrate flight.MP4 --srt flight.SRT --frame 120 \\
        --line 812,640,1190,655=12.0 --line 900,300,905,700=30.0+-0.1 --set-by "PC Smith" --out base/
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import re
from pathlib import Path

import cv2
import yaml

from pipelines.calibrate import BaseLine, solve_base_on_frame
from pipelines.cli import FPS_HELP, add_pipeline_options, config_from_args, float_in, positive_int
from pipelines.config import ConfigError, PipelineConfig
from pipelines.types import Frame

log = logging.getLogger(__name__)

_LINE = re.compile(
    r"^\s*(?P<u1>[-\d.]+)\s*,\s*(?P<v1>[-\d.]+)\s*,\s*(?P<u2>[-\d.]+)\s*,\s*(?P<v2>[-\d.]+)\s*=\s*"
    r"(?P<len>[\d.]+)\s*(?:(?:\+-|±)\s*(?P<sig>[\d.]+))?\s*$"
)


def line_arg(text: str) -> BaseLine:
    """argparse type: ``u1,v1,u2,v2=LENGTH`` or ``...=LENGTH+-SIGMA`` (pixels, metres)."""
    m = _LINE.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(
            f"expected u1,v1,u2,v2=LENGTH[+-SIGMA] (pixels, metres), got {text!r}"
        )
    try:
        p1 = (float(m["u1"]), float(m["v1"]))
        p2 = (float(m["u2"]), float(m["v2"]))
        length = float(m["len"])
        sigma = float(m["sig"]) if m["sig"] else None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not numbers: {text!r}") from exc
    return BaseLine(p1, p2, length, sigma)


def _frame(args: argparse.Namespace, config: PipelineConfig) -> Frame:
    from pipelines.runner import load_frames

    source, frames, _ = load_frames(
        args.video, args.srt, max_frames=args.frame, camera=args.camera, fixed=config.camera, fps=args.fps
    )
    with source:
        last = None
        for frame in frames:
            last = frame
            if frame.number == args.frame:
                return frame
    have = 0 if last is None else last.number
    raise ConfigError(f"{args.video} has {have} frames: no frame {args.frame}")


def _draw(frame: Frame, lines: list[BaseLine], path: Path) -> None:
    image = frame.image.copy()
    for i, ln in enumerate(lines, start=1):
        p1 = (round(ln.p1[0]), round(ln.p1[1]))
        p2 = (round(ln.p2[0]), round(ln.p2[1]))
        cv2.line(image, p1, p2, (0, 255, 255), 2, cv2.LINE_AA)
        for p in (p1, p2):
            cv2.circle(image, p, 5, (0, 0, 255), 1, cv2.LINE_AA)
        label = f"{i}: {ln.length_m:g} m"
        cv2.putText(image, label, (p1[0] + 6, p1[1] - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 255, 255), 2)
    if not cv2.imwrite(str(path), image):
        raise ConfigError(f"cannot write {path}")


def cmd_calibrate(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    frame = _frame(args, config)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    solution, reference = solve_base_on_frame(frame, args.line, config.camera, args.set_by or "", now)
    print(f"frame {frame.number} ({frame.timestamp_s:.3f} s): {solution.describe()}")  # noqa: T201
    for i, r in enumerate(solution.residuals_m, start=1):
        print(f"  line {i}: solved minus typed length {r:+.3f} m")  # noqa: T201
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        doc = {
            "camera": {"height_reference": reference.to_dict()},
            "measured_base": solution.to_dict() | {"frame": frame.number, "video": str(args.video)},
        }
        (out / "height_reference.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        _draw(frame, args.line, out / "frame.png")
        written = (
            f"-> {out / 'height_reference.yaml'} (airpatrol process --height-reference), {out / 'frame.png'}"
        )
        print(written)  # noqa: T201
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "calibrate",
        help="a measured base: the height above the road (and pitch bias) from lines of known length",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    c.add_argument("video", type=Path)
    c.add_argument("--srt", type=Path, help="the flight's DJI .SRT telemetry")
    c.add_argument(
        "--frame", type=positive_int, required=True, help="the frame the lines are drawn on (1-based)"
    )
    c.add_argument(
        "--line",
        type=line_arg,
        action="append",
        required=True,
        metavar="U1,V1,U2,V2=LENGTH[+-SIGMA]",
        help="a line between two road marks in pixels and its length on the road in metres; repeat it "
        "(lines in two directions also measure the pitch bias)",
    )
    c.add_argument("--set-by", help="who measured it (recorded on every violation measured with it)")
    c.add_argument("--out", type=Path, help="write height_reference.yaml and frame.png here")
    c.add_argument("--fps", type=float_in(0.1, 1000.0), help=FPS_HELP)
    add_pipeline_options(c)
    c.set_defaults(func=cmd_calibrate)
