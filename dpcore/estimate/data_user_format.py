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

__all__ = ["DATA_USER_FILES", "DESIGN_SCHEMA", "ESTIMATE_COLUMNS", "MAX_REPLICATE_VALUES", "MEASUREMENT_COLUMNS",
           "REPLICATES", "REPLICATE_FILE", "REPLICATE_SEED", "noise_of", "replicates_info", "section", "variance_of"]

#: The data users' files every kind writes, in the order they are written.
DATA_USER_FILES = ("measurements.csv", "design.json", "estimates.csv")
#: The schema of design.json.
DESIGN_SCHEMA = "dpcore-design/1"
#: The columns of measurements.csv (one row per noisy measurement, before post-processing).
MEASUREMENT_COLUMNS = ("measurement_id", "level", "node", "value", "family", "scale", "variance", "share",
                       "phase")
#: The columns of estimates.csv (the GLS estimate of every published cell or node).
ESTIMATE_COLUMNS = ("level", "code", "estimate", "variance", "sd", "published")

#: The replicate file for spreadsheet users: R data-free replicate columns of every finest cell.
REPLICATE_FILE = "replicates.csv"
#: R, the number of replicate columns (the ACS convention), and the recorded, public seed of their draws.
REPLICATES, REPLICATE_SEED = 80, 0
#: The file is written up to this many values (cells × R: 50,000 cells at R = 80, about 60 MB of
#: text); a larger release states how to draw the same replicates from its measurements instead.
MAX_REPLICATE_VALUES = 4_000_000
_FORMULA = ("Var = (1/R) * sum over r of (rep_r - estimate)^2, for one cell or for a union of cells after summing "
            "each column (estimate and rep_1..rep_R) over its rows")


def replicates_info(n_cells: int, R: int = REPLICATES, seed: int = REPLICATE_SEED) -> dict[str, Any]:
    """The record's ``data_users.replicates``: the file (None when too large to write), R, the seed and
    the spreadsheet formula.

    >>> replicates_info(4)["file"], replicates_info(10**6)["file"]
    ('replicates.csv', None)
    """
    written = int(n_cells) * int(R) <= MAX_REPLICATE_VALUES
    info: dict[str, Any] = {"file": REPLICATE_FILE if written else None, "R": int(R), "seed": int(seed),
                            "formula": _FORMULA}
    if not written:
        info["why"] = (f"{int(n_cells):,} cells x {int(R)} columns is over {MAX_REPLICATE_VALUES:,} values; the same "
                       "replicates are drawn from measurements.csv and design.json by "
                       f"dpcore.estimate.gls.replicates(read_release(OUT), R={int(R)}, seed={int(seed)})")
    return info


def section(note: str | None = None, map_shows: str = "published", n_cells: int | None = None,
            **extra: Any) -> dict[str, Any]:
    """The record's ``data_users`` section: the files, which value the map shows, ``note`` (when
    given), the kind's ``extra`` statements and, with ``n_cells`` (the finest cells of a release
    that offers measurements), the replicate file (:func:`replicates_info`), in that order.

    >>> section("GLS estimates in estimates.csv")
    {'files': ['measurements.csv', 'design.json', 'estimates.csv'], 'map_shows': 'published', \
'note': 'GLS estimates in estimates.csv'}
    >>> list(section(measurements_offered=True))
    ['files', 'map_shows', 'measurements_offered']
    >>> section(n_cells=4)["files"][-1]
    'replicates.csv'
    """
    out: dict[str, Any] = {"files": list(DATA_USER_FILES), "map_shows": map_shows}
    if note is not None:
        out["note"] = note
    out.update(extra)
    if n_cells is not None:
        out["replicates"] = replicates_info(n_cells)
        if out["replicates"]["file"]:
            out["files"].append(REPLICATE_FILE)
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
