"""Vehicle speed from ground displacements: a robust windowed fit with an uncertainty.

What lives here, from the bottom up (each module imports only the ones above it in this list):

* :mod:`~pipelines.speed.fit`: units (:func:`kmh`, :func:`m_per_s`) and Theil-Sen line fits
  (:func:`theil_sen`, :func:`theil_sen_many`), and why Theil-Sen.
* :mod:`~pipelines.speed.noise`: a fitted slope's standard error from the residual scatter
  (:func:`slope_sigma`, :func:`noise_stats`, :func:`ar1_inflation`).
* :mod:`~pipelines.speed.velocity`: the sigma model - each track's velocity at its last sample,
  carried by its acceleration, and its sigma (:func:`velocity_now_many`, :func:`robust_speed_fit`,
  :func:`robust_speed_fit_many`).
* :mod:`~pipelines.speed.sizes`: the box size checks of a speed's trust flag (:func:`size_mismatch`,
  :func:`size_changes`).
* :mod:`~pipelines.speed.estimator`: :class:`SpeedEstimator`, which integrates each track's
  per-step ground displacement (metres, in the ego-motion-stabilised ground frame) into a position
  track and re-fits its velocity over a trailing time window at every update.

Pure numpy and the engine's config and types (:mod:`pipelines.config`, :mod:`pipelines.types`);
imported by the rest of the engine (the pipeline, its builder, the track relinker) and by anything
above it. This package re-exports the public API; private helpers are imported from their module.
"""

from __future__ import annotations

from pipelines.speed.estimator import SpeedEstimator
from pipelines.speed.fit import kmh, m_per_s, theil_sen, theil_sen_many
from pipelines.speed.noise import ar1_inflation, noise_stats, slope_sigma, slope_sigma_many
from pipelines.speed.sizes import size_changes, size_mismatch
from pipelines.speed.velocity import (
    half_indices,
    robust_speed_fit,
    robust_speed_fit_many,
    velocity_now_many,
)

__all__ = [
    "SpeedEstimator",
    "kmh",
    "m_per_s",
    "robust_speed_fit",
    "robust_speed_fit_many",
    "slope_sigma",
    "size_changes",
    "size_mismatch",
    "slope_sigma_many",
    "theil_sen",
    "theil_sen_many",
    "velocity_now_many",
    "ar1_inflation",
    "half_indices",
    "noise_stats",
]
