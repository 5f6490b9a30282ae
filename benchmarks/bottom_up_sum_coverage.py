"""Exact coverage of bottom_up's coarse-area interval ``noisy ± 1.96·sd`` (sum of m whole-number noise draws).

bottom_up (dpcore/areas/mechanisms/bottom_up.py) puts the whole budget on the finest level (one discrete
Laplace draw of scale t under pure ε, one discrete Gaussian draw of σ under ρ-zCDP, per finest area) and
releases every coarser area as the sum of its m finest areas' noisy counts, so that area's error is S_m, the
sum of m iid draws (m public: the number of finest descendants), and noise_sd = √m·sd₁ (the exact variance of
one draw, dpcore.privacy.noise).  S_m is integer-valued, so ``noisy ± h`` covers exactly |S_m| ≤ ⌊h⌋.  Its
distribution is computed exactly on the integers here (FFT of the pmf to the m-th power, grid ±(40·sd + 40·t
+ 50)) for ε ∈ {0.1, 0.5, 1, 2, 5} (t = 1/ε, and t = 2/ε under replace-one) and ρ ∈ {0.05, 0.25, 1, 4}
(σ = 1/√(2ρ), and 2/√(2ρ) under replace-one), m = 2..64, 100, 128, 256, 500, 1000.  For each case it prints
the coverage of ± 1.96·sd, and k_m, the smallest whole number with P(|S_m| ≤ k_m) ≥ 0.95, with the
coverage of k_m and of k_m − 1.

Result: ± 1.96·sd is under 0.95 in 746 of 1,224 cases (pure ε = 5, m = 19: 0.786; ρ = 4, m = 7: 0.788; ε = 1,
m = 2: 0.927).  Outcome (h-busum, 2026-11-30): bottom_up's coarse areas publish ± k_m
(:func:`dpcore.privacy.calibration.discrete_sum_half_width`); checked here against this script's FFT in every case.

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/bottom_up_sum_coverage.py   # a few seconds
"""
import math

import numpy as np

from dpcore.privacy.calibration import (
    discrete_sum_half_width,
    gaussian_sigma_for_rho,
    interval_half_width,
    laplace_scale_for_epsilon,
)
from dpcore.privacy.noise import (
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace_pmf,
    discrete_laplace_variance,
)

MS = list(range(2, 65)) + [100, 128, 256, 500, 1000]


def sum_dist(pmf1, var1: float, m: int, t: float):
    """The exact distribution of the sum of m iid draws of the symmetric pmf ``pmf1`` (integers k, circular)."""
    half = 40 * math.sqrt(m * var1) + 40 * t + 50
    n = 1 << int(math.ceil(math.log2(2 * half + 1)))
    k = np.arange(n)
    k = np.where(k < n // 2, k, k - n)
    dist = np.fft.irfft(np.fft.rfft(pmf1(k)) ** m, n)
    return k, dist


rows = []
cases = ([("pure", e, s, laplace_scale_for_epsilon(e, s)) for e in (0.1, 0.5, 1, 2, 5) for s in (1, 2)]
         + [("zcdp", r, s, gaussian_sigma_for_rho(r, s)) for r in (0.05, 0.25, 1, 4) for s in (1, 2)])
for definition, budget, sens, scale in cases:
    if definition == "pure":
        var1 = float(discrete_laplace_variance(scale))
        pmf1 = lambda k, sc=scale: discrete_laplace_pmf(k, sc)  # noqa: E731
    else:
        var1 = float(discrete_gaussian_variance(scale))
        pmf1 = lambda k, sc=scale: discrete_gaussian_pmf(k, sc)  # noqa: E731
    for m in MS:
        k, dist = sum_dist(pmf1, var1, m, float(scale))
        sd = math.sqrt(m * var1)
        h = float(interval_half_width("normal", sd))
        cov = float(dist[np.abs(k) <= math.floor(h)].sum())
        cover = np.array([dist[np.abs(k) <= j].sum() for j in range(0, int(6 * sd + 10))])
        km = int(np.flatnonzero(cover >= 0.95)[0])
        family = "discrete_laplace" if definition == "pure" else "discrete_gaussian"
        assert discrete_sum_half_width(family, scale, m) == km, (definition, budget, sens, m)  # the library's rule
        rows.append((definition, budget, sens, float(scale), m, sd, h, cov, km, float(cover[km]),
                     float(cover[km - 1]) if km > 0 else 0.0))

out = ["# bottom_up coarse areas: exact coverage of ± 1.96·sd for a sum of m noise draws", "",
       "Produced by benchmarks/bottom_up_sum_coverage.py (exact: FFT of the pmf to the m-th power).", "",
       "| definition | budget | sensitivity | scale | m range | min cov(±1.96 sd) at m | cases < 0.95 | "
       "k_m cov min | k_m−1 cov max |", "|---|---|---|---|---|---|---|---|---|"]
under = 0
for definition, budget, sens, scale in cases:
    sel = [r for r in rows if r[:3] == (definition, budget, sens)]
    worst = min(sel, key=lambda r: r[7])
    n_under = sum(r[7] < 0.95 - 1e-6 for r in sel)
    under += n_under
    out.append(f"| {definition} | {budget} | {sens} | {float(scale):.4f} | 2..1000 | {worst[7]:.4f} (m = {worst[4]}) | "
               f"{n_under}/{len(sel)} | {min(r[9] for r in sel):.7f} | {max(r[10] for r in sel):.7f} |")
out += ["", f"Cases under 0.95 − 1e-6 with ± 1.96·sd: {under} of {len(rows)}.",
        f"k_m covers ≥ 0.95 in {sum(r[9] >= 0.95 for r in rows)} of {len(rows)}; "
        f"k_m − 1 covers < 0.95 in {sum(r[10] < 0.95 for r in rows)} of {len(rows)}; the library's "
        "discrete_sum_half_width equals k_m in every case (asserted).", "",
        "Every case (definition, budget, sensitivity, m, sd, 1.96·sd, coverage of ± 1.96·sd, k_m, cov(k_m), "
        "cov(k_m − 1)):", "", "```"]
out += [f"{r[0]} {r[1]} {r[2]} m={r[4]} sd={r[5]:.4f} 1.96sd={r[6]:.4f} cov={r[7]:.6f} k_m={r[8]} "
        f"cov_k={r[9]:.6f} cov_k-1={r[10]:.6f}" for r in rows]
out += ["```", ""]
text = "\n".join(out)
print("\n".join(out[:30]))
with open("benchmarks/results/bottom_up_sum_coverage.md", "w", encoding="utf-8") as f:
    f.write(text)
