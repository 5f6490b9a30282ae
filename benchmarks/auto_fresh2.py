"""A SECOND fresh held-out family for ``auto`` (issue 27, item 1), frozen before the rule is re-derived.

The first fresh family (``benchmarks/auto_fresh.py``) was read once, after the first feature rule,
so it can no longer choose between rules.  This file fixes a new family of data sets, seeds,
workload and noise seeds BEFORE the rule of ``dpcore/points/recommend_features.py`` is changed
again (committed first; its results are read once, after the new rule is committed).  Nothing here
trains or tunes anything: the derivation (``benchmarks/derive_auto_features.py``) and the ceiling
(``benchmarks/auto_ceiling.py``) read only ``benchmarks/auto_generators.py``.

Data sets (:data:`FRESH2`; each from its own seed, in the unit square)
    Training families at seeds the training never drew (91,001 on):

    * ``g_clusters``, ``g_roads``, ``g_patches``, ``g_rings``: one instance each;
    * ``g_smooth``: near-uniform (the only set not counted as clustered).

    Shapes no training family (nor the first fresh family) has:

    * ``levy_trails``: GPS-trace-like: 3 to 15 walkers with heavy-tailed (Pareto) step lengths,
      points along their paths with a narrow jitter;
    * ``spiral_arms``: a galaxy: 2 to 4 logarithmic spiral arms widening outwards and a bulge;
    * ``checker``: a checkerboard of 4 to 12 squares a side over part of the square, filled squares
      at random (log-normal) densities, the others empty, a light background;
    * ``ri_homes``: REAL-SHAPED: the HOMES of Rhode Island's workers (LODES 2019 main file, block
      centroids of the residence blocks ``h_geocode`` weighted by ``S000``; the first fresh family
      used the workplaces), resampled and jittered by 0.2 % of the state's box.

Settings
    grid 256 × 256; n ∈ {10^3, 10^4, 10^5, 10^6}; ε ∈ {0.01, 0.1, 1}: 9 × 4 × 3 = 108 settings;
    random-shape rectangles of 0.1 %, 1 %, 10 % of the area, 300 per size and release (workload
    seeds prefixed ``fresh2``); 5 releases per setting for the compared mechanisms
    (:data:`auto_fresh.COMPARED`, default parameters, full ε); the ``auto`` labels 16 at ε = 1 on
    the clustered sets (all but ``g_smooth``), 5 elsewhere.  ``auto`` runs as ``auto_datafree``
    (``feature_share = 0``: the data-free rule with its 5 % count) and ``auto_features`` (the
    feature rule at :data:`dpcore.points.recommend_features.FEATURE_SHARE`).

    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh2.py --run          # the compared mechanisms
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh2.py --run --auto   # the auto labels (rule final)
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh2.py --run --new [--auto]  # 13 candidates: auto_fresh2_13.csv
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh2.py --run --new --round 14 [--auto]  # 14: auto_fresh2_14.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import auto_fresh  # noqa: E402
import auto_generators as gens  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

CSV = auto_fresh.RESULTS / "auto_fresh2.csv"
#: the auto labels' rows (a file of their own: they run after, or beside, the compared mechanisms)
CSV_AUTO = auto_fresh.RESULTS / "auto_fresh2_auto.csv"
SIXTEEN = ("auto_datafree", "auto_features")
#: the frozen family: name -> (generator, seed, clustered)
FRESH2: dict[str, tuple[str, int, bool]] = {
    "g_clusters": ("clusters", 91_001, True),
    "g_roads": ("roads", 91_002, True),
    "g_patches": ("patches", 91_003, True),
    "g_rings": ("rings", 91_004, True),
    "g_smooth": ("smooth", 91_005, False),
    "levy_trails": ("levy_trails", 91_006, True),
    "spiral_arms": ("spiral_arms", 91_007, True),
    "checker": ("checker", 91_008, True),
    "ri_homes": ("ri_homes", 91_009, True),
}


def levy_trails(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    def walker() -> Callable[[int], tuple]:
        steps = 300
        alpha = rng.uniform(1.2, 2.0)
        length = (rng.pareto(alpha, steps) + 1) * rng.uniform(0.002, 0.01)
        angle = rng.uniform(0, 2 * np.pi, steps)
        path = np.cumsum(np.column_stack([length * np.cos(angle), length * np.sin(angle)]), axis=0)
        path = np.abs((path + rng.random(2)) % 2.0 - 1.0)  # reflected into the square
        width = rng.uniform(0.5, 2.0) / 512

        def draw(m: int) -> tuple:
            i, t = rng.integers(0, steps - 1, m), rng.random(m)
            p = path[i] + t[:, None] * (path[i + 1] - path[i])
            return p[:, 0] + rng.normal(0, width, m), p[:, 1] + rng.normal(0, width, m)
        return draw
    return gens.split(rng, n, [(float(w), walker()) for w in gens._weights(rng, int(rng.integers(3, 16)))])


def spiral_arms(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    arms, pitch = int(rng.integers(2, 5)), rng.uniform(0.15, 0.35)
    cx, cy = rng.uniform(0.4, 0.6, 2)
    r0, rmax = 0.02, rng.uniform(0.3, 0.48)
    spread = rng.uniform(0.02, 0.08)

    def arm(m: int) -> tuple:
        k = rng.integers(0, arms, m)
        r = r0 + rng.exponential(rmax / 3, m).clip(0, rmax)
        theta = np.log(r / r0) / pitch + 2 * np.pi * k / arms
        jit = rng.normal(0, spread * r, m)
        return cx + (r + jit) * np.cos(theta), cy + (r + jit) * np.sin(theta)
    bulge = rng.uniform(0.1, 0.3)
    return gens.split(rng, n, [(1 - bulge, arm), (bulge, gens._gauss(rng, cx, cy, rng.uniform(0.01, 0.04)))])


def checker(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    k = int(rng.integers(4, 13))
    side = rng.uniform(0.4, 0.95)
    x0, y0 = rng.uniform(0, 1 - side, 2)
    cell = side / k
    filled = [(i, j) for i in range(k) for j in range(k) if (i + j) % 2 == 0]
    dens = rng.lognormal(0, 1, len(filled))

    def square(i: int, j: int) -> Callable[[int], tuple]:
        return lambda m: (x0 + (i + rng.random(m)) * cell, y0 + (j + rng.random(m)) * cell)
    bg = rng.uniform(0.0, 0.1)
    parts = [(float(d) * (1 - bg) / float(dens.sum()), square(i, j)) for d, (i, j) in zip(dens, filled, strict=True)]
    return gens.split(rng, n, [*parts, (bg, gens._uniform(rng))])


def _ri_homes_weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = auto_fresh.DATA / "od"
    xw = pd.read_csv(data / "ri_lodes7_xwalk_2010blocks.csv.gz", usecols=["tabblk2010", "blklatdd", "blklondd"])
    od = pd.read_csv(data / "ri_lodes7_od_main_JT00_2019.csv.gz", usecols=["h_geocode", "S000"])
    homes = od.groupby("h_geocode")["S000"].sum()
    m = xw.set_index("tabblk2010").join(homes, how="inner")
    return m["blklondd"].to_numpy(float), m["blklatdd"].to_numpy(float), m["S000"].to_numpy(float)


NEW_GENERATORS: dict[str, Callable] = {
    "levy_trails": levy_trails, "spiral_arms": spiral_arms, "checker": checker,
    "ri_homes": auto_fresh._real_shaped("ri_homes", _ri_homes_weights, 0.002),
}


def fresh2_points(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of the second fresh family's data set ``name`` (frozen seed).

    >>> x, y = fresh2_points("checker", 500)
    >>> x.size, bool(((x >= 0) & (x < 1)).all())
    (500, True)
    """
    gen, seed, _ = FRESH2[name]
    if gen in gens.GENERATORS:
        return gens.points(gen, n, seed)
    rng = np.random.default_rng(seed)
    x, y = NEW_GENERATORS[gen](rng, int(n))
    return np.clip(x, 0, np.nextafter(1, 0))[:n], np.clip(y, 0, np.nextafter(1, 0))[:n]


def auto_labels() -> dict[str, tuple[str, dict]]:
    """The ``auto`` labels: the data-free rule and the feature rule at its share (read at run time)."""
    from dpcore.points import recommend_features as rf
    return {"auto_datafree": ("auto", {"feature_share": 0.0}),
            "auto_features": ("auto", {"feature_share": rf.FEATURE_SHARE})}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--auto", action="store_true", help="run the auto labels (after the rule is final)")
    ap.add_argument("--new", action="store_true",
                    help="run round --round's new mechanisms (with --auto: its auto label; auto_fresh.ROUNDS) "
                    "into auto_fresh2_<round>.csv")
    ap.add_argument("--round", type=int, default=13, choices=sorted(auto_fresh.ROUNDS),
                    help="with --new: which round of candidates (13: ag_pool_smooth, dawa_free; 14: privtree_ag)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s] {msg}", flush=True)

    if a.run and a.new:
        auto_fresh.run(auto_fresh.new_labels(a.auto, a.round), log, family=FRESH2, points_of=fresh2_points,
                       csv=auto_fresh.csv_round(CSV, a.round), prefix="fresh2",
                       sixteen=(*SIXTEEN, auto_fresh.ROUNDS[a.round][1]))
    elif a.run:
        mechs = auto_labels() if a.auto else {m: (m, {}) for m in auto_fresh.COMPARED}
        auto_fresh.run(mechs, log, family=FRESH2, points_of=fresh2_points, csv=CSV_AUTO if a.auto else CSV,
                       prefix="fresh2", sixteen=SIXTEEN)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
