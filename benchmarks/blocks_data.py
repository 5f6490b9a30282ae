"""A seeded synthetic table shaped like the US census blocks (states / counties / tracts / blocks).

Issue 28, item 1: "a block-shaped table of 8 M rows (a seeded generator in ``benchmarks/``:
skewed sizes, about 30 % empty blocks, codes nested by prefix)".

Shape (at ``n`` blocks; the real 2020 geography has about 8.1 M blocks, 85,000 tracts, 3,200
counties and 52 states)
    * 52 states; counties per state from a lognormal (σ = 0.8) scaled so that there are about
      3,200 counties in all (at least one per state);
    * tracts: ``round(n / 95)`` (about 85,000 at 8.1 M, 95 blocks a tract as in 2020), spread
      over the counties with lognormal weights (σ = 1.0), at least one tract a county;
    * blocks spread over the tracts with lognormal weights (σ = 0.7), at least one a tract;
    * counts: 30 % of the blocks empty (Bernoulli 0.3), the others ``1 + geometric`` with a
      lognormal mean (median about 40 persons, heavy right tail), int32.
Codes (text, nested by prefix as census GEOIDs are)
    ``STATE`` 2 digits, ``COUNTY`` 5 (state + 3), ``TRACT`` 11 (county + 6), ``BLOCK`` 15
    (tract + 4); each code is unique across its level (``--codes global``).
Order
    rows sorted by ``BLOCK`` (as the Census Bureau ships them).

numpy ``default_rng(SEED, n)``: the same ``n`` gives the same table on any machine.  Written
as Parquet (snappy, row groups of 1 M rows) and, with ``--csv``, as CSV.  Synthetic public
data: nothing here is a release.

Run from the repository root::

    .venv/bin/python benchmarks/blocks_data.py --rows 1000000 --out /tmp/dpcore-blocks/blocks_1M.parquet
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

SEED = 20261129
N_STATES = 52
N_COUNTIES = 3200
BLOCKS_PER_TRACT = 95
EMPTY = 0.30
LEVELS = ["STATE", "COUNTY", "TRACT", "BLOCK"]


def _spread(rng: np.random.Generator, total: int, parts: int, sigma: float) -> np.ndarray:
    """``total`` items over ``parts`` groups, each at least one, lognormal weights (skewed)."""
    w = rng.lognormal(0.0, sigma, parts)
    extra = total - parts
    share = np.floor(w / w.sum() * extra).astype(np.int64)
    rest = extra - int(share.sum())
    share[np.argsort(-w, kind="stable")[:rest]] += 1
    return share + 1


def _codes(parent: np.ndarray, sizes: np.ndarray, width: int) -> np.ndarray:
    """Child codes: each parent's code followed by 1, 2, ... on ``width`` digits."""
    starts = np.cumsum(sizes) - sizes
    within = np.arange(int(sizes.sum())) - np.repeat(starts, sizes) + 1
    suffix = np.char.zfill(within.astype(str), width)
    return np.char.add(np.repeat(parent, sizes), suffix)


def block_table(n: int) -> dict[str, np.ndarray]:
    """Columns ``STATE``, ``COUNTY``, ``TRACT``, ``BLOCK`` (text) and ``POP`` (int32) of ``n`` blocks.

    Examples
    --------
    >>> t = block_table(2000)
    >>> len(t["BLOCK"]), bool(t["BLOCK"][0].startswith(t["TRACT"][0]))
    (2000, True)
    """
    rng = np.random.default_rng((SEED, n))
    n_tracts = max(N_STATES, round(n / BLOCKS_PER_TRACT))
    n_counties = min(N_COUNTIES, n_tracts)
    states = np.char.zfill(np.arange(1, N_STATES + 1).astype(str), 2)
    per_state = _spread(rng, n_counties, N_STATES, 0.8)
    counties = _codes(states, per_state, 3)
    per_county = _spread(rng, n_tracts, n_counties, 1.0)
    tracts = _codes(counties, per_county, 6)
    per_tract = _spread(rng, n, n_tracts, 0.7)
    blocks = _codes(tracts, per_tract, 4)
    occupied = rng.random(n) >= EMPTY
    mean = rng.lognormal(np.log(40.0), 0.9, n)
    pop = np.where(occupied, 1 + rng.geometric(1.0 / np.maximum(mean, 1.0)), 0).astype(np.int32)
    return {"STATE": blocks.astype("U2"), "COUNTY": blocks.astype("U5"), "TRACT": blocks.astype("U11"), "BLOCK": blocks, "POP": pop}


def write(n: int, out: Path, csv: bool = False) -> Path:
    """Write the table of ``n`` blocks to ``out`` (Parquet, or CSV when ``csv``)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    t = block_table(n)
    table = pa.table({k: pa.array(v) for k, v in t.items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    if csv:
        pacsv.write_csv(table, tmp)
    else:
        pq.write_table(table, tmp, row_group_size=1_000_000, compression="snappy")
    tmp.rename(out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--csv", action="store_true", help="write CSV instead of Parquet")
    a = ap.parse_args()
    t0 = time.perf_counter()
    write(a.rows, a.out, a.csv)
    print(f"{a.out}: {a.rows:,} blocks in {time.perf_counter() - t0:.1f} s, {a.out.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
