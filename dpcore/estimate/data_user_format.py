"""The shared format of the data users' files (issue 25): names, columns, the design schema, the
record's ``data_users`` section and the exact variance of a measurement's noise.

One rule in one place, for every kind: :mod:`dpcore.estimate.data_users` (hierarchies, trips),
:mod:`dpcore.points.data_users` and the reader :mod:`dpcore.estimate.gls` take these from here.
The module imports nothing heavy (no SciPy), so a kind that only writes the files does not pay
for the reader.

Large measurement files are Parquet: above :data:`PARQUET_ROWS` rows a release writes
``measurements.parquet`` instead of ``measurements.csv`` (the same columns; a million rows of CSV are
about 60 MB of text and seconds to parse), ``design.json``'s ``measurements_file`` and the record name
the file written (:func:`name_written`), and every reader takes either (:func:`measurements_in`,
:func:`read_measurements`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpcore.errors import ParameterError
from dpcore.privacy.calibration import noise_for_cost, noise_variance

__all__ = ["DATA_USER_FILES", "DESIGN_SCHEMA", "ESTIMATE_COLUMNS", "MAX_REPLICATE_VALUES", "MEASUREMENTS_CSV", "no_interval_note",
           "MEASUREMENTS_PARQUET", "MEASUREMENT_COLUMNS", "MEASUREMENT_FILES", "PARQUET_ROWS", "PRECISION_SOURCE",
           "REPLICATES", "REPLICATE_FILE", "REPLICATE_SEED", "coordinate_precision", "measurements_in",
           "measurements_name", "name_written", "noise_of", "not_offered", "parquet_bytes", "precision_statement",
           "read_measurements", "replicates_info", "section", "variance_of"]

#: The data users' files every kind writes, in the order they are written.
DATA_USER_FILES = ("measurements.csv", "design.json", "estimates.csv")
#: The measurements' file: CSV, or Parquet above :data:`PARQUET_ROWS` rows (the same columns).
MEASUREMENTS_CSV, MEASUREMENTS_PARQUET = "measurements.csv", "measurements.parquet"
MEASUREMENT_FILES = (MEASUREMENTS_CSV, MEASUREMENTS_PARQUET)
#: Above this many rows the measurements are written as ``measurements.parquet`` (measured: 1.2 M rows
#: are 71 MB of CSV and 3.7 MB of Parquet, which also reads faster).
PARQUET_ROWS = 1_000_000
#: The schema of design.json.
DESIGN_SCHEMA = "dpcore-design/1"
#: The columns of measurements.csv (one row per noisy measurement, before post-processing).
MEASUREMENT_COLUMNS = ("measurement_id", "level", "node", "value", "family", "scale", "variance", "share",
                       "phase")
#: The columns of estimates.csv (the GLS estimate of every published cell or node).
ESTIMATE_COLUMNS = ("level", "code", "estimate", "variance", "sd", "published")

#: Where a points release's coordinate precision comes from (release.json and design.json state it).
PRECISION_SOURCE = ("stated by the curator as public knowledge of the data's format (e.g. its documented rounding); "
                    "not read from the data")


def coordinate_precision(value: Any, where: str = "--coordinate-precision") -> float | None:
    """The points' coordinate precision in degrees as the curator states it (None: not stated).

    A public fact of the data's format (coordinates rounded to 4 decimals: 0.0001), never read from
    the data; it changes no noise and no charge, only how the data users' polygon intervals weigh
    cut cells (:func:`dpcore.estimate.polygon_interval.lattice_shares`).  ``where`` names the input.

    >>> coordinate_precision("0.0001"), coordinate_precision(None), coordinate_precision("")
    (0.0001, None, None)
    >>> coordinate_precision("-1")
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: --coordinate-precision must be a positive number of degrees (got -1): e.g. 0.0001 \
for coordinates rounded to 4 decimals, as the data's documentation states (never measured from the data); or leave it out.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        p = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        p = math.nan
    if not (math.isfinite(p) and p > 0):
        raise ParameterError(f"{where} must be a positive number of degrees (got {value}): e.g. 0.0001 for "
                             "coordinates rounded to 4 decimals, as the data's documentation states (never "
                             "measured from the data); or leave it out.")
    return p


def precision_statement(precision: float) -> dict[str, Any]:
    """The record's statement of a points release's coordinate precision (``data_users``).

    >>> precision_statement(0.0001)["degrees"]
    0.0001
    """
    return {"degrees": float(precision), "source": PRECISION_SOURCE,
            "intervals": "polygon intervals (dpcore interval --polygon, ReleaseIntervals.of_polygons, the app) "
                         "weigh a cut cell by its share of the lattice of positions at this precision unless "
                         "given another --precision; without it, by its area share"}


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


def not_offered(note: str, why: str) -> dict[str, Any]:
    """The record's ``data_users`` section of a release that writes none of the data users' files: no
    file listed, ``measurements_offered`` false and ``why`` (what is wrong and how to fix it), the way a
    points release states its reason.

    >>> not_offered("release.csv shows the published values.", "codes repeat: make them unique.")
    {'files': [], 'map_shows': 'published', 'note': 'release.csv shows the published values.', \
'measurements_offered': False, 'why': 'codes repeat: make them unique.'}
    """
    return {"files": [], "map_shows": "published", "note": note, "measurements_offered": False, "why": why}


def no_interval_note(why: str, files: Sequence[str], *, estimates: str, command: str, answers: str,
                     items: str) -> str:
    """The record's ``outputs.intervals`` of a release whose ``ci95_low``/``ci95_high`` are left empty
    (no valid 95 % interval is known for its released values): ``why``, then where a data user gets one
    instead: ``estimates.csv`` (holding ``estimates``) and ``dpcore interval`` (``command``: its options
    after ``--codes FILE``; ``answers``: what it answers) when the release wrote the data users' files
    (``files``), else that none can be given for its ``items``.

    >>> no_interval_note("Biased.", [], estimates="", command="", answers="", items="flows")
    "Empty for this release: Biased. This release offers no data users' files (release.json: data_users), \
so no interval can be given for its flows."
    """
    where = (f"For an interval, use the data users' files: estimates.csv holds {estimates}, and 'python -m dpcore "
             f"interval --release OUT --codes FILE{command}' (or the Release step's interval tool) gives the "
             f"estimate and interval of {answers}." if "estimates.csv" in files else
             "This release offers no data users' files (release.json: data_users), so no interval can be given "
             f"for its {items}.")
    return f"Empty for this release: {why} {where}"


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


def measurements_name(rows: int, parquet_above: int | None = None) -> str:
    """The measurements' file name for ``rows`` rows: Parquet above ``parquet_above`` (default
    :data:`PARQUET_ROWS`), else CSV.

    >>> measurements_name(10), measurements_name(10, parquet_above=9)
    ('measurements.csv', 'measurements.parquet')
    """
    return MEASUREMENTS_PARQUET if rows > (PARQUET_ROWS if parquet_above is None else parquet_above) \
        else MEASUREMENTS_CSV


def measurements_in(files: Mapping[str, Any] | Sequence[str], design: Mapping[str, Any] | None = None
                    ) -> str | None:
    """The measurements' file among a release's file names (or a name -> bytes mapping): the one
    ``design`` (``design.json``) names when it is there (a folder may keep an older release's other
    file), else the first of :data:`MEASUREMENT_FILES` present; None without one.

    >>> measurements_in(["design.json", "measurements.parquet"]), measurements_in({"release.csv": b""})
    ('measurements.parquet', None)
    >>> measurements_in(MEASUREMENT_FILES, {"measurements_file": "measurements.parquet"})
    'measurements.parquet'
    """
    named = (design or {}).get("measurements_file")
    if named in MEASUREMENT_FILES and named in files:
        return str(named)
    return next((n for n in MEASUREMENT_FILES if n in files), None)


def parquet_bytes(table: Any) -> bytes:
    """A pyarrow Table or pandas DataFrame as Parquet bytes (zstd; no index column)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def read_measurements(data: bytes | str | Path, name: str = MEASUREMENTS_CSV,
                      columns: Sequence[str] | None = None) -> Any:
    """The measurements as a pandas DataFrame from the bytes (or path) of ``measurements.csv`` or
    ``measurements.parquet`` (``name``: which; a path's own suffix decides), ``node`` and ``level`` as
    text (codes as in ``release.csv``), only ``columns`` when given.

    >>> f = read_measurements(b"measurement_id,level,node,value\\n0,1,007,5\\n")
    >>> f["node"].tolist(), f["value"].tolist()
    (['007'], [5])
    """
    import io

    import pandas as pd

    if isinstance(data, (str, Path)):
        name, data = Path(data).name, Path(data).read_bytes()
    cols = list(columns) if columns is not None else None
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        frame = pq.read_table(io.BytesIO(data), columns=cols).to_pandas()
        for c in ("node", "level"):
            if c in frame:
                frame[c] = frame[c].astype(str)
        return frame
    return pd.read_csv(io.BytesIO(data), usecols=cols, dtype={"node": str, "level": str})


def name_written(files: dict[str, bytes]) -> dict[str, bytes]:
    """``files`` with ``release.json`` naming ``measurements.parquet`` where that file was written
    instead of ``measurements.csv`` (``outputs.files`` and the ``data_users`` section); unchanged otherwise.

    The record is made before (or without knowing) how many measurements there are; this puts the
    name of the file actually written in it.
    """
    import orjson

    if MEASUREMENTS_PARQUET not in files or "release.json" not in files:
        return files
    rec = orjson.loads(files["release.json"])
    outputs = rec.get("outputs") or {}
    if isinstance(outputs.get("files"), list):
        outputs["files"] = [MEASUREMENTS_PARQUET if f == MEASUREMENTS_CSV else f for f in outputs["files"]]
    if rec.get("data_users"):
        text = orjson.dumps(rec["data_users"]).decode().replace(MEASUREMENTS_CSV, MEASUREMENTS_PARQUET)
        rec["data_users"] = orjson.loads(text)
    return {**files, "release.json": orjson.dumps(rec, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)}
