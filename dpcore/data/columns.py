"""Guessing the columns of a table by their names; the app and the command line offer the
guesses, the curator confirms them.

* point tables: :func:`detect_coordinate_columns` finds the latitude and longitude columns
  (``lat``/``lon``, ``pickup_latitude``, ``x``/``y`` ...) and :func:`detect_user_column` the
  column that identifies a person;
* code tables (census counts, area lists, O/D trips): :func:`guess_level_columns` and the
  name tests :func:`count_like`, :func:`coord_like` and :func:`name_like` with their name lists.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any, TypeAlias

import pandas as pd

__all__ = [
    "coord_like",
    "count_like",
    "detect_coordinate_columns",
    "detect_user_column",
    "guess_level_columns",
    "name_key",
    "name_like",
]

# --------------------------------------------------------------------------------------
# Column detection
# --------------------------------------------------------------------------------------

_LAT_TOKENS = frozenset({"lat", "latitude", "lati"})
_LON_TOKENS = frozenset({"lon", "lng", "long", "longitude", "longi"})
_Y_NAMES = frozenset({"y", "ycoord", "y_coord", "coord_y", "point_y", "y_coordinate", "pos_y"})
_X_NAMES = frozenset({"x", "xcoord", "x_coord", "coord_x", "point_x", "x_coordinate", "pos_x"})


def _tokens(name: object) -> list[str]:
    """Lower-case word tokens of a column name: 'Start Lat' / 'startLat' -> ['start', 'lat']."""
    s = str(name).strip()
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"([A-Za-z])([0-9])", r"\1_\2", s)
    return [t for t in re.split(r"[^0-9a-zA-Z]+", s.lower()) if t]


def _looks_numeric(s: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(s):
        return False
    if pd.api.types.is_numeric_dtype(s):
        return True
    sample = s.dropna().head(50)
    if len(sample) == 0:
        return False
    parsed = pd.to_numeric(sample.astype(str).str.strip(), errors="coerce")
    return bool(parsed.notna().mean() >= 0.8)


_Candidate: TypeAlias = "tuple[int, Any, tuple[str, ...], bool]"


def _coordinate_candidates(
    df: pd.DataFrame, tokens_of_axis: frozenset[str], xy_names: frozenset[str]
) -> list[_Candidate]:
    """``(tier, column, stem, weak)`` for every column that may hold this axis.

    ``stem`` is the name without the axis word (``pickup`` for ``pickup_latitude``).
    ``weak`` marks a name that qualifies only through the word "long" among other
    words (``long_name``, ``trip_long``): such a column is used only next to a
    latitude column with the same stem (``start_long`` with ``start_lat``).
    """
    found: list[_Candidate] = []
    for col in df.columns:
        toks = _tokens(col)
        joined = "_".join(toks)
        axis = [t for t in toks if t in tokens_of_axis]
        if len(toks) == 1 and axis:
            found.append((0, col, (), False))
        elif axis:
            stem = tuple(t for t in toks if t not in tokens_of_axis)
            found.append((1, col, stem, set(axis) == {"long"}))
        elif joined in xy_names:
            found.append((2, col, tuple(t for t in toks if t not in ("x", "y")), False))
    return found


def detect_coordinate_columns(df: pd.DataFrame) -> tuple[str | None, str | None]:
    """Find the latitude and longitude columns by name.

    Names are compared case-insensitively as word tokens (split at spaces,
    punctuation, camelCase and digits).  In order of preference:

    0. a name that is just ``lat``/``latitude`` (``lon``/``lng``/``long``/``longitude``);
    1. a name with one of those as a whole word: ``Start Lat``, ``pickup_latitude``,
       ``decimalLatitude``, ``Lat_DD`` (but not ``latency`` or ``plate``; and
       ``long`` among other words, as in ``long_name``, only next to a latitude
       column with the same other words, as ``start_long`` with ``start_lat``);
    2. ``y``/``x`` and the like (``POINT_Y``, ``x_coord``).

    When several pairs qualify, a pair whose names match apart from the axis word
    (``pickup_latitude`` with ``pickup_longitude``) beats a mixed pair, columns
    that hold numbers beat text columns, and then the leftmost columns win.

    Parameters
    ----------
    df : pandas.DataFrame
        The table as read.

    Returns
    -------
    (lat_col, lon_col) : tuple of str or None
        Each None when no column qualifies.
    """
    lats = _coordinate_candidates(df, _LAT_TOKENS, _Y_NAMES)
    lons = _coordinate_candidates(df, _LON_TOKENS, _X_NAMES)
    position = {c: i for i, c in enumerate(df.columns)}
    numeric: dict[Any, bool] = {}

    def is_numeric(col: Any) -> bool:
        if col not in numeric:
            numeric[col] = _looks_numeric(df[col]) if df.columns.is_unique else True
        return numeric[col]

    pairs = [
        (
            max(lat_tier, lon_tier),
            lat_stem != lon_stem,
            not is_numeric(lat),
            not is_numeric(lon),
            position[lat],
            position[lon],
            lat,
            lon,
        )
        for (lat_tier, lat, lat_stem, _), (lon_tier, lon, lon_stem, weak) in itertools.product(
            lats, lons
        )
        if lat != lon and not (weak and lat_stem != lon_stem)
    ]
    if pairs:
        best = min(pairs, key=lambda p: p[:6])
        return best[6], best[7]

    def best_single(cands: list[_Candidate]) -> Any:
        usable = [c for c in cands if not c[3]]
        if not usable:
            return None
        return min(usable, key=lambda c: (c[0], not is_numeric(c[1]), position[c[1]]))[1]

    return best_single(lats), best_single(lons)


# Person-like nouns; earlier ones are preferred when several columns qualify.
_USER_NOUNS = (
    "user", "person", "individual", "participant", "respondent", "subject", "patient",
    "customer", "client", "member", "passenger", "rider", "traveler", "traveller", "account",
    "device", "phone", "imei", "taxi", "vehicle", "driver",
)  # fmt: skip
_ID_TOKENS = frozenset(
    {"id", "uid", "key", "hash", "hashed", "code", "no", "number", "name", "ident"}
)
_USER_EXACT = {
    "uid": 0, "userid": 0, "username": 0, "personid": 1, "pid": 1, "deviceid": 15,
    "maid": 15, "ad_id": 15, "idfa": 15, "gaid": 15, "hack_license": 20, "medallion": 20,
}  # fmt: skip


def detect_user_column(df: pd.DataFrame) -> str | None:
    """Find a user-id column by name, or None.

    Recognised: ``user_id``, ``userid``, ``uid``, ``user``, ``person_id``,
    ``device_id``, ``participant_id``, ``customer_id``, ``taxi_id``, ... -- a
    person-, device- or vehicle-like word alone or with ``id``/``key``/``hash``/
    ``name`` (``User ID``, ``hashed_user_id``, ``deviceId``), and a few
    well-known ids (``maid``, ``medallion``).  Person-like names beat device- and
    vehicle-like ones; then the leftmost column wins.

    Detection only proposes a column: the unit of privacy is the curator's choice.

    Parameters
    ----------
    df : pandas.DataFrame
        The table as read.

    Returns
    -------
    str or None
    """
    best: tuple[int, int, Any] | None = None
    for pos, col in enumerate(df.columns):
        toks = _tokens(col)
        joined = "_".join(toks)
        rank: int | None = _USER_EXACT.get(joined, _USER_EXACT.get(joined.replace("_", "")))
        if rank is None:
            nouns = [t for t in toks if t in _USER_NOUNS]
            rest = [t for t in toks if t not in _USER_NOUNS]
            if nouns and len(nouns) == 1 and all(t in _ID_TOKENS for t in rest):
                rank = _USER_NOUNS.index(nouns[0])
            elif nouns and len(nouns) == 1 and len(rest) == 1 and rest[0] in ("hashed", "anon"):
                rank = _USER_NOUNS.index(nouns[0])
        if rank is not None and (best is None or (rank, pos) < best[:2]):
            best = (rank, pos, col)
    return None if best is None else best[2]


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# Code tables: census counts, area lists and O/D trips
# --------------------------------------------------------------------------------------

#: Level columns of a census table, top level first (with their TIGER/Line names).
LEVEL_NAMES = ("state", "statefp", "county", "countyfp", "tract", "tractce")
#: Column names that mean "how many" (a count column is never guessed from anything else).
COUNT_NAMES = {"count", "counts", "n", "trips", "trip_count", "flow", "flows", "s000", "total", "weight", "freq",
               "frequency", "workers", "jobs", "commuters", "persons", "people", "number", "volume"}
LON_NAMES = {"lon", "lng", "long", "longitude", "x", "blklondd", "intptlon", "intptlon10", "intptlon20"}
LAT_NAMES = {"lat", "latitude", "y", "blklatdd", "intptlat", "intptlat10", "intptlat20"}
ORIGIN_NAMES = ("origin", "o", "from", "orig", "h_geocode", "pulocationid", "h_fips", "home")
DEST_NAMES = ("destination", "d", "to", "dest", "w_geocode", "dolocationid", "w_fips", "work")
COORD_WORDS = {"lon", "lng", "longitude", "lat", "latitude"}
#: Area-list columns that are attributes, not codes (never guessed as levels).
ATTRIBUTE_NAMES = {"population", "pop", "households", "area", "area_km2", "aland", "awater", "shape_area",
                   "shape_leng", "geometry", "wkt"}
NAME_WORDS = {"name", "label", "title"}


def guess_level_columns(columns: Sequence[object]) -> list[str]:
    """The columns named like census levels (:data:`LEVEL_NAMES`), top level first."""
    lower = {str(c).lower(): str(c) for c in columns}
    return [lower[k] for k in LEVEL_NAMES if k in lower]


def name_key(name: Any) -> str:
    """A column name as compared with the name lists: stripped and lower case."""
    return str(name).strip().lower()


#: Words that say "how many" in a compound count name (``n_trips``, ``trip_count``).
COUNT_WORDS = {"count", "counts", "cnt", "n", "num", "nb", "number", "total", "freq", "frequency", "volume"}
#: What a count column may count: trips, or the people who make them.  ``passenger_count`` counts
#: passengers of one trip, not trips, so it is not a count column.
COUNTED_WORDS = {"trip", "trips", "flow", "flows", "ride", "rides", "journey", "journeys", "commute", "commutes",
                 "commuter", "commuters", "job", "jobs", "worker", "workers", "person", "persons", "people", "od",
                 "pair", "pairs", "row", "rows", "obs", "observations", "all"}


def count_like(name: Any) -> bool:
    """Named like a number of trips: count, n, trips, flow, S000, or a count word with only
    trip-like words beside it (trip_count, n_trips, TripCount); not what counts something else
    of one trip (``passenger_count``).

    >>> [count_like(c) for c in ("S000", "n_trips", "TripCount", "passenger_count", "total_amount")]
    [True, True, True, False, False]
    """
    n = name_key(name)
    if n in COUNT_NAMES:
        return True
    toks = _tokens(name)
    if len(toks) == 1:
        tok = toks[0]
        stem = next((tok[: -len(w)] for w in ("counts", "count", "cnt") if tok.endswith(w) and len(tok) > len(w)), None)
        return stem in COUNTED_WORDS
    counts = [t for t in toks if t in COUNT_WORDS]
    return bool(counts) and all(t in COUNT_WORDS or t in COUNTED_WORDS for t in toks)


def coord_like(name: Any) -> bool:
    """Named like a longitude or latitude (lon, lat, x, y, centroid_lon, INTPTLAT, …)."""
    n = name_key(name)
    return n in LON_NAMES | LAT_NAMES or bool(set(re.split(r"[^a-z0-9]+", n)) & COORD_WORDS)


def name_like(name: Any) -> bool:
    """Named like a display name (name, zone_name, ctyname, label)."""
    n = name_key(name)
    return n in NAME_WORDS or n.endswith(("name", "_label"))
