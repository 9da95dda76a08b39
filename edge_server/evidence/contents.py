"""What an evidence pack holds, file by file, made from the violation as stored and the engine's
record of it (``<stem>.record.json``, written by the recorder when the violation closed:
the engine's violation, the track's measured positions, the configuration and session state in
force, the models and software, the clock).

Pure functions from dictionaries to bytes; :mod:`edge_server.evidence.pack` signs and writes them.
Each file's meaning is in :data:`DESCRIPTIONS` (listed in the manifest) and docs/evidence.md.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from typing import Any

from pipelines.types import PitchCheckResult, ScaleCheckResult

RECORD_FORMAT = "airpatrol-violation-record/1"

DESCRIPTIONS = {
    "summary.html": "printable summary for a court: what was measured, how, with what, and how to check it",
    "violation.json": "the violation as stored (with its review status) and as the engine measured it",
    "snapshot.jpg": "the vehicle on a frame of the measuring base",
    "clip.mp4": "annotated video from before the violation to after it (re-encoded, boxes drawn)",
    "source.mp4": "the received video around the violation, remuxed without re-encoding",
    "track.csv": "every measured ground position of the track: time, frame, box, speed and its sigma, GSD",
    "telemetry.csv": "the drone's telemetry on the track's frames (altitude, gimbal, lens, GPS, rangefinder)",
    "computation.json": "every input of the speed: camera, height above the road and its source, GSD, base, "
    "scale check, optics, the ticket's arithmetic",
    "rules.json": "the speed rules and tolerance in force",
    "session.json": "the stream's state when the violation closed (pipeline, height reference, clock)",
    "provenance.json": "software version and commit, model files' SHA-256, server, UTC times, clock sync",
    "audit.json": "the violation's audit-trail entries (who did what, when, before/after) and a signed "
    "checkpoint of the whole trail when the pack was made",
}

TRACK_COLUMNS = [
    "t_s", "frame", "x_m", "y_m", "segment", "trusted", "in_base", "zone", "x1", "y1", "x2", "y2",
    "ground_x_m", "ground_y_m", "speed_kmh", "sigma_kmh", "gsd_cm_per_px",
]  # fmt: skip
TELEMETRY_COLUMNS = [
    "frame", "t_s", "telemetry_time_s", "source", "camera", "altitude_m", "gimbal_pitch_deg",
    "gimbal_yaw_deg", "focal_length_mm", "focal_length_35mm", "digital_zoom", "latitude", "longitude",
    "abs_altitude_m", "lrf_range_m",
]  # fmt: skip


def _num(value: Any, digits: int = 4) -> Any:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else round(value, digits)
    return "" if value is None else value


def to_json(data: Any) -> bytes:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=str).encode() + b"\n"


def track_point_dict(p: Any) -> dict:
    """A :class:`pipelines.types.TrackPoint` as the record keeps it."""
    tel = p.telemetry
    return {
        "t_s": p.t,
        "frame": p.frame,
        "x_m": p.x_m,
        "y_m": p.y_m,
        "segment": p.segment,
        "trusted": p.trusted,
        "in_base": p.in_base,
        "zone": p.zone,
        "bbox_xyxy": list(p.bbox_xyxy),
        "ground_xy_m": None if p.ground_xy_m is None else list(p.ground_xy_m),
        "speed_kmh": p.speed_kmh if math.isfinite(p.speed_kmh) else None,
        "sigma_kmh": p.sigma_kmh if math.isfinite(p.sigma_kmh) else None,
        "gsd_m_per_px": p.gsd_m_per_px if math.isfinite(p.gsd_m_per_px) else None,
        "telemetry": None
        if tel is None
        else {
            "timestamp_s": tel.timestamp_s,
            "source": tel.source,
            "camera": tel.camera,
            "altitude_m": tel.altitude_m,
            "gimbal_pitch_deg": tel.gimbal_pitch_deg,
            "gimbal_yaw_deg": tel.gimbal_yaw_deg,
            "focal_length_mm": tel.focal_length_mm,
            "focal_length_35mm": tel.focal_length_35mm,
            "digital_zoom": tel.digital_zoom,
            "latitude": tel.latitude,
            "longitude": tel.longitude,
            "abs_altitude_m": tel.abs_altitude_m,
            "lrf_range_m": tel.lrf_range_m,
        },
    }


def track_csv(trace: list[dict]) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(TRACK_COLUMNS)
    for p in trace:
        box = p.get("bbox_xyxy") or [None] * 4
        ground = p.get("ground_xy_m") or [None, None]
        gsd = p.get("gsd_m_per_px")
        w.writerow(
            [_num(p.get("t_s"), 4), p.get("frame"), _num(p.get("x_m"), 3), _num(p.get("y_m"), 3), p.get("segment"),
             int(bool(p.get("trusted"))), int(bool(p.get("in_base"))), p.get("zone") or "",
             *(_num(b, 1) for b in box), _num(ground[0], 3), _num(ground[1], 3), _num(p.get("speed_kmh"), 2),
             _num(p.get("sigma_kmh"), 2), "" if gsd is None else round(100.0 * gsd, 3)]
        )  # fmt: skip
    return out.getvalue().encode()


def telemetry_csv(trace: list[dict]) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(TELEMETRY_COLUMNS)
    for p in trace:
        tel = p.get("telemetry")
        if not tel:
            continue
        w.writerow(
            [p.get("frame"), _num(p.get("t_s"), 4), _num(tel.get("timestamp_s"), 4)]
            + [_num(tel.get(c), 7) for c in TELEMETRY_COLUMNS[3:]]
        )
    return out.getvalue().encode()


def _gsd_summary(trace: list[dict]) -> dict | None:
    values = [p["gsd_m_per_px"] for p in trace if p.get("in_base") and p.get("gsd_m_per_px") is not None]
    if not values:
        return None
    return {
        "over": "the measuring base's positions, at each box's ground anchor",
        "min_cm_per_px": round(100 * min(values), 3),
        "mean_cm_per_px": round(100 * sum(values) / len(values), 3),
        "max_cm_per_px": round(100 * max(values), 3),
        "n": len(values),
    }


def computation(stored: dict, record: dict | None) -> dict:
    """Every input of the ticket's speed, as one document."""
    engine = (record or {}).get("violation") or {}
    config = (record or {}).get("config") or {}
    session = (record or {}).get("session") or {}
    trace = (record or {}).get("trace") or []
    return {
        "ticket": {
            "speed_kmh": stored.get("ticket_speed_kmh"),
            "sigma_kmh": stored.get("ticket_sigma_kmh"),
            "confidence_k": stored.get("confidence_k"),
            "tolerance_kmh": stored.get("tolerance_kmh"),
            "speed_limit_kmh": stored.get("speed_limit_kmh"),
            "status": stored.get("status"),
            "status_reason": stored.get("status_reason"),
            "rule": (config.get("rules") or {}).get("ticket_rule"),
        },
        "measuring_base": stored.get("base"),
        "scale": stored.get("scale"),
        "scale_check": stored.get("scale_check"),
        "pitch_check": stored.get("pitch_check"),
        "gsd": _gsd_summary(trace),
        "camera": config.get("camera"),
        "speed_config": config.get("speed"),
        "height_reference": session.get("height_reference"),
        "height_reference_log": session.get("height_reference_log"),
        "optics": session.get("optics"),
        "rangefinder": session.get("rangefinder"),
        "engine_violation": engine or None,
    }


def _fmt(value: Any) -> str:
    """A number with one decimal; anything else (None: not recorded) as it is."""
    return f"{value:.1f}" if isinstance(value, int | float) else ("?" if value is None else str(value))


def _row(label: str, value: Any) -> str:
    return (
        f"<tr><th>{html.escape(label)}</th><td>{html.escape('' if value is None else str(value))}</td></tr>"
    )


def _scale_text(scale: dict) -> str:
    """The scale row: its source, the height above the road and the pitch, each with its sigma, and how
    far the traffic's pitch moved the pitch (pitch_check.correct)."""
    if not scale:
        return "not recorded"
    height = f"{scale.get('height_above_road_m')} ± {scale.get('height_sigma_m')} m"
    text = f"{scale.get('source')}: {height} above the road"
    if scale.get("pitch_deg") is not None:
        text += f", pitch {scale['pitch_deg']} ± {scale.get('pitch_sigma_deg')}°"
    if moved := scale.get("pitch_from_traffic_deg"):
        text += f" ({moved:+.2f}° from the traffic's speeds)"
    return text


def summary_html(manifest: dict, stored: dict, record: dict | None, files: list[dict]) -> bytes:
    """The printable summary page (self-contained; the snapshot is the pack's own file)."""
    comp = computation(stored, record)
    t = comp["ticket"]
    base = comp["measuring_base"] or {}
    scale = comp["scale"] or {}
    check = comp["scale_check"] or {}
    pitch = comp["pitch_check"] or {}
    prov = (record or {}).get("software") or {}
    clock = (record or {}).get("clock") or {}
    speed = (
        "none (no measuring base)"
        if t["speed_kmh"] is None
        else f"{_fmt(t['speed_kmh'])} ± {_fmt(t['sigma_kmh'])} km/h"
    )
    rows = [
        _row("Violation", f"#{manifest['violation_id']} (session {manifest['session_id']}, server {manifest['server_id']})"),
        _row("Time (UTC)", stored.get("occurred_at")),
        _row("Clock", clock.get("detail") or "not recorded"),
        _row("Place", f"{stored.get('latitude')}, {stored.get('longitude')}" if stored.get("latitude") is not None else "no GPS fix"),
        _row("Zone and limit", f"{stored.get('zone')}: {stored.get('speed_limit_kmh')} km/h"),
        _row("Vehicle", stored.get("class_name")),
        _row("Ticket speed", speed),
        _row("Tolerance", None if t["tolerance_kmh"] is None else f"{_fmt(t['tolerance_kmh'])} km/h ({t['rule']})"),
        _row("Status", f"{t['status']}" + (f": {t['status_reason']}" if t["status_reason"] else "")),
        _row("Measuring base", f"{base.get('duration_s')} s, {base.get('distance_m')} m, {base.get('n_samples')} positions" + (f", measured on track {base['track_id']} (the same vehicle's longer run)" if base.get("track_id") is not None else "") if base else "none"),
        _row("Scale", _scale_text(scale)),
        _row("Scale check", ScaleCheckResult.from_dict(check).describe() if check else "off"),
        _row("Pitch check", PitchCheckResult.from_dict(pitch).describe() if pitch else "off"),
        _row("Software", f"{prov.get('name', 'airpatrol')} {prov.get('version', '?')}, commit {prov.get('commit') or 'unknown'}"),
        _row("Pack made", f"{manifest['made_at']}" + (" (later, on request: not when the violation was recorded)" if manifest.get("made_later") else "")),
        _row("Signing key", "SHA256:" + manifest["signing_key"]),
    ]  # fmt: skip
    missing = "".join(
        f"<li>{html.escape(m['what'])}: {html.escape(m['why'])}</li>" for m in manifest.get("missing", [])
    )
    listing = "".join(
        f"<tr><td>{html.escape(f['path'])}</td><td>{f['bytes']}</td><td><code>{f['sha256']}</code></td>"
        f"<td>{html.escape(f.get('description', ''))}</td></tr>"
        for f in files
    )
    img = (
        '<img src="snapshot.jpg" alt="the vehicle" style="max-width:40%;float:right">'
        if any(f["path"] == "snapshot.jpg" for f in files)
        else ""
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Evidence: violation {manifest["violation_id"]}</title>
<style>body{{font:11pt serif;margin:2em}}table{{border-collapse:collapse}}th,td{{border:1px solid #999;padding:3px 6px;text-align:left;vertical-align:top}}code{{font-size:8pt}}@media print{{a{{color:black}}}}</style></head>
<body><h1>Speed violation: evidence pack</h1>{img}
<table>{"".join(rows)}</table>
{"<h2>Not in this pack</h2><ul>" + missing + "</ul>" if missing else ""}
<h2>Files</h2><p>Each file's SHA-256 is in <code>manifest.json</code>, signed with the Ed25519 key above
(<code>manifest.sig</code>). Check the whole pack with <code>airpatrol verify PACK --key FINGERPRINT</code>,
FINGERPRINT being the agency's published one (docs/evidence.md).</p>
<table><tr><th>File</th><th>Bytes</th><th>SHA-256</th><th>What it is</th></tr>{listing}</table>
</body></html>
"""
    return page.encode()


def data_files(stored: dict, record: dict | None, manifest_meta: dict) -> list[tuple[str, bytes]]:
    """The pack's generated files (all but the media and the summary), in pack order."""
    record = record or {}
    trace = record.get("trace") or []
    out: list[tuple[str, bytes]] = [
        ("violation.json", to_json({"stored": stored, "engine": record.get("violation")})),
    ]
    if trace:
        out += [("track.csv", track_csv(trace)), ("telemetry.csv", telemetry_csv(trace))]
    out.append(("computation.json", to_json(computation(stored, record if record else None))))
    if record.get("config", {}).get("rules") is not None:
        out.append(("rules.json", to_json(record["config"]["rules"])))
    if record.get("session") is not None:
        out.append(("session.json", to_json(record["session"])))
    out.append(
        (
            "provenance.json",
            to_json(
                {
                    "software": record.get("software"),
                    "models": record.get("models"),
                    "server_id": manifest_meta["server_id"],
                    "session_id": manifest_meta["session_id"],
                    "violation_id": manifest_meta["violation_id"],
                    "occurred_at": stored.get("occurred_at"),
                    "recorded_at": record.get("recorded_at"),
                    "clock_when_recorded": record.get("clock"),
                    "pack_made_at": manifest_meta["made_at"],
                    "clock_when_packed": manifest_meta["clock"],
                    "pack_made_with": manifest_meta["software"],
                    "made_later": manifest_meta["made_later"],
                }
            ),
        )
    )
    return out


__all__ = [
    "DESCRIPTIONS",
    "RECORD_FORMAT",
    "computation",
    "data_files",
    "summary_html",
    "telemetry_csv",
    "to_json",
    "track_csv",
    "track_point_dict",
]
