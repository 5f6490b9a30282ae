"""A FRESH held-out family for ``auto`` (issue 27, item 1), frozen before the rule was changed.

The head-to-head's held-out sets (the Uber pickups, ``many_small`` and the whole 256² run) were
looked at four times while ``auto`` was built, so they are no longer a blind test.  This file
fixes a new family of data sets, seeds and settings BEFORE the rule of
``dpcore/points/recommend_features.py`` is re-derived; its results are read once, after the rule
is final (``--report``).  Nothing here is used to train or tune (``benchmarks/derive_auto_features.py``
reads only ``benchmarks/auto_generators.py`` at instance ids below 5,000).

Data sets (:data:`FRESH`; every one drawn from its own seed, in the unit square)
    Training families at seeds the training never drew (instance ids 90,001 on: new parameter
    draws of the same generators):

    * ``f_clusters``, ``f_roads``, ``f_mixture``, ``f_heavy``: one instance each;
    * ``f_smooth``: near-uniform (the only non-clustered set).

    Shapes no training family has:

    * ``street_grid``: a city of straight streets on a rotated lattice (8 to 20 streets a side),
      density falling off from the centre, plus a few dense blocks;
    * ``coast``: a sinuous coastline with towns on it and density decaying inland (the sea empty);
    * ``ri_jobs``: REAL-SHAPED: the workplaces of Rhode Island (LODES 2019 main file, block
      centroids of ``ri_lodes7_xwalk_2010blocks.csv.gz`` weighted by jobs ``S000``), resampled and
      jittered by 0.2 % of the state's box;
    * ``nyc_green``: REAL-SHAPED: NYC green-taxi pickups of April 2020 at their taxi zones'
      vertex centroids (``nyc_taxi_zones.geojson``), resampled and jittered by 0.4 % of the box.

    None of these files is used by the head-to-head's reports or by the training.

Settings
    grid 256 × 256; n ∈ {10^3, 10^4, 10^5, 10^6}; ε ∈ {0.01, 0.1, 1}: 9 × 4 × 3 = 108 settings;
    random-shape rectangles of 0.1 %, 1 %, 10 % of the area, 300 per size and release (fresh
    workload seeds); 5 releases per setting for the compared mechanisms; ``auto`` 16 at ε = 1 on
    the clustered sets (all but ``f_smooth``: 32 such settings), for its worst of 16; ``auto`` runs
    at its defaults and as ``auto_features`` (``feature_share = 0.05``, the feature rule).  Compared
    mechanisms (:data:`COMPARED`): every mechanism that won a setting of the 256² head-to-head but
    HTF (privtree, ag, ag_pool, ug, uniform, dawa, identity; HTF won 2 of 120 there and is the
    slowest); noise seeds prefixed ``fresh``.  (Amended before any result was read, for the
    machine's load: the first version gave every mechanism 16 releases at ε = 1 and compared HTF;
    rows already made that way are kept, and the report reads releases 0–4 of the compared ones.)

    The 13-candidate rule (2026-11-29, evening): ``--new`` runs :data:`NEW_COMPARED` (5 releases,
    as the compared ones), and ``--new --auto`` the label :data:`AUTO13` after that rule was
    committed, into ``auto_fresh_13.csv`` (the file above is left as it was read).  The 14-candidate
    rule (2026-11-30, ``privtree_ag`` added): the same with ``--round 14`` into ``auto_fresh_14.csv``
    (:data:`ROUNDS`).

    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh.py --run            # the compared mechanisms
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh.py --run --new      # ag_pool_smooth, dawa_free
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh.py --run --new --auto  # auto_features13
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh.py --run --new --round 14 [--auto]  # privtree_ag [auto_features14]
    nice -n 10 /work/main/.venv/bin/python benchmarks/auto_fresh.py --run --auto     # auto, auto_features (rule final)
    /work/main/.venv/bin/python benchmarks/derive_auto_features.py --report --fresh  # the held-out tables (auto_features.md)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import auto_generators as gens  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import spatial  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import Bounds, Grid, aggregate_points  # noqa: E402
from dpcore.errors import ParameterError  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

DATA = Path("/work/shared/data")
RESULTS = ROOT / "benchmarks" / "results"
CSV = RESULTS / "auto_fresh.csv"
UNIT = Bounds(0.0, 0.0, 1.0, 1.0)
GRID = 256
NS = (1_000, 10_000, 100_000, 1_000_000)
EPSILONS = (0.01, 0.1, 1.0)
SIZES = spatial.SIZES
QUERIES = 300
COMPARED = ("privtree", "ag", "ag_pool", "ug", "uniform", "dawa", "identity")
#: the candidates added to ``auto`` later (issue 27), by the rule that first had them: candidate
#: count -> (the new mechanisms, the label of ``auto``'s rule with them); each round runs on both
#: fresh families after its rule was committed, into its own CSVs (:func:`csv_round`), so the
#: frozen files stay as read.  13: 2026-11-29, evening; 14: ``privtree_ag``, 2026-11-30.
ROUNDS: dict[int, tuple[tuple[str, ...], str]] = {
    13: (("ag_pool_smooth", "dawa_free"), "auto_features13"),
    14: (("privtree_ag",), "auto_features14"),
}
#: the candidates added on 2026-11-29 (the 13-candidate round)
NEW_COMPARED = ROUNDS[13][0]
#: the label of ``auto``'s rule with 13 candidates (the feature rule at its share, read at run time)
AUTO13 = ROUNDS[13][1]
#: every candidate mechanism added after :data:`COMPARED`, in order
ALL_NEW = tuple(m for ms, _ in ROUNDS.values() for m in ms)
#: the labels that get 16 releases at ε = 1 on clustered data (their worst of 16 is a target)
SIXTEEN = ("auto", "auto_features")
#: the frozen family: name -> (generator, seed, clustered)
FRESH: dict[str, tuple[str, int, bool]] = {
    "f_clusters": ("clusters", 90_001, True),
    "f_roads": ("roads", 90_002, True),
    "f_mixture": ("mixture", 90_003, True),
    "f_heavy": ("heavy", 90_004, True),
    "f_smooth": ("smooth", 90_005, False),
    "street_grid": ("street_grid", 90_006, True),
    "coast": ("coast", 90_007, True),
    "ri_jobs": ("ri_jobs", 90_008, True),
    "nyc_green": ("nyc_green", 90_009, True),
}


def _hash(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def street_grid(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    k = int(rng.integers(8, 21))
    angle = rng.uniform(0, np.pi / 2)
    cx, cy = rng.uniform(0.35, 0.65, 2)
    half = rng.uniform(0.2, 0.45)
    width = rng.uniform(0.3, 1.5) / 512
    scale = rng.uniform(0.1, 0.4)  # density falls off from the centre
    ca, sa = np.cos(angle), np.sin(angle)
    blocks = [(rng.uniform(-half, half, 2), rng.uniform(0.005, 0.02)) for _ in range(int(rng.integers(2, 8)))]

    def streets(m: int) -> tuple:
        u = rng.laplace(0, scale, m).clip(-half, half)
        line = (rng.integers(0, k, m) / (k - 1) * 2 - 1) * half + rng.normal(0, width, m)
        along_x = rng.random(m) < 0.5
        a, b = np.where(along_x, u, line), np.where(along_x, line, u)
        return cx + ca * a - sa * b, cy + sa * a + ca * b

    def dense(m: int) -> tuple:
        i = rng.integers(0, len(blocks), m)
        c = np.array([b[0] for b in blocks])[i]
        s = np.array([b[1] for b in blocks])[i]
        a, b = c[:, 0] + s * rng.uniform(-1, 1, m), c[:, 1] + s * rng.uniform(-1, 1, m)
        return cx + ca * a - sa * b, cy + sa * a + ca * b
    return gens.split(rng, n, [(0.8, streets), (0.2, dense)])


def coast(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    amp, freq, phase = rng.uniform(0.05, 0.2), rng.uniform(1, 4), rng.uniform(0, 2 * np.pi)
    base = rng.uniform(0.3, 0.6)
    decay = rng.uniform(0.02, 0.15)

    def shore(x: np.ndarray) -> np.ndarray:
        return base + amp * np.sin(2 * np.pi * freq * x + phase)

    towns = rng.random(int(rng.integers(5, 30)))

    def inland(m: int) -> tuple:
        x = rng.random(m)
        return x, shore(x) + rng.exponential(decay, m)

    def town(m: int) -> tuple:
        x = towns[rng.integers(0, towns.size, m)] + rng.normal(0, 0.004, m)
        return x, shore(x) + np.abs(rng.normal(0, 0.004, m))
    return gens.split(rng, n, [(0.6, inland), (0.4, town)])


_real: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _ri_jobs_weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xw = pd.read_csv(DATA / "od" / "ri_lodes7_xwalk_2010blocks.csv.gz", usecols=["tabblk2010", "blklatdd", "blklondd"])
    od = pd.read_csv(DATA / "od" / "ri_lodes7_od_main_JT00_2019.csv.gz", usecols=["w_geocode", "S000"])
    jobs = od.groupby("w_geocode")["S000"].sum()
    m = xw.set_index("tabblk2010").join(jobs, how="inner")
    return m["blklondd"].to_numpy(float), m["blklatdd"].to_numpy(float), m["S000"].to_numpy(float)


def _nyc_green_weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    zones = json.loads((DATA / "boundaries" / "nyc_taxi_zones.geojson").read_text())
    cent = {}
    for f in zones["features"]:
        g = f["geometry"]
        rings = g["coordinates"] if g["type"] == "Polygon" else [r for p in g["coordinates"] for r in p]
        pts = np.concatenate([np.asarray(r, float) for r in rings])
        cent[int(f["properties"]["LocationID"])] = pts.mean(axis=0)
    with gzip.open(DATA / "od" / "nyc_green_taxi_trips_2020-04.csv.gz") as fh:
        trips = pd.read_csv(fh, usecols=["PULocationID"])
    c = trips["PULocationID"].value_counts()
    ids = [i for i in c.index if int(i) in cent and int(i) != 1]  # zone 1 (Newark airport) lies far out
    xy = np.array([cent[int(i)] for i in ids])
    return xy[:, 0], xy[:, 1], c.loc[ids].to_numpy(float)


def _real_shaped(name: str, load: Callable[[], tuple], jitter: float) -> Callable:
    def draw_all(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        if name not in _real:
            _real[name] = load()
        lon, lat, w = _real[name]
        x0, x1, y0, y1 = lon.min(), lon.max(), lat.min(), lat.max()
        side = max(x1 - x0, y1 - y0) * 1.04
        ox, oy = (x0 + x1 - side) / 2, (y0 + y1 - side) / 2
        p = w / w.sum()

        def draw(m: int) -> tuple:
            i = rng.choice(lon.size, size=m, p=p)
            return (lon[i] - ox) / side + rng.normal(0, jitter, m), (lat[i] - oy) / side + rng.normal(0, jitter, m)
        return gens.fill(n, draw)
    return draw_all


NEW_GENERATORS: dict[str, Callable] = {
    "street_grid": street_grid, "coast": coast,
    "ri_jobs": _real_shaped("ri_jobs", _ri_jobs_weights, 0.002),
    "nyc_green": _real_shaped("nyc_green", _nyc_green_weights, 0.004),
}


def fresh_points(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of the fresh data set ``name`` (frozen seed)."""
    gen, seed, _ = FRESH[name]
    if gen in gens.GENERATORS:
        return gens.points(gen, n, seed)
    rng = np.random.default_rng(seed)
    x, y = NEW_GENERATORS[gen](rng, int(n))
    return np.clip(x, 0, np.nextafter(1, 0))[:n], np.clip(y, 0, np.nextafter(1, 0))[:n]


def releases_for(name: str, eps: float, label: str, family: dict[str, tuple[str, int, bool]] | None = None,
                 sixteen: tuple[str, ...] = SIXTEEN) -> int:
    return 16 if (eps == 1.0 and (family or FRESH)[name][2] and label in sixteen) else 5


def run(mechanisms: dict[str, tuple[str, dict]], log: Callable[[str], None], *,
        family: dict[str, tuple[str, int, bool]] | None = None,
        points_of: Callable[[str, int], tuple[np.ndarray, np.ndarray]] | None = None,
        csv: Path = CSV, prefix: str = "fresh", sixteen: tuple[str, ...] = SIXTEEN,
        seed_label: dict[str, str] | None = None) -> None:
    """Release every (label -> (mechanism, params)) on every fresh setting not yet in the CSV
    (by default this file's family; another held-out family passes its own ``family``,
    ``points_of``, ``csv``, seed ``prefix`` and the labels with 16 releases).  ``seed_label`` maps a
    label to the label its noise seeds are drawn for (paired releases; default: its own)."""
    family, points_of = family or FRESH, points_of or fresh_points
    done = set()
    if csv.exists():
        d = pd.read_csv(csv, usecols=["dataset", "n", "epsilon", "mechanism"])
        done = {(a, int(b), round(float(c), 12), m) for a, b, c, m in d.drop_duplicates().itertuples(index=False)}
    grid = Grid(UNIT, GRID, GRID)
    for name in family:
        for n in NS:
            todo = [(e, lab) for e in EPSILONS for lab in mechanisms if (name, n, round(e, 12), lab) not in done]
            if not todo:
                continue
            t0 = time.perf_counter()
            x, y = points_of(name, n)
            agg = aggregate_points(x, y, grid)
            loads = []
            for r in range(16):
                ws = _hash(f"{prefix}-workload", r)
                qs, tags = queries.random_rectangles(grid, SIZES, QUERIES, shape="random", seed=ws)
                loads.append((ws, qs, tags, queries.true_answers(agg.counts, qs)))
            for eps, label in todo:
                mech_name, params = mechanisms[label]
                mech = catalog.get("points", mech_name)
                base = {"dataset": name, "data_shape": family[name][0], "source": f"seed {family[name][1]}",
                        "n": agg.total, "grid_rows": GRID, "grid_cols": GRID, "west": 0.0, "south": 0.0,
                        "east": 1.0, "north": 1.0, "epsilon": eps, "unit": "record", "sensitivity": 1,
                        "query_shape": "random", "mechanism": label}
                rows: list[dict] = []
                try:
                    for r in range(releases_for(name, eps, label, family, sixteen)):
                        ns = _hash(f"{prefix}-noise", name, n, eps, (seed_label or {}).get(label, label), r)
                        t1 = time.perf_counter()
                        plan = mech.plan(grid, eps, dict(params) or None, unit=points_unit(None))
                        rel = mech.release(plan, agg, NoiseSource(ns)).inner
                        dt = time.perf_counter() - t1
                        rows += spatial.score_rows(rel, loads[r], {**base, "release": r, "release_seconds": dt,
                                                                   "noise_seed": ns})
                except ParameterError as exc:
                    rows = [{**base, "query_size": np.nan, "n_queries": 0, "release": -1, "status": "skipped",
                             "reason": str(exc).replace("\n", " ")}]
                spatial.append_rows(csv, rows)
            log(f"{name} n={n:,}: {len(todo)} (ε, mechanism) pairs in {time.perf_counter() - t0:.1f} s")


def csv_round(csv: Path, k: int = 13) -> Path:
    """The CSV beside ``csv`` holding round ``k``'s new mechanisms and ``auto`` label (:data:`ROUNDS`)."""
    return csv.with_name(f"{csv.stem}_{k}.csv")


def csv13(csv: Path) -> Path:
    """The CSV beside ``csv`` holding :data:`NEW_COMPARED` and :data:`AUTO13`'s rows."""
    return csv_round(csv, 13)


def new_labels(auto: bool, k: int = 13) -> dict[str, tuple[str, dict]]:
    """With ``auto``: round ``k``'s ``auto`` label (``auto`` at its default feature share); else
    round ``k``'s new mechanisms (:data:`ROUNDS`)."""
    mechs, label = ROUNDS[k]
    if auto:
        from dpcore.points import recommend_features as rf
        return {label: ("auto", {"feature_share": rf.FEATURE_SHARE})}
    return {m: (m, {}) for m in mechs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--auto", action="store_true",
                    help="run auto at its defaults and auto_features (feature_share 0.05), after the rule is final")
    ap.add_argument("--new", action="store_true", help="run round --round's new mechanisms (with --auto: its "
                    "auto label) into auto_fresh_<round>.csv")
    ap.add_argument("--round", type=int, default=13, choices=sorted(ROUNDS),
                    help="with --new: which round of candidates (13: ag_pool_smooth, dawa_free; 14: privtree_ag)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s] {msg}", flush=True)

    if a.run and a.new:
        run(new_labels(a.auto, a.round), log, csv=csv_round(CSV, a.round), sixteen=(*SIXTEEN, ROUNDS[a.round][1]))
    elif a.run:
        mechs = {m: (m, {}) for m in COMPARED}
        if a.auto:
            # "auto" was the data-free rule when this family was run (rule="table" since auto's default changed)
            mechs = {"auto": ("auto", {"rule": "table"}), "auto_features": ("auto", {"feature_share": 0.05})}
        run(mechs, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
