"""Speed of the Privelet location release (2-D Haar on the whole grid).

Times ``Privelet().release`` (transform, exact discrete Laplace noise on
power-of-two grids from the secure source os.urandom, inverse, one rectangle per
cell) on 256², 512², 1024² grids and a non-power-of-two 1000 x 700 grid (padded
to 1024 x 1024 coefficients).  Counts: Poisson(3) per cell, seed 0.  Best of 3.
Target: 1024 x 1024 under 1 s.

Run from the repository root::

    .venv/bin/python benchmarks/privelet_speed.py

It prints a markdown table and writes it to benchmarks/results/privelet_speed.md.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dpcore.data.domain import Aggregate, Bounds, Grid  # noqa: E402
from dpcore.estimate import privelet as pv  # noqa: E402
from dpcore.points.mechanisms.privelet import Privelet  # noqa: E402
from dpcore.points.unit import points_unit  # noqa: E402
from dpcore.privacy.noise import NoiseSource  # noqa: E402

SHAPES = [(256, 256), (512, 512), (1024, 1024), (1000, 700)]
EPSILON = 1.0
REPEATS = 3
TARGET_S = 1.0
RESULTS = ROOT / "benchmarks" / "results" / "privelet_speed.md"


def best_of(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    mech = Privelet()
    src = NoiseSource()  # secure: os.urandom
    rng = np.random.default_rng(0)  # synthetic counts only, not noise
    rows = []
    for r, c in SHAPES:
        grid = Grid(Bounds(-118.7, 33.7, -118.1, 34.3), r, c)
        counts = rng.poisson(3.0, size=(r, c)).astype(np.int64)
        agg = Aggregate(grid, counts, 0, 0, 1, None)
        axes = mech.axes(grid, {})
        mech.release(mech.plan(agg.grid, EPSILON, {}, unit=points_unit(agg.user_cap)), agg, src)  # warm up
        t_mech = best_of(lambda agg=agg: mech.release(mech.plan(agg.grid, EPSILON, {}, unit=points_unit(agg.user_cap)), agg, src).inner)
        t_core = best_of(lambda counts=counts, axes=axes: pv.release(counts, axes, EPSILON, src))
        t_tf = best_of(lambda counts=counts, axes=axes: pv.inverse(pv.forward(counts, axes), axes))
        coeffs = axes[0].n_coefficients * axes[1].n_coefficients
        rows.append((r, c, coeffs, t_tf, t_core, t_mech))
    cores = os.cpu_count()
    lines = [
        "# Privelet location release speed",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {cores} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        f"- ε = {EPSILON:g}, both axes Haar, secure noise source (os.urandom), counts Poisson(3) "
        f"per cell; times are best of {REPEATS}.",
        "- transform = forward + inverse only; core = `dpcore.estimate.privelet.release` (transform, "
        "exact discrete Laplace on power-of-two grids, inverse); mechanism = "
        "`Privelet().release` (plan, core, one rectangle per cell).",
        "- Command: `.venv/bin/python benchmarks/privelet_speed.py`",
        "",
        "| grid | coefficients | transform (s) | core release (s) | mechanism release (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r, c, n, t_tf, t_core, t_mech in rows:
        lines.append(f"| {r} x {c} | {n:,} | {t_tf:.3f} | {t_core:.3f} | {t_mech:.3f} |")
    t1024 = next(t for r, c, _, _, _, t in rows if (r, c) == (1024, 1024))
    lines += ["", f"Target: 1024 x 1024 under {TARGET_S:g} s: "
              f"{'met' if t1024 < TARGET_S else 'NOT met'} ({t1024:.3f} s)."]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
