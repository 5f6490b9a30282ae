"""``python -m dpcore synthesize --release OUT --out points.csv``: synthetic points or trips that
reproduce a points or od release (post-processing: no data read, no budget spent;
:mod:`dpcore.core.synthesize`).  The README is written next to the file and printed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_synthesize_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("synthesize", help="synthetic points/trips matching a release (no data, no budget)")
    p.add_argument("--release", required=True, help="the --out folder of a 'release points' or 'release od' run")
    p.add_argument("--out", required=True, help="the synthetic CSV to write, e.g. points.csv (README beside it)")
    p.add_argument("--seed", type=int, default=None,
                   help="a non-secret seed for reproducible draws (default: a fresh one, recorded in the README)")
    p.add_argument("--mask", default=None,
                   help="points only: a public GeoJSON of polygons in lon/lat, fixed before the data (land, "
                        "streets): each cell's points are drawn inside its part of the mask")
    return p


def cmd_synthesize(args: argparse.Namespace) -> int:
    from dpcore.core.synthesize import synthesize, write_synthetic

    mask = None
    if args.mask:
        import shapely

        from dpcore.estimate.release_interval import read_polygons

        mask = shapely.union_all(read_polygons(args.mask))
    syn = synthesize(args.release, seed=args.seed, mask=mask, mask_name=Path(args.mask).name if args.mask else "mask")
    path, readme = write_synthetic(syn, args.out)
    print(syn.readme, end="")
    print(f"Wrote {path} and {readme}.")
    return 0
