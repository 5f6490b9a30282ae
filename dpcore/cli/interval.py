"""``python -m dpcore interval``: the estimate and interval of any union of cells or a polygon.

    python -m dpcore interval --release OUT --codes codes.txt --coverage 0.9 --json
    python -m dpcore interval --release OUT --polygon area.geojson --coverage 0.9 --json

``OUT`` is the ``--out`` folder of a release (its ``measurements.csv``, or ``measurements.parquet``
for a large release, and ``design.json``).
``codes.txt`` holds one union per line: finest-level codes as in ``release.csv``, separated by
commas (empty lines are skipped).  A polygon file gives one answer per feature: cells inside
weigh 1, cut cells their area share (cell shapes: ``design.json``'s ``cell_bounds``, or the
finest level's GeoJSON in ``OUT``; ``--density FILE``: their share of a public density instead;
``--precision DEG``: their share of the lattice of positions coordinates given to that precision can take;
without it, the coordinate precision the curator recorded in the release, ``release points
--coordinate-precision``, if any).  Each polygon answer states its ``weighting`` and ``precision``.  Each answer has ``estimate``, ``sd``, ``low``, ``high``
(the unbiased GLS estimate of :mod:`dpcore.estimate.gls`, not the published value).  Reads no
data: only the public release files.

A polygon's interval is for the count inside it: ``sd`` adds to the noise the cut cells'
apportionment error as modelled by ``--apportionment`` (:mod:`dpcore.estimate.apportionment`):
``overdispersed`` (default; beta-binomial with the over-dispersion inside a cell extrapolated from
the release's three finest splits by a power law, each cut piece scaled by its shape, cut cells
independent), ``binomial``, or ``none`` (the noise alone, the interval of the area-weighted cells,
as before this option).  A polygon's answer also has ``noise_sd`` and ``apportionment_sd`` (the
two parts of ``sd``: ``sd² = noise_sd² + apportionment_sd²``), ``apportionment`` (the model used),
``rho`` (its over-dispersion, of a cell's quarters), ``rho_how`` (how it was found), the bracket ``inside`` and ``touching`` (the estimates of the cells
wholly inside and of every cell touching the polygon), ``cells_inside``, ``cells_cut``,
``cut_share`` and ``warning``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpcore.errors import InputError, ParameterError

__all__ = ["add_interval_parser", "cmd_interval", "read_codes"]


def add_interval_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("interval", help="estimate and interval of unions of cells or polygons, from a release's "
                                        "measurements (no data read, no budget spent)")
    p.add_argument("--release", required=True, help="the release's --out folder (measurements.csv or .parquet, design.json)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--codes", help="a text file, one union per line: finest-level codes separated by commas")
    what.add_argument("--polygon", help="a GeoJSON file: one answer per (multi)polygon feature")
    p.add_argument("--density", help="with --polygon: a public GeoJSON density the curator supplies (polygons with "
                                     "a numeric 'density' property, fixed before the data): cut cells weigh their "
                                     "share of it instead of their area share")
    p.add_argument("--apportionment", choices=("overdispersed", "binomial", "none"), default=None,
                   help="with --polygon: the cut cells' apportionment error added to the interval: overdispersed "
                        "(default; beta-binomial, over-dispersion estimated from the release), binomial, or none "
                        "(the noise alone)")
    p.add_argument("--precision", type=float, default=None,
                   help="with --polygon: the points' coordinates' public precision in degrees (e.g. 0.0001 for 4 "
                        "decimals): cut cells weigh their share of that lattice of positions instead of their area "
                        "share; default: the precision the release records (release points --coordinate-precision), "
                        "else area shares")
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


def _release_files(folder: Path, shapes: bool) -> dict[str, bytes]:
    """The files of a release folder an interval reads (and its GeoJSONs when polygons need shapes)."""
    from dpcore.estimate.release_interval import INTERVAL_FILES, offers_intervals

    files = {n: (folder / n).read_bytes() for n in INTERVAL_FILES if (folder / n).is_file()}
    if not offers_intervals(files):
        raise ParameterError(f"{folder} has no design.json and measurements.csv (or measurements.parquet): give the "
                             "--out folder of a release made by a version that writes the data users' files.")
    if shapes:
        files.update({f.name: f.read_bytes() for f in sorted(folder.glob("*.geojson"))})
    return files


def cmd_interval(args: argparse.Namespace) -> int:
    from dpcore.estimate.gls import union_interval
    from dpcore.estimate.release_interval import ReleaseIntervals, clean, read_density

    folder = Path(args.release)
    if not 0.0 < args.coverage < 1.0:
        raise ParameterError(f"--coverage must be between 0 and 1 (got {args.coverage}); e.g. 0.9.")
    ri = ReleaseIntervals(_release_files(folder, shapes=bool(args.polygon)))  # the GLS estimate solved once
    out: list[dict[str, Any]] = []
    if args.density and not args.polygon:
        raise ParameterError("--density apportions the cut cells of a --polygon; drop it with --codes.")
    if args.codes and (args.apportionment or args.precision is not None):
        raise ParameterError("--apportionment and --precision model the cut cells of a --polygon; drop them with --codes.")
    if args.codes:
        for codes in read_codes(args.codes):
            out.append(clean({**union_interval(ri.m, codes, args.coverage, estimate=ri.estimate), "cells": len(codes)}))
    else:
        if not ri.design.get("cell_bounds") and not any(folder.glob("*.geojson")):
            raise InputError(f"{folder} has no cell shapes: design.json gives no cell_bounds and no GeoJSON of the "
                             "finest level is in the folder. Release with boundaries, or use --codes.")
        density = read_density(args.density) if args.density else None
        out = ri.of_polygons(args.polygon, args.coverage, density, args.apportionment or "overdispersed", args.precision)
        for i, r in enumerate(out):
            if r["warning"]:
                print(f"warning: feature {i}: {r['warning']}", file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for i, r in enumerate(out):
        print(f"{i + 1}: estimate {r['estimate']:.1f}, sd {r['sd']:.2f}, {args.coverage:.0%} interval "
              f"[{r['low']:.1f}, {r['high']:.1f}]" + (f"; cut cells weighed by {r['weighting']}" if "weighting" in r else ""))
    return 0
