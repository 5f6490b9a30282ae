"""The shared format of the data users' files (issue 25): names, columns, the design schema, the
record's ``data_users`` section and the exact variance of a measurement's noise.

One rule in one place, for every kind: :mod:`dpcore.estimate.data_users` (hierarchies, trips),
:mod:`dpcore.points.data_users` and the reader :mod:`dpcore.estimate.gls` take these from here.
The module imports nothing heavy (no SciPy), so a kind that only writes the files does not pay
for the reader.
"""

from __future__ import annotations

from typing import Any

from dpcore.privacy.calibration import noise_for_cost, noise_variance

__all__ = ["DATA_USER_FILES", "DESIGN_SCHEMA", "ESTIMATE_COLUMNS", "MEASUREMENT_COLUMNS", "noise_of", "section",
           "variance_of"]

#: The data users' files every kind writes, in the order they are written.
DATA_USER_FILES = ("measurements.csv", "design.json", "estimates.csv")
#: The schema of design.json.
DESIGN_SCHEMA = "dpcore-design/1"
#: The columns of measurements.csv (one row per noisy measurement, before post-processing).
MEASUREMENT_COLUMNS = ("measurement_id", "level", "node", "value", "family", "scale", "variance", "share",
                       "phase")
#: The columns of estimates.csv (the GLS estimate of every published cell or node).
ESTIMATE_COLUMNS = ("level", "code", "estimate", "variance", "sd", "published")


def section(note: str | None = None, map_shows: str = "published", **extra: Any) -> dict[str, Any]:
    """The record's ``data_users`` section: the files, which value the map shows, ``note`` (when
    given) and the kind's ``extra`` statements, in that order.

    >>> section("GLS estimates in estimates.csv")
    {'files': ['measurements.csv', 'design.json', 'estimates.csv'], 'map_shows': 'published', \
'note': 'GLS estimates in estimates.csv'}
    >>> list(section(measurements_offered=True))
    ['files', 'map_shows', 'measurements_offered']
    """
    out: dict[str, Any] = {"files": list(DATA_USER_FILES), "map_shows": map_shows}
    if note is not None:
        out["note"] = note
    out.update(extra)
    return out


def variance_of(family: str, scale: Any) -> float:
    """The exact variance of one draw of ``family`` with ``scale`` (``gaussian_grid``: σ²;
    :func:`dpcore.privacy.calibration.noise_variance` for the discrete families).

    >>> variance_of("gaussian_grid", 2.0), round(variance_of("discrete_laplace", 1), 6)
    (4.0, 1.841347)
    """
    if family == "gaussian_grid":
        return float(scale) ** 2
    return float(noise_variance(family, scale))


def noise_of(definition: str, budget: float, sensitivity: float) -> tuple[str, Any, float]:
    """``(family, scale, variance)`` of the noise that spends ``budget`` (ε or ρ) on counts of
    ``sensitivity`` (:func:`dpcore.privacy.calibration.noise_for_cost`, the exact scale the release
    drew with, and its exact variance).

    >>> noise_of("pure", 0.5, 1)
    ('discrete_laplace', Fraction(2, 1), 7.83539...)
    """
    family, scale = noise_for_cost(definition, budget, sensitivity)
    return family, scale, variance_of(family, scale)
