"""Synthetic inputs for demos and tests (never real people).

* :func:`gaussian_clusters`: the HTF paper's synthetic data (Shaham et al. 2021, Sec. 5.1):
  points around cluster centres with ``x, y ~ Normal(centre, σ)`` in grid-cell
  units of a 1024 grid, resampled until ``n`` points fall inside (no clamping).
* :func:`clustered_points`: named clustered shapes (a tight and a wide Gaussian over a uniform
  background, many small clusters, roads, uniform) for head-to-head benchmarks.
* :func:`demo_points`: the built-in demo, clusters over New York City.
* :func:`synthetic_census`: a small state -> county -> tract hierarchy of counts.

* :func:`public_generator`: the seeded, public generator for post-processing draws that protect
  nobody (data users' replicates, synthetic placement inside published cells).

Seeded numpy generators are fine here: this is made-up data or public post-processing, not a release.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpcore.data.domain import PRESETS, Bounds
from dpcore.privacy.noise import secret_key

DEMO_BOUNDS = PRESETS["New York City core (Manhattan, Brooklyn, Queens, Bronx)"]
DEMO_NAME = "Demo: synthetic pickups over New York City"
#: A public guess of the demo's size, used for error previews.
DEMO_N = 100_000


#: The type of :func:`public_generator`'s generator.
PublicGenerator = np.random.Generator


def public_generator(seed: int | None = None) -> tuple[PublicGenerator, int]:
    """A seeded, *public* generator for draws that are not privacy noise, and its seed.

    Post-processing of a published release may need randomness that protects nobody: the
    data-free replicate draws of :func:`dpcore.estimate.gls.replicates` and the placement of
    synthetic points inside their published cells (:mod:`dpcore.core.synthesize`).  Their seed
    is recorded and may be published (anyone can re-run them from public output), so a
    reproducible PRNG is right there and the CSPRNG of :class:`dpcore.privacy.noise.NoiseSource` is not needed.  They
    are drawn here, beside the made-up demo data, and nowhere else; a release's noise comes only from
    :mod:`dpcore.privacy.noise`.
    Never use it for a release's noise.  ``seed=None`` draws a fresh seed from the OS (:func:`dpcore.privacy.noise.secret_key`).

    >>> g, seed = public_generator(7)
    >>> seed, g.integers(0, 10, 3).tolist() == public_generator(7)[0].integers(0, 10, 3).tolist()
    (7, True)
    """
    if seed is None:
        seed = int.from_bytes(secret_key(8), "big") >> 1
    seed = int(seed)
    return np.random.default_rng(seed), seed


def gaussian_clusters(
    n: int,
    bounds: Bounds,
    *,
    sigma_cells: float | Sequence[float] = 50.0,
    centres: Sequence[tuple[float, float]] | None = None,
    weights: Sequence[float] | None = None,
    resolution: int = 1024,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters inside ``bounds``; returns ``(lon, lat)``.

    ``sigma_cells`` is in cells of a ``resolution`` x ``resolution`` grid (the HTF
    paper's σ = 20 / 50 / 100 for low / medium / high sparsity).  ``centres`` are
    fractions of the domain in [0, 1]²; by default one centre drawn uniformly.
    Points falling outside are redrawn, so exactly ``n`` lie inside.
    """
    rng = np.random.default_rng(seed)
    if n <= 0:
        return np.empty(0), np.empty(0)
    if centres is None:
        centres = [tuple(rng.uniform(0, 1, 2))]
    k = len(centres)
    sig = np.broadcast_to(np.asarray(sigma_cells, dtype=float), (k,))
    w = np.ones(k) / k if weights is None else np.asarray(weights, float) / np.sum(weights)
    cx = np.array([c[0] for c in centres]) * resolution
    cy = np.array([c[1] for c in centres]) * resolution
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    need = n
    while need > 0:
        m = int(need * 1.2) + 16
        which = rng.choice(k, size=m, p=w)
        x = rng.normal(cx[which], sig[which])
        y = rng.normal(cy[which], sig[which])
        ok = (x >= 0) & (x < resolution) & (y >= 0) & (y < resolution)
        xs.append(x[ok][:need])
        ys.append(y[ok][:need])
        need -= len(xs[-1])
    x = np.concatenate(xs) / resolution
    y = np.concatenate(ys) / resolution
    lon = bounds.west + x * (bounds.east - bounds.west)
    lat = bounds.south + y * (bounds.north - bounds.south)
    return lon, lat


#: Named shapes of :func:`clustered_points` (ours, not from a paper).  Each component is
#: ``(kind, weight, spec)``: ``("gauss", w, (cx, cy, σ))`` with the centre and σ in fractions of the
#: domain's side (σ = 8/512 is 8 cells of a 512 grid), ``("line", w, (x0, y0, x1, y1, σ))`` points
#: spread uniformly along a segment with Gaussian jitter σ across it, ``("uniform", w, ())``.
CLUSTER_SHAPES: dict[str, tuple[tuple[str, float, tuple[float, ...]], ...]] = {
    # issue 19's setting: a tight cluster (σ ≈ 8 cells of 512) and a wide one, 10 % background
    "tight_wide": (("gauss", 0.45, (0.30, 0.62, 8 / 512)),
                   ("gauss", 0.45, (0.66, 0.35, 48 / 512)),
                   ("uniform", 0.10, ())),
    # a city-like mix: twelve clusters of σ 2–16 cells of 512 with unequal weights, 19 % background
    "many_small": tuple(
        ("gauss", w, (cx, cy, s / 512)) for cx, cy, s, w in (
            (0.20, 0.25, 4, 0.12), (0.45, 0.70, 2, 0.10), (0.80, 0.80, 8, 0.09), (0.62, 0.18, 16, 0.08),
            (0.15, 0.80, 6, 0.07), (0.50, 0.45, 3, 0.07), (0.85, 0.40, 12, 0.06), (0.33, 0.52, 5, 0.06),
            (0.70, 0.60, 2, 0.05), (0.10, 0.50, 10, 0.04), (0.40, 0.10, 7, 0.04), (0.92, 0.12, 3, 0.03)))
    + (("uniform", 0.19, ()),),
    # roads: three straight corridors 2 cells of 512 wide and a hub, 10 % background
    "roads": (("line", 0.30, (0.05, 0.20, 0.95, 0.70, 2 / 512)),
              ("line", 0.25, (0.30, 0.95, 0.45, 0.05, 2 / 512)),
              ("line", 0.20, (0.05, 0.55, 0.95, 0.50, 1.5 / 512)),
              ("gauss", 0.15, (0.40, 0.40, 6 / 512)),
              ("uniform", 0.10, ())),
    # one tight cluster alone (σ = 4 cells of 512), 5 % background
    "single_tight": (("gauss", 0.95, (0.55, 0.45, 4 / 512)), ("uniform", 0.05, ())),
    "uniform": (("uniform", 1.0, ()),),
}


def clustered_points(n: int, bounds: Bounds, shape: str = "tight_wide", *,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` made-up points of a named clustered shape inside ``bounds``; returns ``(lon, lat)``.

    Shapes are listed in :data:`CLUSTER_SHAPES` (ours, for benchmarks such as DPBench's
    data-shape axis, Hay et al., SIGMOD 2016, Sec. 5): ``tight_wide`` (issue 19: a Gaussian of
    σ = 8 cells of a 512 grid holding 45 %, one of σ = 48 cells holding 45 %, 10 % uniform),
    ``many_small``, ``roads``, ``single_tight`` and ``uniform``.  Component sizes are
    multinomial; points falling outside the domain are redrawn, so exactly ``n`` lie inside.
    Same ``seed``, same points.

    >>> from dpcore.data.domain import Bounds
    >>> lon, lat = clustered_points(1000, Bounds(0.0, 0.0, 1.0, 1.0), "tight_wide", seed=1)
    >>> len(lon), bool((lon >= 0).all() and (lon < 1).all())
    (1000, True)
    """
    if shape not in CLUSTER_SHAPES:
        raise ValueError(f"Unknown shape {shape!r}; choose one of {', '.join(CLUSTER_SHAPES)}.")
    rng = np.random.default_rng(seed)
    comps = CLUSTER_SHAPES[shape]
    w = np.array([c[1] for c in comps], dtype=float)
    sizes = rng.multinomial(max(int(n), 0), w / w.sum())
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for (kind, _, spec), m in zip(comps, sizes, strict=True):
        need = int(m)
        while need > 0:
            k = need + need // 4 + 16
            if kind == "gauss":
                cx, cy, s = spec
                x, y = rng.normal(cx, s, k), rng.normal(cy, s, k)
            elif kind == "line":
                x0, y0, x1, y1, s = spec
                t = rng.uniform(0.0, 1.0, k)
                dx, dy = x1 - x0, y1 - y0
                norm = float(np.hypot(dx, dy))
                j = rng.normal(0.0, s, k)
                x = x0 + t * dx - j * dy / norm
                y = y0 + t * dy + j * dx / norm
            else:
                x, y = rng.uniform(0.0, 1.0, k), rng.uniform(0.0, 1.0, k)
            ok = (x >= 0) & (x < 1) & (y >= 0) & (y < 1)
            xs.append(x[ok][:need])
            ys.append(y[ok][:need])
            need -= len(xs[-1])
    x = np.concatenate(xs) if xs else np.empty(0)
    y = np.concatenate(ys) if ys else np.empty(0)
    lon = bounds.west + x * (bounds.east - bounds.west)
    lat = bounds.south + y * (bounds.north - bounds.south)
    return lon, lat


def demo_points(n: int = DEMO_N, seed: int = 2014) -> pd.DataFrame:
    """The built-in demo: made-up pickups over New York City (no real person).

    Dense clusters in Manhattan, looser ones in Brooklyn, Queens and at the
    airports, plus a sparse uniform background, so that the choice of grid
    matters as it does with real mobility data.
    """
    b = DEMO_BOUNDS
    # (lon, lat, sigma in cells of 1024, weight): made-up hot spots
    spots = [
        (-73.985, 40.755, 18, 0.30),  # Midtown
        (-74.005, 40.720, 22, 0.16),  # Lower Manhattan
        (-73.960, 40.790, 25, 0.10),  # Upper Manhattan
        (-73.950, 40.690, 45, 0.12),  # Brooklyn
        (-73.880, 40.740, 55, 0.09),  # Queens
        (-73.785, 40.645, 10, 0.06),  # JFK
        (-73.873, 40.774, 8, 0.05),  # LaGuardia
        (-73.900, 40.845, 40, 0.04),  # Bronx
    ]
    w_bg = 0.08
    n_bg = int(n * w_bg)
    n_cl = n - n_bg
    centres = [((lon - b.west) / (b.east - b.west), (lat - b.south) / (b.north - b.south)) for lon, lat, _, _ in spots]
    lon, lat = gaussian_clusters(
        n_cl, b, sigma_cells=[s for *_, s, _ in spots], centres=centres,
        weights=[w for *_, w in spots], seed=seed,
    )
    rng = np.random.default_rng(seed + 1)
    lon = np.concatenate([lon, rng.uniform(b.west, b.east, n_bg)])
    lat = np.concatenate([lat, rng.uniform(b.south, b.north, n_bg)])
    order = rng.permutation(n)
    return pd.DataFrame({"lat": np.round(lat[order], 5), "lon": np.round(lon[order], 5)})


AGE_BANDS = ("0-17", "18-34", "35-64", "65+")
_AGE_SHARES = (0.22, 0.23, 0.38, 0.17)


def synthetic_census(n_states: int = 3, counties_per_state: int = 4, tracts_per_county: int = 5,
                     seed: int = 0, age_bands: bool = False) -> pd.DataFrame:
    """A small made-up state -> county -> tract table with population counts.

    Codes follow FIPS shapes (2, 3 and 6 digits); county codes repeat across
    states, so an area is identified by its path, as in real census files.  With
    ``age_bands`` every tract's population is split (multinomially, shares varying by
    county) over the ordinal column ``age_band`` (:data:`AGE_BANDS`): one row per tract × band.
    The bands come from a second generator, so the tract totals are the same either way.
    """
    rng = np.random.default_rng(seed)
    age_rng = np.random.default_rng([seed, 1])
    rows = []
    for s in range(1, n_states + 1):
        for c in range(1, counties_per_state + 1):
            scale = rng.lognormal(7.5, 1.0)
            shares = age_rng.dirichlet(np.asarray(_AGE_SHARES) * 40.0)
            for t in range(1, tracts_per_county + 1):
                row = {"state": f"{s:02d}", "county": f"{2 * c - 1:03d}", "tract": f"{t * 100:06d}"}
                pop = int(rng.poisson(scale))
                if not age_bands:
                    rows.append({**row, "population": pop})
                    continue
                for band, k in zip(AGE_BANDS, age_rng.multinomial(pop, shares), strict=True):
                    rows.append({**row, "age_band": band, "population": int(k)})
    return pd.DataFrame(rows)


def synthetic_hierarchy(seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A made-up region → district → zone geography with populations and square boundaries.

    2 × 2 regions, each cut into 3 × 3 districts, each cut into 4 × 4 zones (4, 36 and 576
    areas) on a 4° square near 0° N 0° E, so maps draw offline.  About 5 % of the zones are
    empty (population 0), as real tract files have.  District and zone codes repeat within
    their parents (like county and tract codes).  Returns the table (which lists every zone,
    empty ones included) and ``{level: GeoDataFrame}`` boundaries whose ``code`` column holds
    the path code (``R1/D2``, ``R1/D2/Z07``).
    """
    import geopandas
    from shapely.geometry import box

    rng = np.random.default_rng(seed)
    rows = []
    geoms: dict[str, list[tuple[str, Any]]] = {"region": [], "district": [], "zone": []}
    for ri in range(4):
        r_x, r_y = (ri % 2) * 2.0, (ri // 2) * 2.0
        r_code = f"R{ri + 1}"
        geoms["region"].append((r_code, box(r_x, r_y, r_x + 2.0, r_y + 2.0)))
        for di in range(9):
            d_x, d_y = r_x + (di % 3) * 2.0 / 3, r_y + (di // 3) * 2.0 / 3
            d_code = f"D{di + 1}"
            geoms["district"].append((f"{r_code}/{d_code}", box(d_x, d_y, d_x + 2.0 / 3, d_y + 2.0 / 3)))
            scale = rng.lognormal(6.0, 1.0)
            for zi in range(16):
                z_x, z_y = d_x + (zi % 4) / 6, d_y + (zi // 4) / 6
                z_code = f"Z{zi + 1:02d}"
                geoms["zone"].append((f"{r_code}/{d_code}/{z_code}", box(z_x, z_y, z_x + 1 / 6, z_y + 1 / 6)))
                pop = 0 if rng.random() < 0.05 else int(rng.poisson(scale))
                rows.append({"region": r_code, "district": d_code, "zone": z_code, "population": pop})
    bounds = {
        lv: geopandas.GeoDataFrame({"code": [c for c, _ in items]}, geometry=[g for _, g in items], crs="EPSG:4326")
        for lv, items in geoms.items()
    }
    return pd.DataFrame(rows), bounds


def synthetic_od_tree(kind: str = "binary", sparsity: str = "complete", seed: int = 42,
                      *, levels: int | None = None, paper_flows: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The O/D paper's synthetic data sets (Boninsegna & Silvestri 2025, Sec. 5).

    ``kind="binary"``: every area split in 2 for ``levels`` (default 8) levels (256 leaves);
    ``kind="random"``: every area split into k ~ Uniform{2..10} for ``levels`` (default 4)
    levels.  Flows follow the paper's artefact: a Lomax ``pareto(a=3)`` draw per sampled pair,
    divided by the sample maximum, mapped to ``1 + x·999`` and floored (flows in [1, 1000]).
    ``sparsity`` picks the positive pairs: ``complete`` (all), ``dense`` (a uniform half) or
    ``sparse`` (1 %).  Returns the public area list (columns ``l1 … lg``, path codes, every leaf
    listed) and the flows (``origin``, ``destination`` as ``a/b/…`` path labels, ``count``).

    ``paper_flows=True`` draws the flows as the paper's artefact did (legacy global seeding
    ``np.random.seed(seed)``), which reproduces its Table 1 totals for the binary trees (1,051,271
    complete, 23,302 sparse); the tree shape and the sparse pairs still come from ``seed``.
    """
    if kind not in ("binary", "random"):
        raise ValueError("kind is 'binary' or 'random'")
    keep = {"complete": 1.0, "dense": 0.5, "sparse": 0.01}
    if sparsity not in keep:
        raise ValueError("sparsity is 'complete', 'dense' or 'sparse'")
    g = levels if levels is not None else (8 if kind == "binary" else 4)
    rng = np.random.default_rng(seed)
    paths: list[tuple[str, ...]] = [()]
    for _ in range(g):
        nxt = []
        for p in paths:
            k = 2 if kind == "binary" else int(rng.integers(2, 11))
            nxt.extend(p + (str(i),) for i in range(k))
        paths = nxt
    areas = pd.DataFrame(paths, columns=[f"l{i + 1}" for i in range(g)])
    labels = np.array(["/".join(p) for p in paths], dtype=object)
    n = len(paths)
    n_pairs = n * n
    m = n_pairs if sparsity == "complete" else int(keep[sparsity] * n_pairs)
    chosen = np.arange(n_pairs) if m == n_pairs else np.sort(rng.choice(n_pairs, size=m, replace=False))
    x = (np.random.RandomState(seed).pareto(3.0, size=chosen.size) if paper_flows
         else rng.pareto(3.0, size=chosen.size))
    flows = np.floor(1.0 + x / x.max() * 999.0).astype(np.int64)
    return areas, pd.DataFrame({"origin": labels[chosen // n], "destination": labels[chosen % n], "count": flows})


def demo_od(seed: int = 7, trips: int = 60_000) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """A made-up O/D demo on the :func:`synthetic_hierarchy` geography (region → district → zone).

    Trips between the 576 zones follow a gravity model (zone weight × exp(−distance / 0.4°)), so
    flows are dense between neighbouring zones and sparse far apart, as commuting is.  Returns
    ``(area list, trips aggregated as origin, destination, count, boundaries)``; codes are path
    labels (``R1/D2/Z07``).  No real person.
    """
    areas, bounds = synthetic_hierarchy(seed)
    rng = np.random.default_rng(seed)
    zones = bounds["zone"]
    cent = zones.geometry.representative_point()  # squares: the centre, no CRS warning
    cx, cy = cent.x.to_numpy(), cent.y.to_numpy()
    labels = zones["code"].to_numpy(dtype=object)
    w = rng.lognormal(0.0, 1.0, size=len(labels))
    dist = np.hypot(cx[:, None] - cx[None, :], cy[:, None] - cy[None, :])
    p = (w[:, None] * w[None, :]) * np.exp(-dist / 0.4)
    p = (p / p.sum()).ravel()
    cells = rng.multinomial(trips, p)
    nz = np.flatnonzero(cells)
    n = len(labels)
    flows = pd.DataFrame({"origin": labels[nz // n], "destination": labels[nz % n], "count": cells[nz]})
    return areas, flows, bounds
