"""A head-to-head of every point mechanism, in the manner of DPBench (issue 19, item 4).

DPBench (Hay, Machanavajjhala, Miklau, Chen & Zhang, "Principled Evaluation of Differentially
Private Algorithms using DPBench", SIGMOD 2016, Sec. 5–6) compares algorithms over data shape,
scale (number of points) and ε, because no algorithm wins everywhere.  This script does the same
for the mechanisms of :mod:`dpcore.points.mechanisms`.

Settings (one setting = dataset × n × grid × ε)
    * datasets: the NYC Uber pickups of April 2014 (public NYC TLC records, /work/shared/data/points,
      over the "New York City core" preset box), the 23k earthquakes (whole world box), the HTF
      paper's Gaussian (one centre, σ = 50 cells of a 1024 grid, Shaham et al. 2021, Sec. 5.1; our
      generator), and the clustered shapes of :func:`dpcore.data.synthetic.clustered_points`
      (``tight_wide``, ``many_small``, ``roads``, ``single_tight``, ``uniform``);
    * n ∈ {10^3, 10^4, 10^5, 10^6, 10^7} points inside the box.  Real data are subsampled without
      replacement; where n exceeds the file (Uber above 10^5·5.6, the earthquakes above 23k) the
      points are RESAMPLED WITH REPLACEMENT AND JITTERED (Gaussian, σ = half a cell of the grid,
      clipped to the box), so those rows are "real-shaped", not real;
    * ε ∈ {0.01, 0.1, 1} (pure ε-DP, one record per unit);
    * grid 512 x 512 by default (``--grid``);
    * queries: random rectangles (aspect ratio log-uniform in [1/4, 4], dpcore.data.queries) of
      0.1 %, 1 % and 10 % of the area, ``--queries`` per size, a fresh public workload per release
      index shared by all mechanisms and ε;
    * mechanisms: EVERY mechanism in the registry (read at run time, so mechanisms merged later are
      included), default parameters, no public n (mechanisms that size themselves from n spend
      part of their budget on it, as in a real release).  A mechanism that refuses a setting
      (ParameterError, e.g. the matrix mechanism on grids above 256²) is logged with its reason and
      a ``skipped`` row, and not retried;
    * releases: 5 per setting, 16 at ε = 1 on the clustered data (everything but ``uniform``);
      seeded benchmark noise (a hash of the setting and the release index) — never a real release.

Scores: MRE in percent, 100·|true − released| / max(true, 20), mean over a release's queries of
one size (Shaham et al. 2021, Sec. 5.1), then the mean and the worst over the releases.

Outputs (``--out``, default benchmarks/results/spatial): ``.csv`` (one row per setting ×
mechanism × release × query size, carrying every public input of the setting: dataset, data
shape, source, n, grid, bounds, ε, unit, sensitivity, query size and shape, so a rule for
``auto`` can be fitted from it), ``.md`` (tables and verdicts) and ``.png``.  Resumable: rows are
appended after each (setting, mechanism), and settings already in the CSV are skipped; delete
rows (or the file) to redo them.

    /work/main/.venv/bin/python benchmarks/spatial.py --quick          # smoke run, spatial_quick.*
    /work/main/.venv/bin/python benchmarks/spatial.py --max-n 1000000  # the medium run
    /work/main/.venv/bin/python benchmarks/spatial.py                  # full run (adds 10^7)
    /work/main/.venv/bin/python benchmarks/spatial.py --mechanisms privtree,dawa   # add new ones
    /work/main/.venv/bin/python benchmarks/spatial.py --report-only    # tables from the CSV
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import platform
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import PRESETS, Bounds, Grid, aggregate_points  # noqa: E402
from dpcore.data.points import load_points_file  # noqa: E402
from dpcore.data.synthetic import clustered_points, gaussian_clusters  # noqa: E402
from dpcore.errors import ParameterError  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

DATA = Path("/work/shared/data/points")
UNIT = Bounds(0.0, 0.0, 1.0, 1.0)
NYC = PRESETS["New York City core (Manhattan, Brooklyn, Queens, Bronx)"]
WORLD = PRESETS["Whole world"]
SHAPES = ("tight_wide", "many_small", "roads", "single_tight", "uniform")
DATASETS = ("uber", "earthquakes", "gauss_paper", *SHAPES)
NS = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
EPSILONS = (0.01, 0.1, 1.0)
SIZES = (0.001, 0.01, 0.1)
SMOOTHING = 20.0
COLUMNS = [
    "dataset", "data_shape", "source", "n", "grid_rows", "grid_cols", "west", "south", "east", "north",
    "epsilon", "unit", "sensitivity", "query_shape", "query_size", "n_queries", "mechanism", "release",
    "status", "reason", "mre_percent", "mae", "rmse", "release_seconds", "n_leaves", "noise_seed",
    "workload_seed",
]


@dataclass(frozen=True)
class Dataset:
    name: str
    shape: str  # public description of the data shape
    bounds: Bounds
    clustered: bool


DATASET_INFO = {
    "uber": Dataset("uber", "real: city pickups (NYC Uber 2014-04)", NYC, True),
    "earthquakes": Dataset("earthquakes", "real: world earthquakes (plate boundaries)", WORLD, True),
    "gauss_paper": Dataset("gauss_paper", "synthetic: one Gaussian, σ = 50/1024 (HTF paper)", UNIT, True),
    **{s: Dataset(s, f"synthetic: {s}", UNIT, s != "uniform") for s in SHAPES},
}

_real_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def _real_points(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name not in _real_cache:
        if name == "uber":
            t = load_points_file(DATA / "uber_nyc_pickups_2014-04.csv.gz", "uber.csv.gz", lat_col="Lat", lon_col="Lon")
        else:
            t = load_points_file(DATA / "earthquakes_23k.csv", "earthquakes_23k.csv",
                                 lat_col="Latitude", lon_col="Longitude")
        lon, lat = np.asarray(t.lon, float), np.asarray(t.lat, float)
        b = DATASET_INFO[name].bounds
        inside = (lon >= b.west) & (lon < b.east) & (lat >= b.south) & (lat < b.north)
        _real_cache[name] = (lon[inside], lat[inside])
    return _real_cache[name]


def make_points(name: str, n: int, grid: Grid) -> tuple[np.ndarray, np.ndarray, str]:
    """``n`` points of a dataset and how they were made (``source`` column)."""
    seed = int.from_bytes(hashlib.sha256(f"data:{name}:{n}".encode()).digest()[:4], "little")
    rng = np.random.default_rng(seed)
    b = DATASET_INFO[name].bounds
    if name in ("uber", "earthquakes"):
        lon, lat = _real_points(name)
        if n <= lon.size:
            idx = rng.choice(lon.size, size=n, replace=False)
            return lon[idx], lat[idx], f"subsample of {lon.size:,}"
        idx = rng.integers(0, lon.size, size=n)
        dx, dy = 0.5 * grid.dlon, 0.5 * grid.dlat
        x = np.clip(lon[idx] + rng.normal(0, dx, n), b.west, np.nextafter(b.east, b.west))
        y = np.clip(lat[idx] + rng.normal(0, dy, n), b.south, np.nextafter(b.north, b.south))
        return x, y, f"resampled with jitter from {lon.size:,}"
    if name == "gauss_paper":
        lon, lat = gaussian_clusters(n, b, sigma_cells=50.0, resolution=1024, seed=seed)
        return lon, lat, "synthetic"
    lon, lat = clustered_points(n, b, name, seed=seed)
    return lon, lat, "synthetic"


def _hash(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def releases_for(ds: Dataset, eps: float, base: int) -> int:
    return 16 if (eps == 1.0 and ds.clustered) else base


def setting_key(dataset: str, n: int, rows: int, cols: int, eps: float, mech: str) -> tuple:
    return (dataset, int(n), int(rows), int(cols), round(float(eps), 12), mech)


def done_keys(csv: Path) -> set[tuple]:
    if not csv.exists():
        return set()
    df = pd.read_csv(csv, usecols=["dataset", "n", "grid_rows", "grid_cols", "epsilon", "mechanism"])
    return {setting_key(*r) for r in df.drop_duplicates().itertuples(index=False)}


_INT_COLUMNS = ("n", "grid_rows", "grid_cols", "sensitivity", "n_queries", "release", "n_leaves", "noise_seed",
                "workload_seed")


def append_rows(csv: Path, rows: list[dict]) -> None:
    """Append rows; floats to 6 significant digits (the CSV stays small), integers exact."""
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in _INT_COLUMNS:
        df[c] = df[c].astype("Int64")
    df.to_csv(csv, mode="a", header=not csv.exists(), index=False, float_format="%.6g")


def score_rows(rel, load: tuple, base: dict) -> list[dict]:
    """One CSV row per query size of a release ``rel`` on ``load`` = (workload seed, queries,
    their size tags, true answers): MRE (sanity bound :data:`SMOOTHING`), MAE, RMSE."""
    ws, qs, tags, true = load
    est = rel.answer(qs)
    rows = []
    for s in SIZES:
        m = tags == s
        rows.append({**base, "query_size": s, "n_queries": int(m.sum()), "status": "ok", "reason": "",
                     "mre_percent": metrics.mre(true[m], est[m], SMOOTHING), "mae": metrics.mae(true[m], est[m]),
                     "rmse": metrics.rmse(true[m], est[m]), "n_leaves": int(np.count_nonzero(rel.leaf)),
                     "workload_seed": ws})
    return rows


def run(args: argparse.Namespace, csv: Path, log) -> None:
    grid_template = int(args.grid)
    names = catalog.names("points")
    if args.mechanisms:
        wanted = [m.strip().lower() for m in args.mechanisms.split(",") if m.strip()]
        missing = [m for m in wanted if m not in names]
        for m in missing:
            log(f"mechanism {m!r} is not in the registry (yet): skipped")
        names = [m for m in names if m in wanted]
    done = done_keys(csv)
    log(f"mechanisms: {', '.join(names)}; {len(done)} (setting, mechanism) pairs already in {csv.name}")
    for name in args.datasets:
        ds = DATASET_INFO[name]
        grid = Grid(ds.bounds, grid_template, grid_template)
        for n in args.ns:
            todo = [(e, m) for e in args.epsilons for m in names
                    if setting_key(name, n, grid.rows, grid.cols, e, m) not in done]
            if not todo:
                continue
            t0 = time.perf_counter()
            lon, lat, source = make_points(name, n, grid)
            agg = aggregate_points(lon, lat, grid)
            del lon, lat
            n_in = agg.total
            max_rel = max(releases_for(ds, e, args.releases) for e, _ in todo)
            loads = []
            for r in range(max_rel):
                ws = _hash("workload", grid.rows, grid.cols, r)
                qs, tags = queries.random_rectangles(grid, SIZES, args.queries, shape="random", seed=ws)
                loads.append((ws, qs, tags, queries.true_answers(agg.counts, qs)))
            log(f"{name} n={n:,} ({source}; {n_in:,} in the box): data and workloads in "
                f"{time.perf_counter() - t0:.1f} s")
            for eps, mech_name in todo:
                mech = catalog.get("points", mech_name)
                base = {"dataset": name, "data_shape": ds.shape, "source": source, "n": n_in,
                        "grid_rows": grid.rows, "grid_cols": grid.cols, "west": ds.bounds.west,
                        "south": ds.bounds.south, "east": ds.bounds.east, "north": ds.bounds.north,
                        "epsilon": eps, "unit": "record", "sensitivity": int(agg.sensitivity),
                        "query_shape": "random", "mechanism": mech_name}
                rows: list[dict] = []
                try:
                    for r in range(releases_for(ds, eps, args.releases)):
                        ns = _hash("noise", name, n, grid.rows, eps, mech_name, r)
                        t1 = time.perf_counter()
                        rel = mech.release(mech.plan(agg.grid, eps, None, unit=points_unit(agg.user_cap)), agg, NoiseSource(ns)).inner
                        dt = time.perf_counter() - t1
                        rows += score_rows(rel, loads[r], {**base, "release": r, "release_seconds": dt,
                                                           "noise_seed": ns})
                except ParameterError as exc:
                    reason = str(exc).replace("\n", " ")
                    log(f"  skip {mech_name} at {name} n={n:,} ε={eps:g}: {reason}")
                    rows = [{**base, "query_size": np.nan, "n_queries": 0, "release": -1, "status": "skipped",
                             "reason": reason}]
                append_rows(csv, rows)
                done.add(setting_key(name, n, grid.rows, grid.cols, eps, mech_name))
            log(f"  {name} n={n:,}: {len(todo)} (ε, mechanism) pairs in {time.perf_counter() - t0:.1f} s")


# ------------------------------------------------------------------------------------------ report


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["status"] == "ok"]
    per_rel = (ok.groupby(["dataset", "n", "grid_rows", "epsilon", "mechanism", "release"], as_index=False)
               ["mre_percent"].mean())  # pooled over the query sizes
    g = per_rel.groupby(["dataset", "n", "grid_rows", "epsilon", "mechanism"])["mre_percent"]
    out = g.agg(mean="mean", worst="max", median="median", releases="count").reset_index()
    return out


def _fmt(v: float) -> str:
    if not np.isfinite(v):
        return "–"
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def n_label(n: float) -> str:
    e = np.log10(max(n, 1))
    return f"10^{e:.0f}" if abs(e - round(e)) < 0.02 else f"{int(n):,}"


def _nominal(n: int) -> int:
    return int(10 ** round(np.log10(max(n, 1))))


def verdicts(summ: pd.DataFrame) -> list[str]:
    if summ.empty:
        return ["no results yet"]
    s = summ[summ["mechanism"] != "auto"].copy()  # auto chooses among the others: not a competitor
    s["n_nom"] = s["n"].map(_nominal)
    keys = ["dataset", "n_nom", "grid_rows", "epsilon"]
    win = s.loc[s.groupby(keys)["mean"].idxmin()]
    win_worst = s.loc[s.groupby(keys)["worst"].idxmin()]
    total = len(win)
    lines = []
    counts = win["mechanism"].value_counts()
    lines.append(f"Lowest mean MRE (pooled over query sizes) in {total} settings: "
                 + ", ".join(f"{m} {c}" for m, c in counts.items()) + ".")
    wc = win_worst["mechanism"].value_counts()
    lines.append("Lowest WORST-release MRE: " + ", ".join(f"{m} {c}" for m, c in wc.items()) + ".")
    for eps in sorted(s["epsilon"].unique()):
        c = win[win["epsilon"] == eps]["mechanism"].value_counts()
        lines.append(f"At ε = {eps:g}: " + ", ".join(f"{m} wins {k} of {c.sum()}" for m, k in c.items()) + ".")
    for n in sorted(s["n_nom"].unique()):
        c = win[win["n_nom"] == n]["mechanism"].value_counts()
        lines.append(f"At n ≈ {n_label(n)}: " + ", ".join(f"{m} {k}" for m, k in c.items()) + ".")
    for d in s["dataset"].unique():
        c = win[win["dataset"] == d]["mechanism"].value_counts()
        lines.append(f"On {d}: " + ", ".join(f"{m} {k}" for m, k in c.items()) + ".")
    # how far the single best default is from the per-setting best
    best = win.set_index(keys)["mean"]
    for m in counts.index[:3]:
        mm = s[s["mechanism"] == m].set_index(keys)["mean"]
        ratio = (mm / best).dropna()
        if len(ratio):
            lines.append(f"Always choosing {m}: median {ratio.median():.2f}x, worst {ratio.max():.1f}x the "
                         f"best mechanism's mean MRE ({len(ratio)} settings).")
    lines += trees_compared(s, keys)
    if "htf" in set(s["mechanism"]):
        h = s[s["mechanism"] == "htf"]
        spread = (h["worst"] / h["median"]).replace([np.inf], np.nan).dropna()
        bad = h[(h["worst"] > 3 * h["median"])]
        lines.append(f"HTF's worst release exceeds 3x its median in {len(bad)} of {len(h)} settings "
                     f"(largest worst/median {spread.max():.1f}x).")
    return lines


def trees_compared(s: pd.DataFrame, keys: list[str]) -> list[str]:
    """HTF against PrivTree and DAWA (and AG), setting by setting: mean and worst-release MRE."""
    have = set(s["mechanism"])
    if not {"htf", "privtree"} <= have:
        return []
    piv = {stat: s.pivot_table(index=keys, columns="mechanism", values=stat) for stat in ("mean", "worst")}
    lines = []
    for other in [m for m in ("privtree", "dawa", "ag") if m in have]:
        for stat, word in (("mean", "mean"), ("worst", "worst-release")):
            t = piv[stat][["htf", other]].dropna()
            r = t["htf"] / t[other]
            lines.append(f"HTF vs {other}, {word} MRE: {other} lower in {int((r > 1).sum())} of {len(r)} settings; "
                         f"HTF/{other} median {r.median():.2f}x (range {r.min():.2f}–{r.max():.2f}x).")
    if "dawa" in have:
        t = piv["mean"][["dawa", "privtree"]].dropna()
        r = t["dawa"] / t["privtree"]
        lines.append(f"DAWA vs PrivTree, mean MRE: DAWA lower in {int((r < 1).sum())} of {len(r)} settings "
                     f"(DAWA/PrivTree median {r.median():.2f}x).")
    return lines


def markdown(df: pd.DataFrame, summ: pd.DataFrame, header: list[str]) -> str:
    out = ["# Spatial head-to-head (DPBench-style)", "", *header, ""]
    out += ["## Verdicts", "", *[f"- {v}" for v in verdicts(summ)], ""]
    skipped = df[df["status"] == "skipped"].drop_duplicates(["mechanism", "reason"])
    if len(skipped):
        out += ["## Skipped", ""] + [f"- {r.mechanism}: {r.reason}" for r in skipped.itertuples()] + [""]
    mechs = list(dict.fromkeys(summ["mechanism"]))
    for eps in sorted(summ["epsilon"].unique()):
        out += [f"## ε = {eps:g}: mean MRE % over releases (worst release in brackets), pooled over "
                "query sizes 0.1 %, 1 %, 10 %", "",
                "| dataset | n | " + " | ".join(mechs) + " | best |",
                "|---|---:|" + "---:|" * len(mechs) + "---|"]
        sub = summ[summ["epsilon"] == eps]
        for (d, n), grp in sub.groupby(["dataset", "n"], sort=False):
            g = grp.set_index("mechanism")
            cells = [f"{_fmt(g.loc[m, 'mean'])} ({_fmt(g.loc[m, 'worst'])})" if m in g.index else "–"
                     for m in mechs]
            best = g.drop(index="auto", errors="ignore")["mean"].idxmin()  # auto is not a competitor
            out.append(f"| {d} | {n_label(n)} | " + " | ".join(cells) + f" | {best} |")
        out.append("")
    # per query size winners
    ok = df[(df["status"] == "ok") & (df["mechanism"] != "auto")]
    by_size = ok.groupby(["dataset", "n", "epsilon", "query_size", "mechanism"])["mre_percent"].mean().reset_index()
    w = by_size.loc[by_size.groupby(["dataset", "n", "epsilon", "query_size"])["mre_percent"].idxmin()]
    out += ["## Winners by query size (count of settings)", "",
            "| query size | " + " | ".join(mechs) + " |", "|---:|" + "---:|" * len(mechs)]
    for s, grp in w.groupby("query_size"):
        c = grp["mechanism"].value_counts()
        out.append(f"| {s:.1%} | " + " | ".join(str(int(c.get(m, 0))) for m in mechs) + " |")
    out.append("")
    return "\n".join(out)


def plot(summ: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if summ.empty:
        return
    ds = list(dict.fromkeys(summ["dataset"]))
    eps_list = sorted(summ["epsilon"].unique())
    fig, axes = plt.subplots(len(eps_list), len(ds), figsize=(2.6 * len(ds), 2.4 * len(eps_list)),
                             squeeze=False, sharex=True)
    mechs = list(dict.fromkeys(summ["mechanism"]))
    colors = {m: plt.cm.tab10(i % 10) for i, m in enumerate(mechs)}
    for i, eps in enumerate(eps_list):
        for j, d in enumerate(ds):
            ax = axes[i][j]
            sub = summ[(summ["epsilon"] == eps) & (summ["dataset"] == d)]
            for m in mechs:
                t = sub[sub["mechanism"] == m].sort_values("n")
                if len(t):
                    ax.plot(t["n"], t["mean"], "-o", ms=3, color=colors[m], label=m)
            ax.set_xscale("log")
            ax.set_yscale("log")
            if i == 0:
                ax.set_title(d, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"ε = {eps:g}\nmean MRE %", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.supxlabel("number of points n", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


NOTES = re.compile(r"<!-- notes -->.*?<!-- /notes -->", re.S)


def report(csv: Path, out: Path, header: list[str]) -> pd.DataFrame:
    """Tables and verdicts from the CSV; a hand-written block between ``<!-- notes -->`` and
    ``<!-- /notes -->`` in the existing .md (plain verdicts, what was run) is kept after the header."""
    df = pd.read_csv(csv)
    summ = summarize(df)
    md = out.with_suffix(".md")
    old = NOTES.search(md.read_text()) if md.exists() else None
    text = markdown(df, summ, header)
    if old:
        text = text.replace("\n## Verdicts\n", "\n" + old.group(0) + "\n\n## Verdicts\n", 1)
    md.write_text(text)
    plot(summ, out.with_suffix(".png"))
    return summ


def parse_args(argv: Iterable[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="DPBench-style head-to-head of the point mechanisms")
    ap.add_argument("--quick", action="store_true", help="few settings, writes <out>_quick.*")
    ap.add_argument("--mechanisms", default="", help="comma-separated subset of the registry")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--max-n", type=float, default=max(NS), help="largest n (the medium run uses 1e6)")
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--grid", type=int, default=512, help="rows = cols of the grid")
    ap.add_argument("--queries", type=int, default=1000, help="queries per size and release")
    ap.add_argument("--releases", type=int, default=5, help="releases per setting (16 at ε = 1 on clustered data)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "spatial"))
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args(list(argv) if argv is not None else None)
    a.datasets = [d.strip() for d in a.datasets.split(",") if d.strip()]
    bad = [d for d in a.datasets if d not in DATASET_INFO]
    if bad:
        ap.error(f"unknown dataset(s) {bad}; choose from {', '.join(DATASETS)}")
    a.epsilons = [float(e) for e in a.epsilons.split(",")]
    a.ns = [n for n in NS if n <= a.max_n]
    if a.quick:
        if a.datasets == list(DATASETS):  # datasets named on the command line are kept
            a.datasets = [d for d in a.datasets if d in ("tight_wide", "uber")] or a.datasets[:1]
        a.ns = [10_000, 100_000]
        a.epsilons = [0.1, 1.0]
        a.out = a.out + "_quick"
    return a


def main(argv: Iterable[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    csv = out.with_suffix(".csv")
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f} s] {msg}", flush=True)

    if not args.report_only:
        run(args, csv, log)
    header = [
        f"- Last run: {datetime.date.today()}; {platform.machine()}, Python {platform.python_version()}; "
        f"this invocation {time.perf_counter() - t0:.0f} s. Command: `benchmarks/spatial.py "
        f"{' '.join(sys.argv[1:] if argv is None else list(argv))}`",
        f"- Grid {args.grid} x {args.grid} over each dataset's public box; random-shape queries of 0.1 %, 1 %, "
        f"10 % of the area, {args.queries} per size and release; MRE % with sanity bound {SMOOTHING:g}; "
        "default parameters, no public n; seeded benchmark noise.",
        "- Releases: 5 per setting, 16 at ε = 1 on clustered data. Real data above their size are resampled "
        "with replacement and jittered (σ = half a cell): 'real-shaped', not real (column `source`).",
        f"- Everything in the CSV: benchmarks/results/{csv.name} (one row per setting × mechanism × release × "
        "query size).",
    ]
    md = out.with_suffix(".md")
    if args.report_only and md.exists():  # keep the line of the run that made the rows
        last = [ln for ln in md.read_text().splitlines() if ln.startswith("- Last run:")]
        header[0] = last[0] if last else header[0]
    summ = report(csv, out, header)
    print("\n".join(verdicts(summ)))
    log(f"wrote {out.with_suffix('.csv')}, .md, .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
