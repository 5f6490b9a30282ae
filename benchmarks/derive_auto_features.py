"""Learn and validate ``auto``'s rule from private features (issue 27, item 1; Pythia, SIGMOD 2017).

Three steps, each resumable from its CSV:

``--train``
    The training sweep (``benchmarks/results/auto_features_train.csv``).  Instances of the
    generator families of ``benchmarks/auto_generators.py`` (never the head-to-head's data sets),
    each on a random grid (64² … 512²) at random (n, ε): n log-uniform in [10^3, 2·10^6], ε
    log-uniform in [0.01, 1].  For every release: the features are bought exactly as ``auto``
    buys them (``feature_share`` of ε, :func:`dpcore.points.mechanisms.features.private_features`),
    then EVERY candidate configuration of :data:`dpcore.points.recommend_features.CONFIGS` releases
    with the rest of ε (and the noisy count as ``public_n`` where the mechanism takes one), and
    its MRE (%, sanity bound 20) on random rectangles of 0.1 %, 1 %, 10 % of the area is recorded.
``--write``
    Derive the table and write it into ``dpcore/points/recommend_features.py``: the shape
    feature and its two cut points are the ones (of concentration, sparsity, top entropy; cuts
    at training quantiles) whose table has the smallest mean log regret in leave-one-family-out
    cross-validation; then each cell (scale class, shape class, size class) names the
    configuration of smallest mean log regret over its training releases (fewer than
    ``MIN_CELL`` releases: the scale class's pooled choice).
``--report``
    Held-out validation from the head-to-head's CSV (``benchmarks/spatial.py``, which runs
    ``auto`` with its default feature share): ``auto``'s mean MRE over the best other
    mechanism's in every setting, and its worst of 16 releases over its median at ε = 1 on the
    clustered data -> ``benchmarks/results/auto_features.md``.

    nice -n 10 /work/main/.venv/bin/python benchmarks/derive_auto_features.py --train --instances 84
    /work/main/.venv/bin/python benchmarks/derive_auto_features.py --write
    /work/main/.venv/bin/python benchmarks/derive_auto_features.py --report benchmarks/results/spatial_256_quick.csv
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import auto_generators as gens  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpcore import catalog  # noqa: E402
from dpcore.core import metrics  # noqa: E402
from dpcore.data import queries  # noqa: E402
from dpcore.data.domain import Bounds, Grid, aggregate_points  # noqa: E402
from dpcore.errors import ParameterError  # noqa: E402
from dpcore.points import recommend_features as rf  # noqa: E402
from dpcore.points.mechanisms.features import private_features  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TRAIN_CSV = RESULTS / "auto_features_train.csv"
MODULE = ROOT / "dpcore" / "points" / "recommend_features.py"
SIZES = (0.001, 0.01, 0.1)
SIZE_CLASS = {0.001: "0.1%", 0.01: "1%", 0.1: "10%"}
SMOOTHING = 20.0
GRIDS = (64, 128, 256, 512)
FEATURE_SHARE = 0.05
FEATURES = ("concentration", "sparsity", "top_entropy")
MIN_CELL = 30
UNIT = Bounds(0.0, 0.0, 1.0, 1.0)


def _hash(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "little")


def _release(config: str, agg, eps: float, n_hat: float, noise: NoiseSource):
    mech_name, extra = rf.CONFIGS[config]
    mech = catalog.get("points", mech_name)
    params = dict(extra)
    if any(p.name == "public_n" for p in mech.params):
        params["public_n"] = max(int(round(n_hat)), 1)
    return mech.release(mech.plan(agg.grid, eps, params, unit=points_unit(None)), agg, noise).inner


def train_setting(inst: int, setting: int, releases: int, n_queries: int) -> list[dict]:
    """Rows of one (instance, n, ε, grid): features and every configuration's MRE per release."""
    family = gens.FAMILIES[inst % len(gens.FAMILIES)] if inst < 1000 else gens.LATER[inst % len(gens.LATER)]
    rng = np.random.default_rng(_hash("setting", inst, setting))
    side = int(rng.choice(GRIDS))
    n = int(np.exp(rng.uniform(np.log(1e3), np.log(2e6))))
    eps = float(np.exp(rng.uniform(np.log(0.01), np.log(1.0))))
    grid = Grid(UNIT, side, side)
    x, y = gens.points(family, n, _hash("data", inst))
    agg = aggregate_points(x, y, grid)
    rows = []
    for r in range(releases):
        qs, tags = queries.random_rectangles(grid, SIZES, n_queries, shape="random", seed=_hash("w", inst, setting, r))
        true = queries.true_answers(agg.counts, qs)
        f = private_features(agg, FEATURE_SHARE * eps, NoiseSource(_hash("f", inst, setting, r)))
        base = {"instance": inst, "family": family, "grid": side, "n": n, "epsilon": eps, "release": r,
                **{k: getattr(f, k) for k in ("noisy_total", *FEATURES)}}
        for config in rf.CONFIGS:
            try:
                rel = _release(config, agg, (1 - FEATURE_SHARE) * eps, f.noisy_total,
                               NoiseSource(_hash("n", inst, setting, r, config)))
            except ParameterError:
                continue
            est = rel.answer(qs)
            row = {**base, "config": config}
            for s in SIZES:
                m = tags == s
                row[f"mre_{SIZE_CLASS[s]}"] = metrics.mre(true[m], est[m], SMOOTHING)
            row["mre_mixed"] = float(np.mean([row[f"mre_{SIZE_CLASS[s]}"] for s in SIZES]))
            rows.append(row)
    return rows


def train(instances: int, settings: int, releases: int, n_queries: int, first: int = 0) -> None:
    done = set()
    if TRAIN_CSV.exists():
        d = pd.read_csv(TRAIN_CSV, usecols=["instance", "n", "epsilon"])
        done = set(d["instance"].astype(int))
    t0 = time.perf_counter()
    for inst in range(first, first + instances):
        if inst in done:
            continue
        rows = [row for s in range(settings) for row in train_setting(inst, s, releases, n_queries)]
        pd.DataFrame(rows).to_csv(TRAIN_CSV, mode="a", header=not TRAIN_CSV.exists(), index=False,
                                  float_format="%.6g")
        print(f"[{time.perf_counter() - t0:6.0f} s] instance {inst} ({rows[0]['family'] if rows else '-'}): "
              f"{len(rows)} rows", flush=True)


# ------------------------------------------------------------------------------------ derivation


def long_regrets(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (release, size class, config) with its log regret against the best config."""
    keys = ["instance", "grid", "n", "epsilon", "release"]
    parts = []
    for sc in ("0.1%", "1%", "10%", "mixed"):
        d = df[[*keys, "family", "noisy_total", *FEATURES, "config", f"mre_{sc}"]].rename(
            columns={f"mre_{sc}": "mre"})
        d = d.assign(size_class=sc)
        parts.append(d)
    out = pd.concat(parts, ignore_index=True)
    best = out.groupby([*keys, "size_class"])["mre"].transform("min")
    out["logr"] = np.log(np.maximum(out["mre"], 1e-9) / np.maximum(best, 1e-9))
    out["scale"] = [rf.scale_class(t, e) for t, e in zip(out["noisy_total"], out["epsilon"], strict=True)]
    return out


def _shape(values: pd.Series, edges: tuple[float, float]) -> np.ndarray:
    return np.where(values < edges[0], rf.SHAPE_LABELS[0], np.where(values < edges[1], rf.SHAPE_LABELS[1],
                                                                    rf.SHAPE_LABELS[2]))


def fit(lr: pd.DataFrame, feature: str, edges: tuple[float, float]) -> dict:
    """The table: (scale, shape, size class) -> (config, releases, geo-mean regret, share within 10 %)."""
    lr = lr.assign(shape=_shape(lr[feature], edges))
    cell = lr.groupby(["scale", "shape", "size_class", "config"])["logr"].agg(["mean", "count"]).reset_index()
    pooled = lr.groupby(["scale", "size_class", "config"])["logr"].mean().reset_index()
    table = {}
    for sc_ in rf.SCALE_LABELS:
        for sh in rf.SHAPE_LABELS:
            for sz in ("0.1%", "1%", "10%", "mixed"):
                c = cell[(cell["scale"] == sc_) & (cell["shape"] == sh) & (cell["size_class"] == sz)]
                here = (lr["scale"] == sc_) & (lr["shape"] == sh) & (lr["size_class"] == sz)
                if len(c) and c["count"].max() >= MIN_CELL:
                    choice = c.sort_values("mean")["config"].iloc[0]
                else:  # too few releases: the scale class's pooled choice, and its pooled numbers
                    here = (lr["scale"] == sc_) & (lr["size_class"] == sz)
                    p = pooled[(pooled["scale"] == sc_) & (pooled["size_class"] == sz)]
                    if p.empty:  # a scale class without training: the nearest one with some
                        near = min(set(pooled["scale"]), key=lambda s, sc_=sc_: abs(np.log10(s / sc_)))
                        p = pooled[(pooled["scale"] == near) & (pooled["size_class"] == sz)]
                    choice = p.sort_values("logr")["config"].iloc[0]
                mine = lr[here & (lr["config"] == choice)]
                table[(int(sc_), sh, sz)] = (str(choice), int(len(mine)),
                                             round(float(np.exp(mine["logr"].mean())) if len(mine) else 1.0, 3),
                                             round(float((mine["logr"] <= np.log(1.1)).mean()) if len(mine) else 0.0, 3))
    return table


def score(lr: pd.DataFrame, table: dict, feature: str, edges: tuple[float, float]) -> pd.Series:
    """Log regret of the table's choice on every (release, size class) of ``lr``."""
    lr = lr.assign(shape=_shape(lr[feature], edges))
    pick = [table[(int(a), b, c)][0] for a, b, c in zip(lr["scale"], lr["shape"], lr["size_class"], strict=True)]
    return lr[lr["config"].to_numpy() == np.array(pick)]["logr"]


def select(lr: pd.DataFrame) -> tuple[str, tuple[float, float], dict, pd.DataFrame]:
    """Feature and cuts by leave-one-family-out cross-validation, then the table on all training."""
    results = []
    for feature in FEATURES:
        vals = lr.drop_duplicates(["instance", "grid", "n", "epsilon", "release"])[feature]
        for q in ((0.33, 0.67), (0.25, 0.75), (0.5, 0.9), (0.1, 0.5)):
            edges = (round(float(vals.quantile(q[0])), 3), round(float(vals.quantile(q[1])), 3))
            cv = []
            for fam in sorted(set(lr["family"])):
                tr, te = lr[lr["family"] != fam], lr[lr["family"] == fam]
                cv.append(score(te, fit(tr, feature, edges), feature, edges))
            s = pd.concat(cv)
            results.append({"feature": feature, "edges": edges, "cv_mean_log_regret": float(s.mean()),
                            "cv_within_10": float((s <= np.log(1.1)).mean())})
    res = pd.DataFrame(results).sort_values("cv_mean_log_regret")
    best = res.iloc[0]
    edges = tuple(best["edges"])
    return str(best["feature"]), edges, fit(lr, str(best["feature"]), edges), res


def write_table(feature: str, edges: tuple[float, float], table: dict) -> None:
    lines = [f"FEATURE = {feature!r}", f"SHAPE_EDGES: tuple[float, float] = {edges!r}",
             "TABLE: dict[tuple[int, str, str], tuple[str, int, float, float]] = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in table.items()]
    lines.append("}")
    text = MODULE.read_text()
    new, count = re.subn(r"# <table>\n.*?# </table>", "# <table>\n" + "\n".join(lines) + "\n# </table>", text,
                         flags=re.S)
    if count != 1:
        raise SystemExit("table markers not found in recommend_features.py")
    MODULE.write_text(new)


# ------------------------------------------------------------------------------------ validation


def heldout(csv: Path) -> pd.DataFrame:
    """auto against the best other mechanism per head-to-head setting (pooled query sizes)."""
    df = pd.read_csv(csv)
    ok = df[df["status"] == "ok"].copy()
    ok["n_nom"] = (10 ** np.round(np.log10(ok["n"]))).astype(int)
    keys = ["dataset", "n_nom", "grid_rows", "epsilon"]
    per = ok.groupby([*keys, "mechanism", "release"])["mre_percent"].mean().reset_index()
    st = per.groupby([*keys, "mechanism"])["mre_percent"].agg(["mean", "median", "max", "count"]).reset_index()
    out = []
    for k, g in st.groupby(keys):
        fixed = {m: float(g.loc[g["mechanism"] == m, "mean"].iloc[0]) for m in ("privtree", "ag")
                 if (g["mechanism"] == m).any()}
        a = g[g["mechanism"] == "auto"]
        others = g[~g["mechanism"].isin(("auto", "matrix"))]
        if a.empty or others.empty:
            continue
        b = others.loc[others["mean"].idxmin()]
        a = a.iloc[0]
        out.append({**dict(zip(keys, k, strict=True)), "compared": ", ".join(sorted(others["mechanism"])),
                    "auto_mean": a["mean"], "best": b["mechanism"],
                    "best_mean": b["mean"], "ratio": a["mean"] / b["mean"], "releases": int(a["count"]),
                    **{f"{m}_ratio": v / b["mean"] for m, v in fixed.items()},
                    "worst_over_median": a["max"] / a["median"]})
    return pd.DataFrame(out)


def report(lr: pd.DataFrame, cv: pd.DataFrame, ho: list[tuple[str, pd.DataFrame]]) -> str:
    load = os.getloadavg()
    out = ["# `auto` from private features (Pythia-style), learned and validated", "",
           "Made by `benchmarks/derive_auto_features.py --report`. Rule: `dpcore/points/recommend_features.py` "
           f"(feature `{rf.FEATURE}`, cuts {rf.SHAPE_EDGES}); features cost {FEATURE_SHARE:.0%} of ε; training "
           "on `benchmarks/auto_generators.py` only. "
           f"Machine load when written: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min, 2 cores shared).", ""]
    out += ["Two rounds. Round 1 trained on seven families (instances 0–106); its held-out results are kept in "
            "`auto_features_round1.md`. They showed `auto` missing on the `uniform` data set, which no training "
            "family resembled, so round 2 added the `smooth` family (near-uniform data; instances 1000–1014) and "
            "re-derived the table with no other change. Round 2's numbers on the `uniform` data set are therefore "
            "not a blind test; nothing else was tuned on the reported data sets (the rule's cells are chosen on "
            "training releases only).", ""]
    rel = lr.drop_duplicates(["instance", "grid", "n", "epsilon", "release"])
    out += [f"## Training ({lr['instance'].nunique()} instances of {lr['family'].nunique()} families, "
            f"{len(rel)} releases with features, {lr['config'].nunique()} configurations)", "",
            "Feature and cuts chosen by leave-one-family-out cross-validation (mean log regret of the "
            "table's choice on the left-out family, every size class):", "",
            "| feature | cuts | CV geo-mean regret | CV within 10 % |", "|---|---|---:|---:|"]
    for r in cv.itertuples():
        out.append(f"| {r.feature} | {r.edges} | {np.exp(r.cv_mean_log_regret):.3f}x | {r.cv_within_10:.0%} |")
    out.append("")
    for name, h in ho:
        if h.empty:
            continue
        r = h["ratio"]
        clus = h[(h["epsilon"] == 1.0) & (h["dataset"] != "uniform")]
        w = clus["worst_over_median"]
        ok1 = (r <= 1.1).mean() >= 0.9
        ok2 = bool((clus["ratio"] <= 1.1).all())
        ok3 = bool(len(w) and (w <= 3).all())
        out += [f"## Held out: `{name}`", "",
                f"- Best among: {', '.join(sorted(set(', '.join(h['compared']).split(', '))))} (seeded releases; "
                "`auto` with its defaults, 5 % of ε on features).",
                f"- `auto` within 10 % of the best mechanism's mean MRE: {int((r <= 1.1).sum())} of {len(r)} settings "
                f"({(r <= 1.1).mean():.0%}; target ≥ 90 %: **{'met' if ok1 else 'NOT met'}**); median {r.median():.2f}x, "
                f"worst {r.max():.2f}x.",
                *[f"- For comparison, always `{m}` (at its defaults, no feature share): within 10 % in "
                  f"{int((h[f'{m}_ratio'] <= 1.1).sum())} of {len(h)}, worst {h[f'{m}_ratio'].max():.2f}x."
                  for m in ("privtree", "ag") if f"{m}_ratio" in h],
                f"- Every setting at ε = 1 on clustered data within 10 %: **{'met' if ok2 else 'NOT met'}** "
                f"({int((clus['ratio'] <= 1.1).sum())} of {len(clus)}).",
                f"- Worst of 16 releases within 3x the median (ε = 1, clustered): **{'met' if ok3 else 'NOT met'}**"
                + (f" (largest {w.max():.2f}x)." if len(w) else "."), "",
                "| data set | n | grid | ε | auto mean | best | best mean | ratio | worst/median |",
                "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
        for x in h.sort_values(["dataset", "epsilon", "n_nom"]).itertuples():
            out.append(f"| {x.dataset} | 10^{np.log10(x.n_nom):.0f} | {x.grid_rows} | {x.epsilon:g} | "
                       f"{x.auto_mean:.3g} | {x.best} | {x.best_mean:.3g} | {x.ratio:.2f}x | {x.worst_over_median:.2f}x |")
        out.append("")
    out += ["## The table (scale n·ε/k, shape class, query sizes → configuration; training releases, "
            "geo-mean regret, share within 10 %)", "",
            "| n·ε | shape | sizes | configuration | releases | regret | within 10 % |",
            "|---:|---|---|---|---:|---:|---:|"]
    for (s, sh, sz), (c, n, g, w) in rf.TABLE.items():
        out.append(f"| 10^{np.log10(s):.0f} | {sh} | {sz} | {c} | {n} | {g:.3f}x | {w:.0%} |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--instances", type=int, default=84)
    ap.add_argument("--first", type=int, default=0, help="first instance id (1000 on: the later families)")
    ap.add_argument("--settings", type=int, default=4, help="(n, ε, grid) draws per instance")
    ap.add_argument("--releases", type=int, default=3)
    ap.add_argument("--queries", type=int, default=300, help="queries per size and release")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--report", nargs="*", default=None, help="head-to-head CSVs (held out) to validate on")
    a = ap.parse_args(argv)
    if a.train:
        train(a.instances, a.settings, a.releases, a.queries, a.first)
    if a.write or a.report is not None:
        lr = long_regrets(pd.read_csv(TRAIN_CSV))
        feature, edges, table, cv = select(lr)
        print(cv.to_string())
        if a.write:
            write_table(feature, edges, table)
            print(f"wrote feature {feature} cuts {edges} and {len(table)} cells into {MODULE.relative_to(ROOT)}")
        if a.report is not None:
            ho = [(Path(c).name, heldout(Path(c))) for c in a.report]
            text = report(lr, cv, ho)
            print(text)
            (RESULTS / "auto_features.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
