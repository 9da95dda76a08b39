"""The scale's checks' results, carried by a frame's result and a violation: the scale check from
the vehicles and the lanes (:class:`ScaleCheckResult`, pipelines.scale_session) and the pitch check
from the traffic's speeds (:class:`PitchCheckResult`, pipelines.pitch_check). Re-exported by
:mod:`pipelines.types`."""

from __future__ import annotations

import math
from dataclasses import dataclass

# The scale check's statuses (ScaleCheckResult.status; pipelines.scale_session)
UNVERIFIED, OK, SUSPECT = "unverified", "ok", "suspect"
SCALE_CHECK_STATUSES = (UNVERIFIED, OK, SUSPECT)


@dataclass(frozen=True, slots=True)
class RulerReading:
    """One ruler's own reading of a session's scale: ``ruler`` "cars" (``n`` vehicles) or "lanes"
    (``n`` frames measured), ``ratio`` and ``sigma`` as :class:`ScaleCheckResult`'s."""

    ruler: str
    ratio: float
    sigma: float
    n: int

    def to_dict(self) -> dict[str, object]:
        return {
            "ruler": self.ruler,
            "ratio": round(self.ratio, 4),
            "sigma": round(self.sigma, 4),
            "n": self.n,
        }

    def describe(self) -> str:
        unit = "vehicles" if self.ruler == "cars" else "frames"
        return f"{self.ruler} {self.ratio:.3f} +- {self.sigma:.3f} ({self.n} {unit})"


@dataclass(frozen=True, slots=True)
class ScaleCheckResult:
    """A session's scale check: ``ratio`` is the telemetry's scale over the one the cars and the
    lanes imply (1.10: the telemetry makes every distance, so every speed, 10 % too large), ``sigma``
    its standard deviation, ``n`` the vehicles (tracks) behind it; ``rulers`` each ruler's own
    reading (the cars' sizes, the lane lines' spacing); ``reason`` says why it is unverified or
    suspect (empty when ok)."""

    status: str
    ratio: float | None = None
    sigma: float | None = None
    n: int = 0
    reason: str = ""
    rulers: tuple[RulerReading, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "status": self.status,
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "sigma": None if self.sigma is None else round(self.sigma, 4),
            "n": self.n,
            "reason": self.reason,
            "rulers": [r.to_dict() for r in self.rulers],
        }

    @classmethod
    def from_dict(cls, data: dict) -> ScaleCheckResult:
        ratio, sigma = data.get("ratio"), data.get("sigma")
        rulers = tuple(
            RulerReading(str(r["ruler"]), float(r["ratio"]), float(r["sigma"]), int(r.get("n", 0)))
            for r in data.get("rulers") or ()
        )
        return cls(
            str(data.get("status", UNVERIFIED)),
            None if ratio is None else float(ratio),
            None if sigma is None else float(sigma),
            int(data.get("n", 0)),
            str(data.get("reason", "")),
            rulers,
        )

    def describe(self) -> str:
        if self.ratio is None or self.sigma is None:
            return f"scale check {self.status}" + (f" ({self.reason})" if self.reason else "")
        text = f"scale check {self.status}: {self.ratio:.3f} +- {self.sigma:.3f}"
        if any(r.ruler != "cars" for r in self.rulers):  # the lanes read: every ruler named
            text += " from " + ", ".join(r.describe() for r in self.rulers)
        else:
            text += f" from {self.n} vehicles"
        return text + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True, slots=True)
class PitchCheckResult:
    """A session's pitch check against the traffic (pipelines.pitch_check): ``error_deg`` is the
    pitch used minus the one the traffic gives (NaN: none yet), ``sigma_deg`` its sigma, ``n`` the
    tracks behind it, the status and why (empty when ok)."""

    status: str
    error_deg: float = math.nan
    sigma_deg: float = math.nan
    n: int = 0
    reason: str = ""

    def to_dict(self) -> dict:
        def r(v: float) -> float | None:
            return round(v, 3) if math.isfinite(v) else None

        return {"status": self.status, "pitch_error_deg": r(self.error_deg), "sigma_deg": r(self.sigma_deg),
                "vehicles": self.n, "reason": self.reason}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> PitchCheckResult:
        def f(key: str) -> float:
            v = data.get(key)
            return math.nan if v is None else float(v)

        return cls(
            str(data.get("status", UNVERIFIED)),
            f("pitch_error_deg"),
            f("sigma_deg"),
            int(data.get("vehicles", 0)),
            str(data.get("reason", "")),
        )

    def describe(self) -> str:
        if not (math.isfinite(self.error_deg) and math.isfinite(self.sigma_deg)):
            return f"pitch check {self.status}" + (f" ({self.reason})" if self.reason else "")
        text = (
            f"pitch check {self.status}: the pitch used is {self.error_deg:+.2f} +- {self.sigma_deg:.2f} deg "
            f"off the traffic's ({self.n} vehicles)"
        )
        return text + (f" ({self.reason})" if self.reason and self.status != SUSPECT else "")


__all__ = [
    "OK",
    "SCALE_CHECK_STATUSES",
    "SUSPECT",
    "UNVERIFIED",
    "PitchCheckResult",
    "RulerReading",
    "ScaleCheckResult",
]
