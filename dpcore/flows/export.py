"""Exports of an O/D release: CSV of the released flows, flow lines as GeoJSON, the JSON record.

Everything written here is public (DESIGN.md rule 5): the released (noisy) flows, the public
area list and its geography, the data-free plan and the ledger's spends.  No true count (only
the total when the plan makes it public), no raw row and no input file name is ever written.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd

from dpcore.core.mechanism import Plan
from dpcore.core.record import (
    INTERVAL_COLUMNS,
    NOT_ACCOUNTED,
    NOT_ACCOUNTED_CELL,
    build_record,
    mark_not_accounted,
    validate_record,
)
from dpcore.data.code_tables import text_numbers
from dpcore.data.csv_safe import append_constant_column, csv_bytes
from dpcore.data.hierarchy import Hierarchy, hierarchy_info
from dpcore.errors import InputError, ParameterError
from dpcore.estimate.data_user_format import name_written
from dpcore.estimate.data_user_format import no_interval_note as empty_note
from dpcore.flows.data_users import data_users_section, od_data_user_files
from dpcore.flows.flow_lines import COORD_DECIMALS, flow_line_levels, flows_geojson_bytes
from dpcore.flows.mechanisms.common import ODRelease
from dpcore.flows.tree import match_leaves
from dpcore.privacy.ledger import Ledger

if TYPE_CHECKING:  # geopandas (with shapely and pyproj, ~0.7 s) is imported where boundaries are read
    import geopandas

__all__ = [
    "SCHEMA",
    "centroids_from_boundaries",
    "centroids_from_points",
    "flows_geojson",
    "has_intervals",
    "no_interval_note",
    "od_body",
    "od_file_names",
    "od_files",
    "od_json",
    "od_record",
    "release_csv_bytes",
    "release_frame",
    "validate_od_record",
]

SCHEMA = "dpcore-od-release/1"
#: Equal-area projection (World Cylindrical Equal Area) for area-weighted centroids.
_EQUAL_AREA = "EPSG:6933"


# ---------------------------------------------------------------------------------------------
# coordinates of the areas (public geography)
# ---------------------------------------------------------------------------------------------


def centroids_from_boundaries(
    h: Hierarchy, depth: int, gdf: geopandas.GeoDataFrame, code_field: str | None = None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Centroid (lon, lat) of every area at ``depth`` from its public boundary.

    Features are matched to areas as :func:`dpcore.data.area_boundaries.join_boundaries` does (the
    area's own code, its ``a/b`` label or its joined GEOID-like code, in ``code_field`` or the
    best-matching column).  Returns ``(lon, lat, unmatched)``: arrays of length
    ``h.sizes[depth]`` (NaN where no feature matched) and the labels of the unmatched areas.
    """
    if not 1 <= depth <= h.depth:
        raise InputError(f"Boundaries belong to a level 1..{h.depth} of the hierarchy, not depth {depth}.")
    import geopandas

    from dpcore.data.area_boundaries import join_boundaries

    gdf = gdf if isinstance(gdf, geopandas.GeoDataFrame) else geopandas.GeoDataFrame(gdf)
    if gdf.crs is None:
        gdf = gdf.set_crs("EPSG:4326")  # GeoJSON (RFC 7946) is lon/lat WGS 84
    join = join_boundaries(h, depth, gdf, code_field)
    n = h.sizes[depth]
    lon = np.full(n, np.nan)
    lat = np.full(n, np.nan)
    fr = join.frame
    geom = fr.geometry
    ok = (~geom.is_empty & geom.notna()).to_numpy()
    if ok.any():
        # Area-weighted centroid in an equal-area projection (a centroid in lon/lat degrees is
        # skewed towards the poles and triggers geopandas' geographic-CRS warning).  The centroid
        # is the natural end of a flow line (the area's centre of mass), unlike
        # representative_point(), which is only guaranteed to be inside and may sit near an edge;
        # a centroid can fall outside a very concave area, which is harmless for a flow end.
        sub = geom[ok].to_crs(_EQUAL_AREA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cen = sub.centroid.to_crs("EPSG:4326")
        idx = fr["node"].to_numpy()[ok]
        lon[idx] = cen.x.to_numpy()
        lat[idx] = cen.y.to_numpy()
    unmatched = h.labels(depth)[np.isnan(lon)].astype(str).tolist()
    return lon, lat, unmatched


def centroids_from_points(
    h: Hierarchy, codes: Any, lon: Any, lat: Any
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per depth 0..L the mean (lon, lat) of the finest areas below each area.

    ``codes``, ``lon``, ``lat`` give a **public** point per finest area (e.g. the census block
    internal points of a LODES crosswalk: ``tabblk2010``, ``blklondd``, ``blklatdd``).  Codes are
    matched like :func:`dpcore.flows.tree.leaf_lookup`; since the points are public geography, not
    trips, points whose code is not a finest area (or whose coordinates are missing) are simply
    ignored.  Several points of one area are averaged.  Areas without any point below them get
    NaN.  Coordinates are averaged in degrees (areas of a hierarchy are small and do not cross
    the antimeridian in practice).
    """
    x = text_numbers(pd.Series(lon).reset_index(drop=True))
    y = text_numbers(pd.Series(lat).reset_index(drop=True))
    pos = match_leaves(h, codes)
    if not (len(pos) == len(x) == len(y)):
        raise InputError("The point codes, longitudes and latitudes must have the same length.")
    ok = (pos >= 0) & np.isfinite(x) & np.isfinite(y)
    n = h.n_leaves
    cnt = np.bincount(pos[ok], minlength=n).astype(float)
    sx = np.bincount(pos[ok], weights=x[ok], minlength=n)
    sy = np.bincount(pos[ok], weights=y[ok], minlength=n)
    # each finest area counts once (its own mean point), whatever its number of points
    has = cnt > 0
    leaf_x = np.divide(sx, cnt, out=np.zeros(n), where=has)
    leaf_y = np.divide(sy, cnt, out=np.zeros(n), where=has)
    agg = h.aggregate(np.column_stack([leaf_x, leaf_y, has.astype(float)]))
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for d, a in enumerate(agg):
        k = a[:, 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            mx = np.where(k > 0, a[:, 0] / np.where(k > 0, k, 1), np.nan)
            my = np.where(k > 0, a[:, 1] / np.where(k > 0, k, 1), np.nan)
        out[d] = (mx, my)
    return out


# ---------------------------------------------------------------------------------------------
# the released flows
# ---------------------------------------------------------------------------------------------

#: Columns of ``release.csv`` (and of :func:`release_frame`).
CSV_COLUMNS = ["level", "origin", "destination", "noisy_count", *INTERVAL_COLUMNS]


def _intervals(rel: ODRelease, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``noise_sd``, ``ci95_low``, ``ci95_high`` of the released flows ``v`` (every level below the
    total, in order)."""
    n = [len(rel.values[t]) for t in range(1, rel.depth + 1)]
    lvs = rel.plan.levels[1:]
    sd = np.repeat([lv.sd if np.isfinite(lv.sd) else lv.noise_sd for lv in lvs], n).astype(np.float64)
    bound = np.repeat([lv.bound for lv in lvs], n).astype(np.float64)
    v = np.asarray(v, dtype=np.float64)
    return np.round(sd, 4), np.round(np.maximum(v - bound, 0.0), 3), np.round(v + bound, 3)


def has_intervals(rel: ODRelease) -> bool:
    """Whether ``release.csv`` fills ``ci95_low``/``ci95_high``: only where every level below the
    total has a guaranteed bound on its largest error (the exact L∞ projections, InfTDA and the MILP)."""
    return all(np.isfinite(lv.bound) for lv in rel.plan.levels[1:])


def no_interval_note(rel: ODRelease) -> str | None:
    """Why ``ci95_low``/``ci95_high`` are empty for this release, and where a data user gets an
    interval instead, in words (the record's column texts and the Export step say it); None where
    they are filled (:func:`has_intervals`).

    No valid 95 % interval is known for these released values; why is the mechanism's own
    :attr:`~dpcore.flows.mechanisms.base.ODMechanism.no_interval_reason` (TopDown's projection biases
    them; VanillaGauss's ``noise_sd`` is its level's average error while each flow's own SD follows
    the sizes of its two areas; the stability histogram releases only pairs whose noisy count passes
    a threshold).
    """
    if has_intervals(rel):
        return None
    m = rel.mechanism
    return empty_note(f"{m.title} {m.no_interval_reason}", (data_users_section(rel) or {}).get("files") or [],
                      estimates="a least-squares estimate and its variance for every published flow", command="",
                      answers="any flow or sum of flows (codes ORIGIN>DESTINATION)", items="flows")


def release_frame(rel: ODRelease) -> pd.DataFrame:
    """Every released flow of every tree level below the total: ``level, origin, destination,
    noisy_count, noise_sd, ci95_low, ci95_high`` (export labels; flows released as 0 are not listed).

    ``noise_sd`` is the level's analytic RMSE per flow (the plan's, from public parameters only);
    ``ci95_low/high`` = count ∓ the level's guaranteed 95 % bound on the largest error (L∞
    mechanisms; simultaneous over the level, so valid for each flow), clipped at 0, and empty for
    mechanisms without such a bound."""
    df = rel.to_frame()
    df["noise_sd"], df["ci95_low"], df["ci95_high"] = _intervals(rel, df["noisy_count"].to_numpy())
    return df[CSV_COLUMNS]


def _release_table(rel: ODRelease) -> Any:
    """:func:`release_frame` as a pyarrow Table, built from the per-depth labels (each area's label
    converted once, then taken flow by flow) without a frame."""
    import pyarrow as pa

    ts = range(1, rel.depth + 1)
    levels = rel.plan.levels
    memo: dict[tuple[int, int], Any] = {}

    def labels(h: Hierarchy, depth: int, idx: np.ndarray) -> Any:
        key = (id(h), depth)
        if key not in memo:
            memo[key] = pa.array(h.labels(depth), type=pa.string())
        return memo[key].take(pa.array(idx))

    names = pa.array([levels[t].name for t in ts], type=pa.string())
    level = names.take(pa.array(np.repeat(np.arange(len(ts)), [len(rel.values[t]) for t in ts])))
    origin = pa.concat_arrays([labels(rel.origin_h, levels[t].origin_depth, rel.origins[t]) for t in ts])
    destination = pa.concat_arrays([labels(rel.destination_h, levels[t].destination_depth, rel.destinations[t])
                                    for t in ts])
    v = np.concatenate([rel.values[t] for t in ts])
    cols = [level, origin, destination, pa.array(v), *(pa.array(c, from_pandas=True) for c in _intervals(rel, v))]
    return pa.table(cols, names=CSV_COLUMNS)


def release_csv_bytes(rel: ODRelease, *, accounted: bool = True) -> bytes:
    """``release.csv``: the rows of :func:`release_frame`, header first (UTF-8, ``\\n``).

    ``accounted=False`` (a release charged to no budget) adds the column ``accounted``
    (:data:`dpcore.core.record.NOT_ACCOUNTED_CELL` on every row) in the one write, the bytes that
    :func:`dpcore.core.record.mark_not_accounted` gives the file without it."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = _release_table(rel)
    plain: list[bool] = []  # whether pyarrow wrote the rows: one line a row, no field quoted

    # pyarrow writes 600k rows in a fraction of a second (pandas.to_csv: a few seconds); labels
    # stay text (leading zeros kept)
    def write(t: Any) -> bytes:
        buf = io.BytesIO()
        try:
            # pyarrow always quotes the header; written here as pandas does
            buf.write((",".join(CSV_COLUMNS) + "\n").encode("utf-8"))
            pacsv.write_csv(t, buf, pacsv.WriteOptions(quoting_style="none", include_header=False))
        except pa.ArrowInvalid:  # a label with a comma, quote or line break: pandas quotes just those
            return t.to_pandas().to_csv(index=False, lineterminator="\n").encode("utf-8")
        plain.append(True)
        return buf.getvalue()

    # labels starting like a formula are escaped (dpcore.data.csv_safe)
    data = csv_bytes(table, write)
    if accounted:
        return data
    if plain and not any(np.isneginf(table.column(c).to_numpy(zero_copy_only=False)).any() for c in CSV_COLUMNS[3:]):
        # every line is one row of unquoted fields (pyarrow refused anything else) whose text fields
        # csv_bytes has escaped and whose numbers are plain ("-inf" alone would be escaped on a
        # round trip): the column is appended line by line
        out = append_constant_column(data, "accounted", NOT_ACCOUNTED_CELL, vouched=True)
        if out is not None:
            return out
    return mark_not_accounted({"release.csv": data})["release.csv"]


def flows_geojson(
    rel: ODRelease,
    origin_xy: Mapping[int, tuple[np.ndarray, np.ndarray]],
    destination_xy: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    levels: Sequence[int] | None = None,
    top: int | None = None,
) -> dict[str, Any]:
    """A GeoJSON FeatureCollection of flow lines (origin centroid → destination centroid).

    ``origin_xy[depth]`` (and ``destination_xy[depth]``, default ``origin_xy``) hold the
    (lon, lat) arrays of the areas of a hierarchy depth, e.g. from
    :func:`centroids_from_boundaries` or :func:`centroids_from_points`.  One LineString per
    released non-zero flow with properties ``level`` (level name), ``origin``, ``destination``
    (export labels) and ``noisy_count``.  ``levels`` are tree levels (default: all below the
    total); levels whose origin or destination depth has no coordinates, and flows with an end
    without coordinates (NaN), are skipped.  ``top`` keeps the ``top`` largest flows per level.
    :func:`dpcore.flows.flow_lines.flows_geojson_bytes` writes the same collection as JSON text
    without a dict per flow (what ``release od`` writes).
    """
    feats: list[dict[str, Any]] = []
    for lines in flow_line_levels(rel, origin_xy, destination_xy, levels=levels, top=top):
        t, sel, od_, dd = lines.tree_level, lines.sel, lines.origin_depth, lines.destination_depth
        o, d = rel.origins[t][sel], rel.destinations[t][sel]
        # nested [[x0, y0], [x1, y1]] lists straight from one (n, 2, 2) array: no per-flow indexing
        coords = np.round(np.stack([lines.ox[o], lines.oy[o], lines.dx[d], lines.dy[d]], axis=1), COORD_DECIMALS)
        lab_o = rel.origin_h.labels(od_)[o].tolist()
        lab_d = rel.destination_h.labels(dd)[d].tolist()
        name = lines.name
        level_feats = [
            {"type": "Feature", "geometry": {"type": "LineString", "coordinates": c},
             "properties": {"level": name, "origin": a, "destination": b, "noisy_count": n}}
            for c, a, b, n in zip(coords.reshape(-1, 2, 2).tolist(), lab_o, lab_d, rel.values[t][sel].tolist(),
                                  strict=True)
        ]
        # public display names (e.g. --names county=NAME), where the area list has them
        for side, h, depth, idx in (("origin", rel.origin_h, od_, o), ("destination", rel.destination_h, dd, d)):
            if depth > 0 and h.names[depth - 1] is not None:
                for f, nm in zip(level_feats, h.display_names(depth)[idx].tolist(), strict=True):
                    f["properties"][f"{side}_name"] = nm
        feats.extend(level_feats)
    return {"type": "FeatureCollection", "features": feats}


# ---------------------------------------------------------------------------------------------
# the release record
# ---------------------------------------------------------------------------------------------


def _od_privacy(rel: ODRelease) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """The privacy parts of an O/D record: the definition's name where the cost is not a zCDP or
    pure one (None otherwise), the unit of privacy and the kind's other privacy keys (noise,
    invariants, per-level noise; the approximate-DP reading of an (ε, δ) mechanism)."""
    p = rel.plan
    who = "one person" if p.max_trips > 1 else "one trip (one person with one trip)"
    if p.max_trips > 1:
        who += (f" with up to {p.max_trips} trips" + (" (distinct origin/destination pairs)"
                                                       if p.distinct else " (repeats allowed)"))
    unit_desc = (f"{who}; neighbouring data sets "
                 + ("replace one person by another (the number of people is public)"
                    if p.neighbour == "replace" else "add or remove one person"))
    invariants: dict[str, Any] = {}
    if p.total_public and rel.public_total is not None:
        invariants["total"] = int(rel.public_total)  # type: ignore[arg-type]
    privacy: dict[str, Any] = {
        "neighbouring_relation": p.neighbour,
        "noise": "discrete Laplace" if p.cost is None or p.cost.definition == "pure" else "discrete Gaussian",
        "randomness": "exact discrete samplers driven by the operating system's CSPRNG (os.urandom)",
        "composition": "sequential over the measured tree levels (parallel within a level: its area pairs "
                       "partition the trips)",
        "invariants": invariants,
        "invariants_note": "Invariants are published exactly and are outside the DP guarantee.",
        "levels": [{"tree_level": lv["level"], "level": lv["name"], "measured": lv["measured"],
                    "share": lv["share"], "noise": lv["noise"], "scale": lv["scale"],
                    "l1_sensitivity": lv["l1_sensitivity"], "l2_sensitivity": lv["l2_sensitivity"]}
                   for lv in p.to_dict()["levels"]],
    }
    if p.cost is None and p.approx is not None:
        privacy["approx_dp"] = {"delta": float(p.approx[1]), "epsilon": float(p.approx[0])}
    definition = "approximate (epsilon, delta)-DP" if p.cost is None else None
    unit = {"max_trips": p.max_trips, "distinct": p.distinct, "description": unit_desc}
    return definition, unit, privacy


def od_body(rel: ODRelease, files: Sequence[str]) -> dict[str, Any]:
    """What only an O/D record has: the budget split, the public hierarchies, the tree of O/D
    tables, the invariants' flags, the expected errors and the outputs (``files``: the file names)."""
    p = rel.plan
    users = data_users_section(rel)
    return {
        **({"data_users": users} if users is not None else {}),
        "budget": {"split": p.split, "split_weights": list(p.split_weights)},
        "hierarchy": {
            "origin": hierarchy_info(rel.origin_h),
            "destination": hierarchy_info(rel.destination_h),
            "same": rel.origin_h.fingerprint() == rel.destination_h.fingerprint(),
        },
        "tree": {
            "orientation": p.orientation,
            "depth": p.depth,
            "naming": ("A level named 'county' is the intra-level table (origin county → destination county); "
                       "'state>county' is a cross-level table: origin at state level, destination at county "
                       "level. Levels are listed from the total (tree level 0) down to the finest pairs."),
            "levels": [{"tree_level": lv["level"], "name": lv["name"], "kind": lv["kind"],
                        "origin_level": lv["origin_level"], "destination_level": lv["destination_level"],
                        "origin_depth": lv["origin_depth"], "destination_depth": lv["destination_depth"],
                        "possible_pairs": lv["pairs"], "branching": lv["branching"]}
                       for lv in p.to_dict()["levels"]],
        },
        "total_public": bool(p.total_public and rel.public_total is not None),
        "zeroing_order": p.order,
        "tiebreak": p.tiebreak,
        "expected_error": [{
            "tree_level": lv.level, "level": lv.name, "possible_pairs": lv.pairs,
            "noise_sd": lv.noise_sd, "rmse": lv.sd, "mean_abs_error": lv.mean_abs,
            "typical_max_abs_error": lv.max_abs, "bound_95": lv.bound,
            "unreliable_below": lv.unreliable_below, "basis": lv.basis,
        } for lv in p.levels],
        "outputs": {
            "files": list(files),
            "csv_columns": list(CSV_COLUMNS),
            "columns": {
                "level": "the O/D table (tree level) of the flow: 'county' or 'state>county' (origin>destination)",
                "origin": "export label of the origin area at the level's origin depth (code, or a/b/c path)",
                "destination": "export label of the destination area at the level's destination depth",
                "noisy_count": "released number of trips (a non-negative whole number for the TopDown "
                               "mechanisms); flows released as 0 are not listed",
                "noise_sd": "the level's analytic RMSE per flow (from the plan: public parameters only)",
                **({"ci95_low": "noisy_count minus the level's guaranteed 95 % bound on the largest error, at "
                                "least 0 (L-infinity mechanisms; empty otherwise)",
                    "ci95_high": "noisy_count plus that bound (empty where the mechanism has none)"}
                   if (why := no_interval_note(rel)) is None else
                   {"ci95_low": why, "ci95_high": "Empty for this release, as ci95_low (see there)."}),
            },
            "levels": [lp.name for lp in p.levels[1:]],
            "geojson": "flows.geojson (when written): one LineString per released flow from the origin area's "
                       "public centroid to the destination area's, with the CSV's columns as properties",
        },
        "not_exported": [
            "true counts of any flow or area pair (only the total, when listed under privacy.invariants)",
            "raw trip rows, person ids or the number of trips dropped by the contribution cap",
            "the input file names or paths",
            "empirical errors against the truth (curator-only diagnostics)",
        ],
    }


def od_file_names(origin_xy: Any = None, destination_xy: Any = None, rel: ODRelease | None = None) -> list[str]:
    """The names of the files :func:`od_files` writes: flow lines only with coordinates, the data
    users' files when ``rel`` offers them (:mod:`dpcore.flows.data_users`)."""
    with_lines = origin_xy is not None or destination_xy is not None
    users = (data_users_section(rel) or {}).get("files", ()) if rel is not None else ()
    return ["release.csv", *(["flows.geojson"] if with_lines else []), *users, "release.json"]


def od_record(
    rel: ODRelease,
    ledger: Ledger | None = None,
    *,
    delta: float = 1e-8,
    extra: Mapping[str, Any] | None = None,
    files: Sequence[str] | None = None,
    plan: Plan | None = None,
    origin_xy: Any = None,
    destination_xy: Any = None,
    top: int | None = None,
) -> dict[str, Any]:
    """The machine-readable record of how the O/D release was made (schema ``dpcore-od-release/1``):
    the one envelope (:func:`dpcore.core.record.build_record`) around :func:`od_body`.

    Public parameters and mechanism outputs only: the data-free plan (budget split,
    sensitivities, noise scales, expected errors), the public hierarchies, and the ledger's
    spends.  The only number that comes from the data unnoised is the total, and only when the
    plan makes it public (replace neighbours, one trip per person).  Never a true flow, a raw
    row or an input file name.  ``delta`` is the δ at which a zCDP cost is also read as
    (ε, δ)-DP; ``extra`` holds caller-supplied public parameters (e.g. how ρ was derived from
    (ε, δ)) and must not name input files; ``files`` the file names (default: those
    :func:`od_files` writes with ``origin_xy``/``destination_xy``; ``top`` changes no name);
    ``plan`` the core plan the release was made from (its rows go into the record).
    """
    if not 0.0 < float(delta) < 1.0:
        raise ParameterError(f"δ must be between 0 and 1 (exclusive), got {delta}.")
    p = rel.plan
    info = rel.mechanism
    definition, unit, privacy = _od_privacy(rel)
    notes = [
        "All flows are outputs of the mechanism; the released tables are consistent (each sums to its parent) "
        "and flows released as 0 are omitted.",
        "Expected errors are analytic: they come from the mechanism, the budget and the public area lists, "
        "not from the data.",
    ]
    for side, h in (("origin", rel.origin_h), ("destination", rel.destination_h)):
        if h.source == "data (not public)":  # the area list must be public (Boninsegna & Silvestri 2025, Sec. 3)
            notes.append(
                f"WARNING: the {side} area list was taken from the data; areas without trips are missing and "
                "that absence is not protected by differential privacy."
            )
    body = od_body(rel, files if files is not None else od_file_names(origin_xy, destination_xy, rel))
    if extra:
        body["extra"] = dict(extra)
    return build_record(
        schema=SCHEMA, kind="od", release_id=rel.release_id, created=rel.created,
        # mechanism details are post-processing of the release, except for the stability histogram
        # whose 'noised_cells' is the true number of observed pairs: never exported
        mechanism={"name": info.name, "title": info.title, "reference": info.reference,
                   "consistent": info.consistent, "integral": True, "nonnegative": info.nonnegative,
                   "details": {} if p.mechanism == "sh" else dict(rel.details)},
        cost=p.cost, definition=definition, unit_of_privacy=unit, privacy=privacy, approx_dp_at=float(delta),
        body=body, notes=notes, ledger=ledger, plan=plan.rows_dict() if plan is not None else None,
    )


def od_json(rel: ODRelease, ledger: Ledger | None = None, *, delta: float = 1e-8,
            extra: Mapping[str, Any] | None = None, files: Sequence[str] | None = None,
            plan: Plan | None = None) -> bytes:
    return orjson.dumps(od_record(rel, ledger, delta=delta, extra=extra, files=files, plan=plan),
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def validate_od_record(record: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if the record breaks the envelope or the O/D body schema."""
    validate_record(record)


def od_files(
    rel: ODRelease,
    ledger: Ledger | None = None,
    *,
    origin_xy: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    destination_xy: Mapping[int, tuple[np.ndarray, np.ndarray]] | None = None,
    delta: float = 1e-8,
    extra: Mapping[str, Any] | None = None,
    top: int | None = None,
    plan: Plan | None = None,
    parquet_above: int | None = None,
    accounted: bool = True,
) -> dict[str, bytes]:
    """The release's files, name -> bytes: ``release.csv``, ``flows.geojson`` (with coordinates),
    the data users' files (:mod:`dpcore.flows.data_users`; ``measurements.parquet`` above
    ``parquet_above`` rows) and ``release.json`` (the record, ``ledger`` as of the charge).  Made once,
    at release time.  ``accounted=False`` (a release charged to no budget, ``ledger`` None) marks
    ``release.csv`` and ``flows.geojson`` in the one write, as
    :func:`dpcore.core.record.mark_not_accounted` would mark them afterwards."""
    files: dict[str, bytes] = {"release.csv": release_csv_bytes(rel, accounted=accounted)}
    if origin_xy is not None or destination_xy is not None:
        oxy = origin_xy if origin_xy is not None else destination_xy
        members = None if accounted else {"accounted": False, "not_accounted": NOT_ACCOUNTED}
        files["flows.geojson"] = flows_geojson_bytes(rel, oxy, destination_xy, top=top,  # type: ignore[arg-type]
                                                     members=members)
    files.update(od_data_user_files(rel, parquet_above))
    files["release.json"] = od_json(rel, ledger, delta=delta, extra=extra, plan=plan,
                                    files=od_file_names(origin_xy, destination_xy, rel))
    return name_written(files)  # the record names measurements.parquet where a large release wrote it
