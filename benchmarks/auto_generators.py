"""The TRAINING family of point generators for ``auto``'s feature rule (issue 27, item 1).

Never the data sets the head-to-head reports on (``benchmarks/spatial.py``: the Uber pickups, the
earthquakes, the HTF paper's Gaussian and the shapes of :func:`dpcore.data.synthetic.clustered_points`).
Every instance draws its own parameters from a seeded public generator, so one family covers many
shapes.  Points are in the unit square ``[0, 1)²``; the caller maps them to a grid.

Families (``FAMILIES``)
    ``clusters``  1 to 300 Gaussian clusters (σ 0.3 to 60 cells of 512, Zipf-like weights), 0–40 %
                  uniform background;
    ``roads``     2 to 12 straight corridors (width 0.5 to 4 cells of 512) and 0 to 20 towns;
    ``rings``     1 to 6 rings (radius 3 to 40 % of the side, width 0.5 to 10 cells);
    ``patches``   1 to 30 rectangles of uniform density (side 2 to 50 % of the square);
    ``heavy``     1 to 5 centres with heavy-tailed (Student t, 1 to 3 degrees of freedom) spread;
    ``mixture``   two or three of the above, with random weights;
    ``smooth``    near-uniform: uniform, a gentle linear gradient, or 1 to 3 very wide Gaussians
                  (σ 100 to 400 cells of 512) over a uniform floor (added in a second round);
    ``tracts``    US Census 2020 tract centroids (population-weighted) inside a random box around a
                  random populated place, jittered by 0.1 to 2 % of the box (real-shaped, not real).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

TRACTS = Path("/work/shared/data/census/us_tract_population_2020_cenpop.csv.gz")
FAMILIES = ("clusters", "roads", "rings", "patches", "heavy", "mixture", "tracts")
#: Added in a second round (instances 1000 on): near-uniform data, which the first seven lacked.
LATER = ("smooth",)
_CELL = 1 / 512


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _keep(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = (x >= 0) & (x < 1) & (y >= 0) & (y < 1)
    return x[ok], y[ok]


def fill(n: int, draw: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Exactly ``n`` points inside the square from ``draw(k)`` (redrawing those outside)."""
    xs, ys, need = [], [], n
    for _ in range(200):
        if need <= 0:
            break
        x, y = _keep(*draw(need + need // 2 + 16))
        xs.append(x[:need])
        ys.append(y[:need])
        need -= len(xs[-1])
    x, y = np.concatenate(xs or [np.empty(0)]), np.concatenate(ys or [np.empty(0)])
    if x.size < n:  # a shape mostly outside: top up uniformly
        extra = n - x.size
        x, y = np.concatenate([x, np.full(extra, 0.5)]), np.concatenate([y, np.full(extra, 0.5)])
    return x, y


def _weights(rng: np.random.Generator, k: int) -> np.ndarray:
    w = rng.pareto(_loguniform(rng, 0.7, 3.0), k) + 0.05
    return w / w.sum()


def split(rng: np.random.Generator, n: int, parts: list[tuple[float, Callable[[int], tuple]]]
           ) -> tuple[np.ndarray, np.ndarray]:
    w = np.array([p[0] for p in parts], float)
    sizes = rng.multinomial(n, w / w.sum())
    got = [fill(int(m), f) for (_, f), m in zip(parts, sizes, strict=True) if m > 0]
    return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])


def _uniform(rng: np.random.Generator) -> Callable[[int], tuple]:
    return lambda k: (rng.random(k), rng.random(k))


def _gauss(rng: np.random.Generator, cx: float, cy: float, s: float) -> Callable[[int], tuple]:
    return lambda k: (rng.normal(cx, s, k), rng.normal(cy, s, k))


def clusters(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    k = int(round(_loguniform(rng, 1, 300)))
    w = _weights(rng, k)
    parts = [(float(wi), _gauss(rng, rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95),
                                _loguniform(rng, 0.3, 60) * _CELL)) for wi in w]
    bg = rng.uniform(0, 0.4)
    return split(rng, n, [*((wi * (1 - bg), f) for wi, f in parts), (bg, _uniform(rng))])


def _line(rng: np.random.Generator) -> Callable[[int], tuple]:
    x0, y0, x1, y1 = rng.random(4)
    width = _loguniform(rng, 0.5, 4) * _CELL
    dx, dy = x1 - x0, y1 - y0
    norm = max(float(np.hypot(dx, dy)), 1e-6)

    def draw(k: int) -> tuple:
        t, j = rng.random(k), rng.normal(0, width, k)
        return x0 + t * dx - j * dy / norm, y0 + t * dy + j * dx / norm
    return draw


def roads(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    lines = [(float(w), _line(rng)) for w in _weights(rng, int(rng.integers(2, 13)))]
    towns_n = int(rng.integers(0, 21))
    towns = [(float(w), _gauss(rng, *rng.uniform(0.05, 0.95, 2), _loguniform(rng, 1, 15) * _CELL))
             for w in _weights(rng, max(towns_n, 1))][:towns_n]
    share_t, bg = rng.uniform(0, 0.5) if towns else 0.0, rng.uniform(0, 0.2)
    parts = [(w * (1 - share_t - bg), f) for w, f in lines] + [(w * share_t, f) for w, f in towns]
    return split(rng, n, [*parts, (bg, _uniform(rng))])


def rings(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    def ring() -> Callable[[int], tuple]:
        cx, cy = rng.uniform(0.2, 0.8, 2)
        r, wd = rng.uniform(0.03, 0.4), _loguniform(rng, 0.5, 10) * _CELL

        def draw(k: int) -> tuple:
            a, rr = rng.uniform(0, 2 * np.pi, k), r + rng.normal(0, wd, k)
            return cx + rr * np.cos(a), cy + rr * np.sin(a)
        return draw
    parts = [(float(w), ring()) for w in _weights(rng, int(rng.integers(1, 7)))]
    bg = rng.uniform(0, 0.2)
    return split(rng, n, [*((w * (1 - bg), f) for w, f in parts), (bg, _uniform(rng))])


def patches(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    def patch() -> Callable[[int], tuple]:
        w, h = _loguniform(rng, 0.02, 0.5), _loguniform(rng, 0.02, 0.5)
        x0, y0 = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
        return lambda k: (x0 + w * rng.random(k), y0 + h * rng.random(k))
    parts = [(float(w), patch()) for w in _weights(rng, int(rng.integers(1, 31)))]
    bg = rng.uniform(0, 0.3)
    return split(rng, n, [*((w * (1 - bg), f) for w, f in parts), (bg, _uniform(rng))])


def heavy(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    def centre() -> Callable[[int], tuple]:
        cx, cy = rng.uniform(0.1, 0.9, 2)
        s, df = _loguniform(rng, 0.5, 20) * _CELL, rng.uniform(1, 3)
        return lambda k: (cx + s * rng.standard_t(df, k), cy + s * rng.standard_t(df, k))
    return split(rng, n, [(float(w), centre()) for w in _weights(rng, int(rng.integers(1, 6)))])


_tract_cache: list[np.ndarray] = []


def tracts(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if not _tract_cache:
        t = pd.read_csv(TRACTS, usecols=["POPULATION", "LATITUDE", "LONGITUDE"])
        t = t[t["POPULATION"] > 0]
        _tract_cache.append(t[["LONGITUDE", "LATITUDE", "POPULATION"]].to_numpy(float))
    lon, lat, pop = _tract_cache[0].T
    p = pop / pop.sum()
    for _ in range(50):
        c = int(rng.choice(lon.size, p=p))
        half = _loguniform(rng, 0.3, 12.0)
        inside = (np.abs(lon - lon[c]) < half) & (np.abs(lat - lat[c]) < half)
        if inside.sum() >= 30:
            break
    x0, y0 = lon[c] - half, lat[c] - half
    idx = np.flatnonzero(inside)
    q = pop[idx] / pop[idx].sum()
    jitter = _loguniform(rng, 0.001, 0.02)

    def draw(k: int) -> tuple:
        pick = idx[rng.choice(idx.size, size=k, p=q)]
        return ((lon[pick] - x0) / (2 * half) + rng.normal(0, jitter, k),
                (lat[pick] - y0) / (2 * half) + rng.normal(0, jitter, k))
    return fill(n, draw)


def smooth(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    kind = int(rng.integers(0, 3))
    if kind == 0:
        return fill(n, _uniform(rng))
    if kind == 1:  # density 1 + a·(x - 1/2), a in [-1.5, 1.5]: by rejection
        a = rng.uniform(-1.5, 1.5)

        def draw(k: int) -> tuple:
            x, y, u = rng.random(k), rng.random(k), rng.random(k)
            keep = u * (1 + abs(a) / 2) < 1 + a * (x - 0.5)
            return x[keep], y[keep]
        return fill(n, draw)
    wide = [(float(w), _gauss(rng, *rng.uniform(0.2, 0.8, 2), _loguniform(rng, 100, 400) * _CELL))
            for w in _weights(rng, int(rng.integers(1, 4)))]
    floor = rng.uniform(0.3, 0.8)
    return split(rng, n, [*((w * (1 - floor), f) for w, f in wide), (floor, _uniform(rng))])


_SIMPLE = {"clusters": clusters, "roads": roads, "rings": rings, "patches": patches, "heavy": heavy}


def mixture(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    names = rng.choice(sorted(_SIMPLE), size=int(rng.integers(2, 4)), replace=False)
    w = rng.dirichlet(np.ones(len(names)))
    sizes = rng.multinomial(n, w)
    got = [_SIMPLE[str(nm)](rng, int(m)) for nm, m in zip(names, sizes, strict=True) if m > 0]
    return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])


GENERATORS: dict[str, Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]] = {
    **_SIMPLE, "mixture": mixture, "tracts": tracts, "smooth": smooth}


def points(family: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of one instance of ``family`` (its parameters drawn from ``seed``).

    >>> x, y = points("rings", 1000, 3)
    >>> x.size, bool(((x >= 0) & (x < 1) & (y >= 0) & (y < 1)).all())
    (1000, True)
    """
    rng = np.random.default_rng(seed)
    x, y = GENERATORS[family](rng, int(n))
    x, y = np.clip(x, 0, np.nextafter(1, 0)), np.clip(y, 0, np.nextafter(1, 0))
    return x[:n], y[:n]
