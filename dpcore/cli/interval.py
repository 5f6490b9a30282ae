"""``python -m dpcore interval``: the estimate and interval of any union of cells or a polygon.

    python -m dpcore interval --release OUT --codes codes.txt --coverage 0.9 --json
    python -m dpcore interval --release OUT --polygon area.geojson --coverage 0.9 --json

``OUT`` is the ``--out`` folder of a release (its ``measurements.csv`` and ``design.json``).
``codes.txt`` holds one union per line: finest-level codes as in ``release.csv``, separated by
commas (empty lines are skipped).  A polygon file gives one answer per feature: cells inside
weigh 1, cut cells their area share (cell shapes: ``design.json``'s ``cell_bounds``, or the
finest level's GeoJSON in ``OUT``).  Each answer has ``estimate``, ``sd``, ``low``, ``high``
(the unbiased GLS estimate of :mod:`dpcore.estimate.gls`, not the published value).  Reads no
data: only the public release files.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from dpcore.errors import InputError, ParameterError

__all__ = ["add_interval_parser", "cmd_interval", "read_codes"]


def add_interval_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("interval", help="estimate and interval of unions of cells or polygons, from a release's "
                                        "measurements (no data read, no budget spent)")
    p.add_argument("--release", required=True, help="the release's --out folder (measurements.csv, design.json)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--codes", help="a text file, one union per line: finest-level codes separated by commas")
    what.add_argument("--polygon", help="a GeoJSON file: one answer per (multi)polygon feature")
    p.add_argument("--coverage", type=float, default=0.9, help="the interval's coverage (default 0.9)")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per union, in order")
    return p


def read_codes(path: str | Path) -> list[list[str]]:
    """The unions of a codes file: one per non-empty line, codes separated by commas."""
    lines = Path(path).read_text("utf-8").splitlines()
    unions = [[c.strip() for c in line.split(",") if c.strip()] for line in lines if line.strip()]
    if not unions:
        raise InputError(f"{path} holds no codes: write one union per line, codes separated by commas.")
    return unions


def _cell_shapes(folder: Path, cells: list[str]) -> np.ndarray:
    """Every cell's shape: ``cell_bounds`` of design.json, else the finest level's GeoJSON."""
    import geopandas
    import orjson
    import shapely

    design = orjson.loads((folder / "design.json").read_bytes())
    if design.get("cell_bounds"):
        b = np.asarray(design["cell_bounds"], dtype=float)
        return shapely.box(b[:, 0], b[:, 1], b[:, 2], b[:, 3])
    pos = {c: i for i, c in enumerate(cells)}
    best: np.ndarray | None = None
    for f in sorted(folder.glob("*.geojson")):
        g = geopandas.read_file(f)
        if "code" not in g.columns:
            continue
        codes = g["code"].astype(str).to_numpy()
        hit = np.array([c in pos for c in codes])
        if hit.sum() and (best is None or hit.sum() > np.sum(~shapely.is_empty(best))):
            shapes = np.full(len(cells), shapely.Polygon(), dtype=object)
            shapes[[pos[c] for c in codes[hit]]] = g.geometry.to_numpy()[hit]
            best = shapes
    if best is None:
        raise InputError(f"{folder} has no cell shapes: design.json gives no cell_bounds and no GeoJSON of the "
                         "finest level is in the folder. Release with boundaries, or use --codes.")
    return best


def _polygons(path: str) -> list[Any]:
    import geopandas

    g = geopandas.read_file(path)
    if g.empty:
        raise InputError(f"{path} has no features: give a GeoJSON with one polygon per area.")
    if g.crs is not None and not g.crs.equals("EPSG:4326"):
        g = g.to_crs("EPSG:4326")
    return list(g.geometry)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def cmd_interval(args: argparse.Namespace) -> int:
    from dpcore.estimate.gls import gls_estimate, read_release, union_interval

    folder = Path(args.release)
    if not 0.0 < args.coverage < 1.0:
        raise ParameterError(f"--coverage must be between 0 and 1 (got {args.coverage}); e.g. 0.9.")
    m = read_release(folder)
    x = gls_estimate(m)  # once for every union
    out: list[dict[str, Any]] = []
    if args.codes:
        for codes in read_codes(args.codes):
            out.append(_clean({**union_interval(m, codes, args.coverage, estimate=x), "cells": len(codes)}))
    else:
        from dpcore.estimate.polygon_interval import polygon_interval

        shapes = _cell_shapes(folder, m.cells)
        for i, poly in enumerate(_polygons(args.polygon)):
            r = _clean(polygon_interval(m, shapes, poly, args.coverage, estimate=x))
            if r["warning"]:
                print(f"warning: feature {i}: {r['warning']}", file=sys.stderr)
            out.append(r)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for i, r in enumerate(out):
        print(f"{i + 1}: estimate {r['estimate']:.1f}, sd {r['sd']:.2f}, {args.coverage:.0%} interval "
              f"[{r['low']:.1f}, {r['high']:.1f}]")
    return 0
