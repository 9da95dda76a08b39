"""DJI ``.SRT`` telemetry sidecars: parse every known layout, write the modern one.

Layouts recognised (keys are case-insensitive, written ``key: value`` or ``key : value``):

* square brackets (Mini 2/3/4 Pro, Air 2S): ``[latitude: ..] [longitude: ..] [rel_alt: .. abs_alt: ..]``;
* HTML ``<font>`` (Air 3/3S, Mini 4/5 Pro, Mavic 3, Neo 2, Avata 360): a ``FrameCnt``/``SrtCnt`` +
  ``DiffTime`` line, a date line, then bracketed fields, among them ``focal_len``, ``dzoom_ratio``,
  ``gb_yaw gb_pitch gb_roll`` and the ``pp_*`` stabilisation fields (ignored);
* old ``<font>`` firmware (Mavic 2, Mavic Air, Phantom 4 Pro V2): ``[focal_len : 240]``,
  ``[dzoom_ratio: 10000, delta:0]``, the ``longtitude`` typo and a lone ``[altitude: ..]``;
* legacy (Phantom 3/4, Mavic Pro, Avata 2): ``GPS(lon,lat,n) BAROMETER:12.3`` or
  ``GPS(..) BAROMETER(12.3) HOME(..)``;
* DJI FPV / Avata / O3 air unit: ``F/2.8, SS 320, ISO 100, EV 0, DZOOM 1.000, GPS (lon, lat, n),
  D 24.19m, H 6.20m, H.S 0.00m/s, V.S 0.00m/s``.

Field rules:

* ``timestamp_s`` is the subtitle's start time;
* ``altitude_m`` (height above the take-off point) comes only from ``rel_alt`` or the FPV ``H``;
  ``abs_alt``, a lone ``altitude`` (old firmware: absolute) and ``BAROMETER`` go to ``abs_altitude_m``.
  A file with only those leaves ``altitude_m`` None and logs one warning: the ground distance is
  then unknown and must come from an override, never from a guess;
* ``focal_len`` is 35 mm-equivalent -> ``focal_length_35mm``; ``focal_length_mm`` is derived from it
  only when ``camera`` names a known profile;
* scaled old-firmware values, detected by plausibility: ``focal_len`` written as an integer >= 100
  is in tenths of a mm (``240`` -> 24.0; current firmware writes ``24.00`` and no DJI camera
  reaches 100 mm-eq on the firmware that wrote integers); ``dzoom_ratio`` >= 1000, or an integer
  >= 100, is scaled: by 10000 when >= 10000 (``10000`` -> 1.0x), otherwise by 100 (``150`` -> 1.5x);
* ``GPS(a, b, n)``: legacy firmware writes (longitude, latitude); some tools write (latitude,
  longitude). The order is decided per file: a value beyond +-90 is the longitude; when no sample
  tells, DJI's (longitude, latitude) is assumed (logged). The third value (satellite count on most
  firmware) is ignored;
* latitude = longitude = 0 means "no GPS fix" and becomes None;
* ``[measure_target_distance: ..]`` (not DJI's: the name of the laser range in Cloud API OSD, as
  airpatrol's simulator writes it, or a merge of an OSD log) -> ``lrf_range_m``, on the samples
  that carry a reading only.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pipelines.camera import UnknownCameraError, get_profile, real_focal_from_35mm
from pipelines.errors import TelemetryError
from pipelines.types import CameraProfile, Telemetry

log = logging.getLogger(__name__)

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_TIMING = re.compile(
    r"(\d+):(\d{1,2}):(\d{1,2})[,.](\d{1,3})\s*-->\s*\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}",
)
# A value may also be written as NaN or inf (a firmware without a fix, a broken log): it is read
# as such, so validation names it, instead of looking like a missing field.
_VALUE = rf"(?:{_NUM}|[-+]?(?:[Nn][Aa][Nn]|[Ii][Nn][Ff](?:[Ii][Nn][Ii][Tt][Yy])?)\b)"
# ``key: number``; the key may be two words (``gimbal pitch``, ``shift x``).
_KEY_VALUE = re.compile(rf"(?<![\w.])([A-Za-z_]\w*(?: [A-Za-z_]\w*)?)\s*:\s*({_VALUE})")
_GPS = re.compile(rf"GPS\s*\(\s*({_NUM})\s*,\s*({_NUM})")
_BARO_PAREN = re.compile(rf"BAROMETER\s*\(\s*({_NUM})", re.IGNORECASE)
_FPV_HEIGHT = re.compile(rf"(?<![\w.])H\s+({_NUM})\s*m\b")
_FPV_DZOOM = re.compile(rf"\bDZOOM\s+({_NUM})")
_TAG = re.compile(r"<[^>]*>")

# Source key (lower case, spaces as "_") -> canonical field.
_KEYS: dict[str, str] = {
    "rel_alt": "rel_alt",
    "abs_alt": "abs_alt",
    "altitude": "abs_alt",
    "barometer": "baro",
    "latitude": "lat",
    "lat": "lat",
    "longitude": "lon",
    "longtitude": "lon",
    "lon": "lon",
    "focal_len": "focal_35",
    "dzoom_ratio": "dzoom",
    "dzoom": "dzoom",
    "digital_zoom": "dzoom",
    "gb_pitch": "pitch",
    "gimbal_pitch": "pitch",
    "gb_yaw": "yaw",
    "gimbal_yaw": "yaw",
    # not in DJI's SRT: a laser range (Cloud API OSD's name), as airpatrol's simulator writes it
    "measure_target_distance": "lrf",
}
_TELEMETRY_FIELDS = frozenset(_KEYS.values())


@dataclass(frozen=True, slots=True)
class _Block:
    """One subtitle's recognised raw values (numeric literals, not yet interpreted)."""

    start_s: float
    values: dict[str, str]
    gps: tuple[float, float] | None


# ---------------------------------------------------------------------------- scaled values


def _is_integer_literal(literal: str) -> bool:
    return re.fullmatch(r"[-+]?\d+", literal.strip()) is not None


def focal_35mm_from_literal(literal: str) -> float:
    """``focal_len`` as written -> 35 mm-equivalent mm (undoing old firmware's x10)."""
    value = float(literal)
    return value / 10.0 if value >= 100.0 and _is_integer_literal(literal) else value


def zoom_from_literal(literal: str) -> float:
    """``dzoom_ratio`` as written -> zoom factor (undoing old firmware's x10000 / x100)."""
    value = float(literal)
    if value >= 1000.0 or (value >= 100.0 and _is_integer_literal(literal)):
        return value / 10000.0 if value >= 10000.0 else value / 100.0
    return value


# ---------------------------------------------------------------------------- camera


def resolve_camera(camera: str | None) -> tuple[str | None, CameraProfile | None]:
    """(name to store in Telemetry.camera, profile or None); unknown names are kept and logged."""
    if camera is None:
        return None, None
    try:
        profile = get_profile(camera)
    except UnknownCameraError as exc:
        log.warning("%s; focal_length_mm is left unknown", exc)
        return camera, None
    return profile.name, profile


def real_focal(focal_35mm: float | None, profile: CameraProfile | None) -> float | None:
    if focal_35mm is None or profile is None or not focal_35mm > 0:
        return None
    return real_focal_from_35mm(focal_35mm, profile)


# ---------------------------------------------------------------------------- parsing


def _timing_seconds(match: re.Match[str]) -> float:
    h, m, s, frac = match.groups()
    ms = int(frac.ljust(3, "0"))
    total_ms = ((int(h) * 60 + int(m)) * 60 + int(s)) * 1000 + ms
    return total_ms / 1000.0  # one correctly rounded division: exact for write_srt's values


def _fields(payload: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, literal in _KEY_VALUE.findall(payload):
        words = key.lower().split(" ")
        # "gimbal pitch" -> gimbal_pitch; "abc iso" (a stray word before a key) -> iso
        canonical = _KEYS.get("_".join(words)) or (_KEYS.get(words[-1]) if len(words) > 1 else None)
        if canonical is not None:
            values.setdefault(canonical, literal)
    if "baro" not in values and (m := _BARO_PAREN.search(payload)):
        values["baro"] = m.group(1)
    if "rel_alt" not in values and (m := _FPV_HEIGHT.search(payload)):
        values["rel_alt"] = m.group(1)
    if "dzoom" not in values and (m := _FPV_DZOOM.search(payload)):
        values["dzoom"] = m.group(1)
    return values


def _parse_block(block: str) -> _Block | None:
    timing = _TIMING.search(block)
    if timing is None:
        return None
    payload = _TAG.sub(" ", block[timing.end() :])
    values = _fields(payload)
    gps_match = _GPS.search(payload)
    gps = (float(gps_match.group(1)), float(gps_match.group(2))) if gps_match else None
    if gps is None and not values.keys() & _TELEMETRY_FIELDS:
        return None
    return _Block(_timing_seconds(timing), values, gps)


def _gps_lon_first(blocks: Sequence[_Block], source: str) -> bool:
    """Decide the GPS(a, b) order of a whole file (True: a is the longitude)."""
    pairs = [b.gps for b in blocks if b.gps is not None]
    if any(abs(a) > 90.0 for a, _ in pairs):
        return True
    if any(abs(b) > 90.0 for _, b in pairs):
        return False
    if any(a != 0.0 or b != 0.0 for a, b in pairs):
        log.info("%s: GPS(a, b) order is ambiguous; assuming DJI's (longitude, latitude)", source)
    return True


def _lat_lon(block: _Block, lon_first: bool) -> tuple[float | None, float | None]:
    lat = float(block.values["lat"]) if "lat" in block.values else None
    lon = float(block.values["lon"]) if "lon" in block.values else None
    if lat is None and lon is None and block.gps is not None:
        a, b = block.gps
        lon, lat = (a, b) if lon_first else (b, a)
    if lat == 0.0 and lon == 0.0:  # DJI writes 0, 0 while it has no GPS fix
        return None, None
    return lat, lon


def _telemetry(
    block: _Block, lon_first: bool, camera: str | None, profile: CameraProfile | None
) -> Telemetry:
    v = block.values

    def num(key: str) -> float | None:
        return float(v[key]) if key in v else None

    focal_35 = focal_35mm_from_literal(v["focal_35"]) if "focal_35" in v else None
    lat, lon = _lat_lon(block, lon_first)
    abs_alt = num("abs_alt")
    return Telemetry(
        timestamp_s=block.start_s,
        altitude_m=num("rel_alt"),
        gimbal_pitch_deg=num("pitch"),
        focal_length_mm=real_focal(focal_35, profile),
        focal_length_35mm=focal_35,
        digital_zoom=zoom_from_literal(v["dzoom"]) if "dzoom" in v else 1.0,
        latitude=lat,
        longitude=lon,
        abs_altitude_m=abs_alt if abs_alt is not None else num("baro"),
        gimbal_yaw_deg=num("yaw"),
        camera=camera,
        lrf_range_m=num("lrf"),
    )


# A subtitle starts with its index line followed by a timing line.
_BLOCK_START = re.compile(r"\n(?=[ \t]*\d+[ \t]*\n[ \t]*\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}\s*-->)")


def _split_blocks(text: str) -> list[str]:
    """Subtitle blocks: separated by blank lines, or (malformed files) by index + timing lines."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    chunks = (c for b in re.split(r"\n[ \t]*\n", text) for c in _BLOCK_START.split(b))
    return [c for c in chunks if c.strip()]


def parse_srt(text: str, camera: str | None = None, *, source: str = "SRT") -> list[Telemetry]:
    """All telemetry samples of a DJI SRT text, in file order (not validated).

    Blocks without a timing line or without any telemetry field are skipped with one counted
    warning. ``camera`` (profile name or alias) fills ``Telemetry.camera`` and, when known,
    ``focal_length_mm`` from ``focal_len``. ``source`` names the text in log messages.
    """
    raw = _split_blocks(text)
    blocks = [b for b in (_parse_block(r) for r in raw) if b is not None]
    if len(blocks) < len(raw):
        log.warning(
            "%s: skipped %d of %d SRT blocks without a timing line or telemetry",
            source,
            len(raw) - len(blocks),
            len(raw),
        )
    name, profile = resolve_camera(camera)
    lon_first = _gps_lon_first(blocks, source)
    samples = [_telemetry(b, lon_first, name, profile) for b in blocks]
    if any(s.altitude_m is None and s.abs_altitude_m is not None for s in samples):
        log.warning(
            "%s: no height above the take-off point (rel_alt), only a barometric/absolute altitude; "
            "altitude_m is left unknown: give the flying height (--altitude / camera.altitude_m)",
            source,
        )
    return samples


# ---------------------------------------------------------------------------- writing


def _fmt(value: float) -> str:
    """Shortest text that reads back as exactly the same float."""
    return repr(float(value))


def _srt_time(total_ms: int) -> str:
    h, rest = divmod(total_ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"


def _field_line(t: Telemetry) -> str:
    parts: list[str] = []
    if t.focal_length_35mm is not None:
        parts.append(f"[focal_len: {_fmt(t.focal_length_35mm)}]")
    parts.append(f"[dzoom_ratio: {_fmt(t.digital_zoom)}]")
    if t.latitude is not None:
        parts.append(f"[latitude: {_fmt(t.latitude)}]")
    if t.longitude is not None:
        parts.append(f"[longitude: {_fmt(t.longitude)}]")
    alts = [
        f"{k}: {_fmt(x)}"
        for k, x in (("rel_alt", t.altitude_m), ("abs_alt", t.abs_altitude_m))
        if x is not None
    ]
    if alts:
        parts.append(f"[{' '.join(alts)}]")
    gimbal = [
        f"{k}: {_fmt(x)}"
        for k, x in (("gb_yaw", t.gimbal_yaw_deg), ("gb_pitch", t.gimbal_pitch_deg))
        if x is not None
    ]
    if gimbal:
        parts.append(f"[{' '.join(gimbal)} gb_roll: 0.0]")
    if t.lrf_range_m is not None:
        parts.append(f"[measure_target_distance: {_fmt(t.lrf_range_m)}]")
    return " ".join(parts)


def _quantised_ms(samples: Sequence[Telemetry]) -> list[int]:
    times = []
    for t in samples:
        if not (math.isfinite(t.timestamp_s) and t.timestamp_s >= 0):
            raise TelemetryError(f"cannot write an SRT timestamp of {t.timestamp_s!r} s")
        times.append(round(t.timestamp_s * 1000.0))
    if any(b <= a for a, b in zip(times, times[1:], strict=False)):
        raise TelemetryError("SRT samples must have increasing timestamps at least 1 ms apart")
    return times


def format_srt(samples: Sequence[Telemetry], start_time: datetime | None = None) -> str:
    """The modern DJI ``<font>`` SRT text of ``samples`` (see :func:`write_srt`)."""
    times = _quantised_ms(samples)
    clock0 = start_time or datetime(2000, 1, 1)
    out: list[str] = []
    for i, (t, ms) in enumerate(zip(samples, times, strict=True)):
        end = times[i + 1] if i + 1 < len(times) else ms + (ms - times[i - 1] if i else 33)
        clock = (clock0 + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        out += [
            str(i + 1),
            f"{_srt_time(ms)} --> {_srt_time(end)}",
            f'<font size="28">FrameCnt: {i + 1}, DiffTime: {end - ms}ms',
            clock,
            f"{_field_line(t)} </font>",
            "",
        ]
    return "\n".join(out)


def write_srt(samples: Sequence[Telemetry], path: str | Path, start_time: datetime | None = None) -> Path:
    """Write ``samples`` as a modern DJI ``<font>`` SRT file and return its path.

    Every value is written with Python's shortest round-trip representation, so
    ``parse_srt(text, camera)`` gives back equal samples, provided timestamps are whole
    milliseconds (SRT's resolution; others are rounded), ``focal_length_mm`` is None or derived
    from ``focal_length_35mm`` and ``camera`` (it is not written: the SRT carries the 35 mm value)
    and the position is not exactly (0, 0) (DJI's "no fix").
    Gimbal roll is written as 0. ``start_time`` is the wall-clock of the first frame (date lines).
    """
    path = Path(path)
    path.write_text(format_srt(samples, start_time), encoding="utf-8")
    return path
