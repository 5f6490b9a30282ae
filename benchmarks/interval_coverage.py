"""Coverage and bias of the GLS intervals for random unions of the 85,395 US tracts (issue 25).

Data and hierarchy as ``benchmarks/interval.py`` (nation → STATEFP → COUNTYFP → TRACTCE).
Design
    ``--unions`` random unions of tracts (sizes drawn log-uniformly from 1 to 5,000), fixed
    before any release (``numpy`` seed ``--seed``); ``--releases`` releases of each mechanism with
    ``NoiseSource(1000 + r)``, ρ = 0.5 zCDP, uniform split, charged nothing (a study).  The
    union variances qᵀCq are data-free (the plan fixes the design), so they are computed once per
    mechanism by the two-pass solve; each release only needs its GLS estimate (one solve).
Measured
    the share of (release, union) pairs whose 90 % interval covers the true union count; its
    standard error from the between-release spread of the per-release shares (unions within a
    release share the noise); the mean standardised error (est − truth)/sd and its SE likewise.
Criteria (issue 25): coverage 90 ± 2 %; mean error within 2 standard errors of 0.

Run from the repository root::

    .venv/bin/python benchmarks/interval_coverage.py     # writes results/interval_coverage.md
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dpcore import catalog  # noqa: E402
from dpcore.areas.counts import HierarchyCounts  # noqa: E402
from dpcore.areas.data_users import hierarchy_pack  # noqa: E402
from dpcore.data.hierarchy import Hierarchy  # noqa: E402
from dpcore.estimate.data_users import pack_files  # noqa: E402
from dpcore.estimate.gls import gls_estimate, union_variance  # noqa: E402
from dpcore.privacy import budget  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "census" / "us_tract_population_2020_cenpop.csv.gz"
LEVELS = ["STATEFP", "COUNTYFP", "TRACTCE"]


def study(mech: str, counts: HierarchyCounts, unions: list[np.ndarray], releases: int) -> dict[str, float]:
    truth_leaf = counts.levels()[-1].astype(float)
    W = np.zeros((len(unions), truth_leaf.size))
    for i, u in enumerate(unions):
        W[i, u] = 1.0
    truth = W @ truth_leaf
    z = norm.ppf(0.95)
    sd = None
    cover, zbar = [], []
    t0 = time.perf_counter()
    for r in range(releases):
        rel = catalog.get("hierarchy", mech).release_counts(counts, budget.zcdp(0.5), NoiseSource(1000 + r))
        _, m = pack_files(hierarchy_pack(rel))
        if sd is None:  # data-free: the same for every release of this plan
            sd = np.sqrt([union_variance(m, w) for w in W])
        est = W @ gls_estimate(m)
        err = (est - truth) / sd
        cover.append(float(np.mean(np.abs(err) <= z)))
        zbar.append(float(np.mean(err)))
    cover_a, zbar_a = np.array(cover), np.array(zbar)
    return {"coverage": float(cover_a.mean()), "coverage_se": float(cover_a.std(ddof=1) / math.sqrt(releases)),
            "zbar": float(zbar_a.mean()), "zbar_se": float(zbar_a.std(ddof=1) / math.sqrt(releases)),
            "seconds": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mechanisms", default="exact,topdown_l2,topdown_linf,hay,bottom_up")
    ap.add_argument("--releases", type=int, default=20)
    ap.add_argument("--unions", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "interval_coverage.md"))
    args = ap.parse_args(argv)
    df = pd.read_csv(DATA, dtype=str, encoding="utf-8-sig")
    df["POPULATION"] = df["POPULATION"].astype(int)
    h = Hierarchy.from_frame(df, LEVELS, source="table (confirmed public)")
    counts = HierarchyCounts.from_frame(df, h, LEVELS, "POPULATION")
    rng = np.random.default_rng(args.seed)
    sizes = np.exp(rng.uniform(0, math.log(5000), args.unions)).astype(int)
    unions = [rng.choice(h.n_leaves, k, replace=False) for k in sizes]
    lines = ["# Coverage of the 90 % GLS intervals on the 85,395 US tracts (benchmarks/interval_coverage.py)", "",
             f"{args.unions} random unions (1 to 5,000 tracts), {args.releases} releases per mechanism, ρ = 0.5 "
             "zCDP, uniform split; SEs from the between-release spread.", "",
             "| mechanism | coverage | SE | within 90 ± 2 % | mean (est − truth)/sd | SE | within 2 SE | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for mech in args.mechanisms.split(","):
        r = study(mech, counts, unions, args.releases)
        lines.append(f"| {mech} | {r['coverage']:.4f} | {r['coverage_se']:.4f} | "
                     f"{'yes' if abs(r['coverage'] - 0.9) <= 0.02 else 'NO'} | {r['zbar']:+.4f} | {r['zbar_se']:.4f} | "
                     f"{'yes' if abs(r['zbar']) <= 2 * r['zbar_se'] else 'NO'} | {r['seconds']:.0f} |")
        print(lines[-1], flush=True)
    Path(args.out).write_text("\n".join(lines) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
