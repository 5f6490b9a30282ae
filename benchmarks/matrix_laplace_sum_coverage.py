"""Exact coverage of noisy ± interval_half_width('laplace', se) for a sum of m iid discrete Laplace draws.

Review finding 4 (2026-11-30): would the Laplace quantile (sd·ln 20/√2, Privelet's rule) cover the matrix
mechanism's pure-ε census cells that are not one draw?  On every census table checked (synthetic, sparse:
every level, marginals '1' and '2') the pure-ε strategy is the identity, so such a cell is the sum of m iid
discrete Laplace draws (t = 1/ε, sensitivity 1).  Its distribution is computed exactly on the integers
(FFT of the pmf to the m-th power) for 128 values of ε in [0.02, 20] and m in 2..40, 48, 60, 64, 100,
128, 200, 500, 1000.

Result (6,016 cases): NOT ≥ 95 %.  The sum is integer-valued, so noisy ± h covers |S| ≤ ⌊h⌋, and for
ε ≳ 0.35 the floor falls below the 95 % point: 458 cases under 95 % (ε = 1: min 93.9 % at m = 3;
ε = 2: 92.2 %; ε ≈ 5.6, m = 29: 81.2 %); the normal ± 1.96·se is under 95 % in 3,774.  A Monte Carlo
check (10^6 draws) agrees: ε = 1, m = 3: 0.9387; ε = 2, m = 2: 0.9212.  So the matrix cells keep
± 1.96·se; an exact interval would be the quantile of the sum itself (``⌈·⌉`` of the lattice).

    PYTHONPATH=. nice -n 19 .venv/bin/python benchmarks/matrix_laplace_sum_coverage.py   # ~5 s
"""
import math

import numpy as np

from dpcore.privacy.calibration import interval_half_width, laplace_scale_for_epsilon
from dpcore.privacy.noise import discrete_laplace_variance

rows = []
eps_grid = np.unique(np.concatenate([np.geomspace(0.02, 20, 120), [0.1, 0.25, 0.5, 1, 2, 3, 5, 10]]))
ms = list(range(2, 41)) + [48, 60, 64, 100, 128, 200, 500, 1000]
for eps in eps_grid:
    t = laplace_scale_for_epsilon(float(eps), 1)
    p = math.exp(-1.0 / float(t))
    sd1 = math.sqrt(float(discrete_laplace_variance(t)))
    for m in ms:
        se = sd1 * math.sqrt(m)
        half = 40 * se + 40 * float(t) + 50
        N = 1 << int(math.ceil(math.log2(2 * half + 1)))
        k = np.arange(N)
        k = np.where(k < N // 2, k, k - N)  # the integers, circularly
        base = (1 - p) / (1 + p) * p ** np.abs(k).astype(float)
        dist = np.real(np.fft.ifft(np.fft.fft(base) ** m))
        h = float(interval_half_width("laplace", se))
        hn = float(interval_half_width("normal", se))
        cov = float(dist[np.abs(k) <= math.floor(h + 1e-12)].sum())
        covn = float(dist[np.abs(k) <= math.floor(hn + 1e-12)].sum())
        rows.append((float(eps), m, cov, covn))
r = np.array(rows)
i = r[:, 2].argmin()
print("cases", len(r), "min laplace coverage", r[i])
print("laplace < 0.95:", int((r[:, 2] < 0.95).sum()), "normal < 0.95:", int((r[:, 3] < 0.95).sum()), "of", len(r))
print(r[r[:, 2] < 0.95][:30])
for eps in (0.1, 0.5, 1, 2, 5, 10):
    sel = r[np.isclose(r[:, 0], eps)]
    print(eps, "laplace min/max", sel[:, 2].min().round(4), sel[:, 2].max().round(4), "normal min", sel[:, 3].min().round(4))
