"""Speed of dpcore's exact samplers against OpenDP's exact samplers.

Times ``NoiseSource().discrete_laplace`` and ``.discrete_gaussian`` (secure
source, os.urandom) against OpenDP's ``make_laplace`` / ``make_gaussian`` on
integer vectors (also exact, CSPRNG-driven) at scale 10 and sizes 1e4, 1e5,
1e6.  Ours: best of 3 runs; OpenDP: one run (about 10 s at 1e6), including the
Python-to-Rust conversion of the input list, which a caller pays too.

Run from the repository root::

    .venv/bin/python benchmarks/noise_speed.py

It prints a markdown table and writes it to benchmarks/results/noise_speed.md.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from dpcore.privacy.noise import NoiseSource  # noqa: E402

SIZES = [10_000, 100_000, 1_000_000]
SCALE = 10
REPEATS = 3
RESULTS = ROOT / "benchmarks" / "results" / "noise_speed.md"


def best_of(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def opendp_measurements():
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    lap = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=SCALE
    )
    gauss = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=float), scale=float(SCALE)
    )
    return version("opendp"), lap, gauss


def main() -> None:
    src = NoiseSource()  # secure: os.urandom
    src.discrete_laplace(SCALE, 1000)  # warm up
    src.discrete_gaussian(SCALE, 1000)
    odp = opendp_measurements()
    rows = []
    for n in SIZES:
        ours_lap = best_of(lambda n=n: src.discrete_laplace(SCALE, n))
        ours_gau = best_of(lambda n=n: src.discrete_gaussian(SCALE, n))
        if odp is not None:
            _, lap, gauss = odp
            data = [0] * n
            their_lap = once(lambda lap=lap, data=data: lap(data))
            their_gau = once(lambda gauss=gauss, data=data: gauss(data))
        else:
            their_lap = their_gau = float("nan")
        rows.append((n, ours_lap, their_lap, ours_gau, their_gau))
        print(f"n={n}: done", file=sys.stderr)

    version = odp[0] if odp is not None else "not installed"
    lines = [
        "# Exact noise samplers: dpcore vs OpenDP",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- Machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, OpenDP {version}",
        f"- Scale / sigma: {SCALE}; dpcore secure source (os.urandom), best of {REPEATS}; "
        "OpenDP one run, input passed as a Python list (conversion included).",
        "- Command: `.venv/bin/python benchmarks/noise_speed.py`",
        "",
        "| n | dpcore discrete Laplace (s) | OpenDP Laplace (s) | speed-up | "
        "dpcore discrete Gaussian (s) | OpenDP Gaussian (s) | speed-up |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, ol, tl, og, tg in rows:
        lines.append(
            f"| {n:,} | {ol:.4f} | {tl:.3f} | {tl / ol:.0f}x | {og:.4f} | {tg:.3f} | {tg / og:.0f}x |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
