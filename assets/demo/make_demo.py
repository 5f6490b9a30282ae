"""Build the compact demo data of ``assets/demo/`` from the public data folder.

The app's demos read these files (``ui/demo_data.py``); a fresh clone has no other data.  Run from
the repository root::

    python assets/demo/make_demo.py [SOURCE]          # SOURCE defaults to ../shared/data

Sources, licences and what is done to each file: ``assets/demo/README.md`` (its checksum table is
printed at the end, to paste into the README).  The output is byte-reproducible: gzip members carry
no time stamp and no file name, and the boundaries are written with sorted, rounded coordinates.

* copies, byte for byte: the tract populations, the state/county names, the taxi-zone lookup, the
  green taxi trips, the US county flows and the Rhode Island LODES trips;
* every 4th row of the Uber pickups (all columns, ``Date/Time`` kept for the series demos);
* the LODES block crosswalk cut to the 7 columns the demo reads (codes, names, internal points);
* boundaries simplified for display (:func:`shapely.simplify` with ``preserve_topology``, a
  tolerance per file in degrees, coordinates rounded to 5 decimals, about 1 m), with the
  properties the app reads.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: file (relative to the source folder and to assets/demo) -> how it is made
COPIES = [
    "census/us_tract_population_2020_cenpop.csv.gz",
    "census/us_state_county_population_2019.csv",
    "boundaries/nyc_taxi_zone_lookup.csv",
    "od/nyc_green_taxi_trips_2020-04.csv.gz",
    "od/us_county_commuting_flows_acs2009_2013.csv.gz",
    "od/ri_lodes7_od_main_JT00_2019.csv.gz",
]
UBER = "points/uber_nyc_pickups_2014-04.csv.gz"
UBER_OUT = "points/uber_nyc_pickups_2014-04_every4th.csv.gz"
UBER_STEP = 4
XWALK = "od/ri_lodes7_xwalk_2010blocks.csv.gz"
XWALK_COLUMNS = ["tabblk2010", "cty", "ctyname", "trct", "trctname", "blklatdd", "blklondd"]
#: boundary file -> (tolerance in degrees, properties kept; None keeps every property)
BOUNDARIES: dict[str, tuple[float, list[str] | None]] = {
    "boundaries/us_states_2010_20m.geojson": (0.01, ["GEO_ID", "STATE", "NAME", "LSAD", "CENSUSAREA"]),
    "boundaries/us_counties_2010_20m_fips.geojson": (0.005, ["GEO_ID", "STATE", "COUNTY", "NAME", "LSAD"]),
    "boundaries/ri_tracts_2020_tiger2023.geojson": (0.0005, ["STATEFP", "COUNTYFP", "TRACTCE", "GEOID", "NAME",
                                                             "NAMELSAD"]),
    "boundaries/nyc_taxi_zones.geojson": (0.0003, ["LocationID", "zone", "borough"]),
    "boundaries/nyc_boroughs.geojson": (0.0005, ["boro_code", "boro_name"]),
}
DIGITS = 5


def gzip_bytes(raw: bytes) -> bytes:
    """``raw`` gzipped at level 9 with no time stamp or file name (reproducible bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buf, mtime=0) as f:
        f.write(raw)
    return buf.getvalue()


def csv_text(df: pd.DataFrame) -> bytes:
    """A public table as CSV text (``\\n`` line ends, every value as read)."""
    return df.to_csv(index=False, lineterminator="\n").encode("utf-8")


def _round(coords: Any) -> Any:
    if isinstance(coords, (list, tuple)) and coords and isinstance(coords[0], (int, float)):
        return [round(float(c), DIGITS) for c in coords]
    return [_round(c) for c in coords]


def simplified(path: Path, tolerance: float, keep: list[str] | None) -> bytes:
    """The features of a GeoJSON file simplified for display, as compact GeoJSON bytes."""
    import shapely
    from shapely.geometry import mapping, shape

    src = json.loads(path.read_text(encoding="utf-8"))
    feats = []
    for f in src["features"]:
        geom = shape(f["geometry"])
        small = shapely.simplify(geom, tolerance, preserve_topology=True)
        if small.is_empty or small.area < 0.05 * geom.area:  # a sliver island: keep it as it was
            small = geom
        g = mapping(small)
        props = f.get("properties") or {}
        out: dict[str, Any] = {"type": "Feature"}
        if "id" in f:
            out["id"] = f["id"]
        out["properties"] = {k: props[k] for k in keep if k in props} if keep is not None else props
        out["geometry"] = {"type": g["type"], "coordinates": _round(g["coordinates"])}
        feats.append(out)
    doc = {"type": "FeatureCollection", "features": feats}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build(source: Path, out: Path) -> dict[str, bytes]:
    """Every demo file's bytes, by path relative to ``out`` (written there too)."""
    files: dict[str, bytes] = {}
    for rel in COPIES:
        files[rel] = (source / rel).read_bytes()
    uber = pd.read_csv(source / UBER, dtype=str, keep_default_na=False)
    files[UBER_OUT] = gzip_bytes(csv_text(uber.iloc[::UBER_STEP]))
    xw = pd.read_csv(source / XWALK, dtype=str, keep_default_na=False, usecols=XWALK_COLUMNS)
    files[XWALK] = gzip_bytes(csv_text(xw[XWALK_COLUMNS]))
    for rel, (tol, keep) in BOUNDARIES.items():
        files[rel] = simplified(source / rel, tol, keep)
    for rel, raw in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(raw)
    return files


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else ROOT.parent / "shared" / "data"
    if not source.is_dir():
        print(f"no source folder {source}: pass the public data folder (see assets/demo/README.md)", file=sys.stderr)
        return 2
    files = build(source, HERE)
    total = 0
    for rel in sorted(files):
        raw = files[rel]
        total += len(raw)
        print(f"| `{rel}` | {len(raw) / 1e6:.2f} MB | `{hashlib.sha256(raw).hexdigest()}` |")
    print(f"total {total / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
