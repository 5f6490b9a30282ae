"""Compare mechanisms on range-query workloads: an evaluation harness (curator-only).

Every registered mechanism is released at every ε, ``repeats`` times, and its
answers to random rectangular range queries are scored against the true
answers with the MRE of Shaham et al. 2021, Sec. 5.1::

    RE(q) = 100 · |c_q − ĉ_q| / max(c_q, s),   MRE = mean of RE(q) over the workload

(``s = 20`` by default, an absolute sanity bound).  The workloads follow the HTF
paper's protocol (Shaham et al. 2021, Sec. 5.1): 2 %, 6 % and 10 % of the domain, random
shape (aspect ratio log-uniform in [1/4, 4]) or squares.

NOT FOR PUBLICATION.  Everything this module returns is computed from the true
counts: the scores are curator-only diagnostics.  The releases made here are
NOT charged to a ledger and never leave this module; they exist only to be
scored.  Choosing a mechanism by its score on real data is itself a use of the
data that is not differentially private; prefer a public or synthetic stand-in
(:func:`synthetic_aggregate`) or count the choice as a privacy cost.

Randomness
    * The query workload is public and data-free: drawn once per repeat (and
      shape) from ``seed`` with numpy's PRNG (see :mod:`dpcore.data.queries`), and the
      same workload is answered by every mechanism and every ε of that repeat.
    * Release noise comes from :mod:`dpcore.privacy.noise` only: a fresh secure source
      per release by default, or ``NoiseSource(noise_seed + i)`` for the i-th
      release (i counts releases in the order repeat → mechanism → ε) when a
      reproducible benchmark asks for it.  The seed of each row is recorded.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpcore.core import metrics
from dpcore.core.registry import lookup
from dpcore.data import queries
from dpcore.data.domain import Aggregate, Grid, aggregate_points
from dpcore.data.synthetic import gaussian_clusters
from dpcore.errors import DPCoreError, ParameterError
from dpcore.points.kind import MECHANISMS
from dpcore.points.mechanisms.base import PointsMechanism, check_epsilon
from dpcore.points.unit import points_unit
from dpcore.privacy.noise import NoiseSource, secure_source

__all__ = [
    "LONG_COLUMNS",
    "SUMMARY_COLUMNS",
    "SYNTHETIC_SEED",
    "Settings",
    "check_settings",
    "SyntheticSpec",
    "evaluate",
    "format_mre",
    "parse_synthetic",
    "plot_summary",
    "refusals",
    "summarize",
    "summary_figure",
    "summary_markdown",
    "summary_table",
    "synthetic_aggregate",
    "workload_seed",
]

#: Columns of the long table: one row per (repeat, mechanism, ε, shape, query size).
LONG_COLUMNS = [
    "mechanism", "epsilon", "shape", "query_size", "repeat", "n_queries", "mre_percent", "mae",
    "rmse", "max_abs_error", "release_seconds", "n_leaves", "workload_seed", "noise_seed", "choice",
]
#: Columns of the summary: one row per (mechanism, ε, shape, query size), over the repeats.
SUMMARY_COLUMNS = [
    "mechanism", "epsilon", "shape", "query_size", "repeats", "n_queries", "mre_percent",
    "mre_se", "mae", "rmse", "release_seconds", "n_leaves", "choice",
]
#: Fixed seed of the synthetic stand-in (Shaham et al. 2021, Sec. 5.1: "fixed seeds").
SYNTHETIC_SEED = 0
#: σ of the synthetic generator is in cells of a 1024 x 1024 grid over the bounds (the paper's unit).
SYNTHETIC_RESOLUTION = 1024

#: ``progress(done, total, what)``: ``done`` of ``total`` releases finished, ``what`` runs next.
Progress = Callable[[int, int, str], None]


# ---------------------------------------------------------------- synthetic stand-in


@dataclass(frozen=True)
class SyntheticSpec:
    """The HTF paper's Gaussian data (Shaham et al. 2021, Sec. 5.1): one centre, ``x, y ~ Normal(centre, σ)``."""

    sigma: float
    n: int
    seed: int = SYNTHETIC_SEED

    @property
    def label(self) -> str:
        return f"synthetic Gaussian σ = {self.sigma:g}, n = {self.n:,} (our generator, seed {self.seed})"


def parse_synthetic(text: str) -> SyntheticSpec | None:
    """``"synthetic:SIGMA:N[:SEED]"`` -> :class:`SyntheticSpec`; None for anything else (a path)."""
    s = str(text).strip()
    if not s.lower().startswith("synthetic:"):
        return None
    parts = s.split(":")[1:]
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        sigma = float(parts[0])
        n = int(float(parts[1]))
        seed = int(parts[2]) if len(parts) == 3 else SYNTHETIC_SEED
        if not (math.isfinite(sigma) and sigma > 0 and float(parts[1]) == n and n >= 1 and seed >= 0):
            raise ValueError
    except ValueError:
        raise ParameterError(
            f"Synthetic input '{text}' must be 'synthetic:SIGMA:N' with σ > 0 in cells of a 1024 grid "
            "and N ≥ 1 points, for example synthetic:50:1000000."
        ) from None
    return SyntheticSpec(sigma, n, seed)


def synthetic_aggregate(grid: Grid, sigma: float, n: int, *, seed: int = SYNTHETIC_SEED) -> Aggregate:
    """The HTF paper's synthetic data over ``grid``'s public bounds, as a frequency matrix.

    One cluster centre drawn uniformly (from ``seed``), ``n`` points with
    ``x, y ~ Normal(centre, σ)``, σ in cells of a 1024 x 1024 grid over the bounds,
    resampled until exactly ``n`` fall inside (:func:`dpcore.data.synthetic.gaussian_clusters`).
    Made-up data: it holds nobody, so scores on it cost no privacy.
    """
    lon, lat = gaussian_clusters(int(n), grid.bounds, sigma_cells=float(sigma),
                                 resolution=SYNTHETIC_RESOLUTION, seed=int(seed))
    return aggregate_points(lon, lat, grid)


# ---------------------------------------------------------------- evaluation


def workload_seed(seed: int, repeat: int, shape: str = "random") -> int:
    """Seed of the query workload of one repeat and shape (public, data-free).

    A hash rather than numpy.random, so that dpcore outside noise.py never touches
    numpy's random module (tests/unit/privacy/test_randomness_sources.py).
    """
    digest = hashlib.sha256(f"{int(seed)}:{int(repeat)}:{shape}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def _unique(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


@dataclass(frozen=True)
class Settings:
    """Checked settings of an evaluation (names canonical, duplicates dropped, parameters resolved)."""

    mechanisms: list[str]
    epsilons: list[float]
    query_sizes: list[float]
    shapes: list[str]
    n_queries: int
    repeats: int
    params: dict[str, dict[str, Any]]


def check_settings(
    mechanisms: Sequence[str],
    epsilons: Sequence[float],
    query_sizes: Sequence[float] = (0.02, 0.06, 0.1),
    n_queries: int = 2000,
    repeats: int = 5,
    shape: str | Sequence[str] = "random",
    params: dict[str, dict[str, Any]] | None = None,
    noise_seed: int | None = None,
) -> Settings:
    """Validate the settings of :func:`evaluate` without any data (raises ParameterError)."""
    names = [_get(n).name for n in _unique(list(mechanisms))]
    if not names:
        raise ParameterError("Choose at least one mechanism to compare.")
    eps_list = _unique([check_epsilon(e) for e in epsilons])
    if not eps_list:
        raise ParameterError("Give at least one privacy budget ε to compare, e.g. 0.1,0.3,0.5.")
    sizes = _unique([float(s) for s in query_sizes])
    if not sizes:
        raise ParameterError("Give at least one query size, e.g. 0.02,0.06,0.1.")
    for s in sizes:
        if not 0 < s <= 1:
            raise ParameterError(f"Query size {s} must be a fraction of the domain in (0, 1], e.g. 0.02.")
    shapes = _unique([shape] if isinstance(shape, str) else list(shape))
    for sh in shapes:
        if sh not in ("random", "square"):
            raise ParameterError(f"Query shape must be 'random' or 'square' (got {sh!r}).")
    if int(n_queries) != n_queries or n_queries < 1:
        raise ParameterError(f"The number of queries per size must be a whole number ≥ 1 (got {n_queries}).")
    if int(repeats) != repeats or repeats < 1:
        raise ParameterError(f"The number of repeats must be a whole number ≥ 1 (got {repeats}).")
    if noise_seed is not None and (isinstance(noise_seed, bool) or int(noise_seed) != noise_seed
                                   or noise_seed < 0):
        raise ParameterError(f"noise_seed must be None (secure noise) or a whole number ≥ 0 (got {noise_seed!r}).")
    params = dict(params or {})
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise ParameterError(f"Parameters given for {', '.join(unknown)}, which is not among the "
                             f"mechanisms compared ({', '.join(names)}).")
    given = {n: dict(params.get(n) or {}) for n in names}
    if "auto" in given and "query_sizes" not in given["auto"]:
        given["auto"]["query_sizes"] = tuple(sizes)  # auto chooses for the sizes compared
    resolved = {n: _get(n).resolve_params(given[n]) for n in names}

    return Settings(names, eps_list, sizes, shapes, int(n_queries), int(repeats), resolved)


def evaluate(
    aggregate: Aggregate,
    mechanisms: list[str],
    epsilons: list[float],
    query_sizes: Sequence[float] = (0.02, 0.06, 0.1),
    n_queries: int = 2000,
    repeats: int = 5,
    shape: str | Sequence[str] = "random",
    smoothing: float = metrics.DEFAULT_SMOOTHING,
    seed: int = 0,
    params: dict[str, dict[str, Any]] | None = None,
    noise_seed: int | None = None,
    progress: Progress | None = None,
    failures: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Score mechanisms on range queries against the truth.  CURATOR-ONLY, NOT FOR PUBLICATION.

    Parameters
    ----------
    aggregate
        The confidential frequency matrix (or a synthetic stand-in).
    mechanisms
        Registered mechanism names (see ``dpcore.catalog.names("points")``).
    epsilons
        Pure-ε budgets; each release of each mechanism spends one of them (not charged
        to any ledger: nothing is published).
    query_sizes, n_queries
        Area fractions of the queries and the number of queries per size.
    repeats
        Independent releases per (mechanism, ε), each with a fresh workload.
    shape
        ``"random"`` (aspect ratio log-uniform in [1/4, 4]), ``"square"``, or both as a
        sequence; the releases of a repeat are shared by all shapes.
    smoothing
        Sanity bound ``s`` of the MRE (absolute, 20 in the HTF paper).
    seed
        Seed of the public query workloads.
    params
        Parameters per mechanism name; missing ones take the paper's defaults.
        Mechanisms that size themselves from the number of points get no public guess
        of it: they measure it privately out of their own budget, as in a real release.
    noise_seed
        None (default): secure noise.  An int: release ``i`` uses ``NoiseSource(noise_seed + i)``,
        reproducible and NOT secure (benchmarks only).
    progress
        Called as ``progress(done, total, what)`` before every release and once at the end.
    failures
        None (default): the first release that fails raises, and nothing is returned.  A dict:
        a mechanism whose release fails is recorded as ``failures[name] = reason`` and skipped
        from then on; the other mechanisms' results are kept (the rows of the failed mechanism's
        earlier releases too).

    Returns
    -------
    pandas.DataFrame
        The long table, columns :data:`LONG_COLUMNS`; :func:`summarize` aggregates it.
    """
    cfg = check_settings(mechanisms, epsilons, query_sizes, n_queries, repeats, shape, params, noise_seed)
    names, eps_list, sizes, shapes, resolved = (cfg.mechanisms, cfg.epsilons, cfg.query_sizes,
                                                cfg.shapes, cfg.params)
    total = int(repeats) * len(names) * len(eps_list)
    done = 0
    rows: list[dict[str, Any]] = []
    plans: dict[tuple[str, float], Any] = {}
    for r in range(int(repeats)):
        loads = []
        for sh in shapes:
            ws = workload_seed(seed, r, sh)
            qs, tags = queries.random_rectangles(aggregate.grid, sizes, int(n_queries), shape=sh, seed=ws)
            loads.append((sh, ws, qs, tags, queries.true_answers(aggregate.counts, qs)))
        for name in names:
            mech = _get(name)
            for eps in eps_list:
                if failures is not None and name in failures:
                    done += 1
                    continue
                if progress is not None:
                    progress(done, total, f"{mech.title}, ε = {eps:g}, repeat {r + 1} of {repeats}")
                ns = None if noise_seed is None else int(noise_seed) + done
                source = secure_source() if ns is None else NoiseSource(ns)
                try:
                    rel, dt = _timed_release(mech, plans, aggregate, eps, resolved[name], source)
                except Exception as e:  # one mechanism's failure keeps the others' results
                    if failures is None:
                        raise
                    failures[name] = _reason(e, eps, r)
                    done += 1
                    continue
                rows += _scores(rel, loads, sizes, smoothing,
                                {"mechanism": name, "epsilon": eps, "repeat": r, "release_seconds": dt,
                                 "noise_seed": ns})
                done += 1
    if progress is not None:
        progress(total, total, "done")
    df = pd.DataFrame(rows, columns=LONG_COLUMNS)
    df["noise_seed"] = df["noise_seed"].astype("Int64")
    return df


def _scores(rel: Any, loads: Sequence[tuple[str, int, Any, Any, Any]], sizes: Sequence[float], smoothing: float,
            fixed: dict[str, Any]) -> list[dict[str, Any]]:
    """One row of :data:`LONG_COLUMNS` per workload shape and query size: the release's errors on it."""
    n_leaves = int(np.count_nonzero(rel.leaf))
    choice = str(rel.public.get("auto", {}).get("chosen", ""))  # what auto chose ("" otherwise)
    rows = []
    for sh, ws, qs, tags, true in loads:
        est = rel.answer(qs)
        for s in sizes:
            m = tags == s
            t, e = true[m], est[m]
            rows.append({
                "mechanism": fixed["mechanism"], "epsilon": fixed["epsilon"], "shape": sh, "query_size": s,
                "repeat": fixed["repeat"], "n_queries": int(m.sum()),
                "mre_percent": metrics.mre(t, e, smoothing), "mae": metrics.mae(t, e),
                "rmse": metrics.rmse(t, e), "max_abs_error": metrics.max_abs(t, e),
                "release_seconds": fixed["release_seconds"], "n_leaves": n_leaves, "workload_seed": ws,
                "noise_seed": fixed["noise_seed"], "choice": choice,
            })
    return rows


def _timed_release(mech: PointsMechanism, plans: dict[tuple[str, float], Any], aggregate: Aggregate, eps: float,
                   params: dict[str, Any], source: NoiseSource) -> tuple[Any, float]:
    """A release of ``mech`` at ``eps`` and the seconds it took: one data-free plan per (mechanism, ε),
    kept in ``plans`` and shared by the repeats; only the release is timed."""
    if (mech.name, eps) not in plans:
        plans[mech.name, eps] = mech.plan(aggregate.grid, eps, params, unit=points_unit(aggregate.user_cap))
    t0 = time.perf_counter()
    rel = mech.release(plans[mech.name, eps], aggregate, source).inner
    return rel, time.perf_counter() - t0


def _reason(e: Exception, eps: float, repeat: int) -> str:
    text = str(e).strip() or type(e).__name__
    if not isinstance(e, DPCoreError):
        text = f"{type(e).__name__}: {text}"  # an unexpected error: say what kind
    return f"failed at ε = {eps:g}, repeat {repeat + 1}: {text}"


def refusals(grid: Grid, names: Sequence[str], epsilons: Sequence[float] = (1.0,),
             params: dict[str, dict[str, Any]] | None = None) -> dict[str, str]:
    """Mechanisms that refuse these public settings, each with the reason (no data used).

    Asks every mechanism's own public check (:meth:`PointsMechanism.check_settings`, the
    refusals of its plan, before anything is spent) at every ε: e.g. the matrix mechanism refuses
    grids above 256 × 256 cells, DAWA above 2,048 × 2,048, HTF a budget too small for its
    deepest tree.  Names absent from the result can run these settings.

    >>> from dpcore.data.domain import Bounds, Grid
    >>> sorted(refusals(Grid(Bounds(0, 0, 1, 1), 1024, 1024), ["ug", "matrix"]))
    ['matrix']
    """
    out: dict[str, str] = {}
    params = params or {}
    for name in names:
        mech = _get(name)
        for eps in epsilons:
            try:
                mech.check_settings(grid, float(eps), params.get(mech.name))
            except DPCoreError as e:
                out[mech.name] = str(e)
                break
    return out


def _get(name: str) -> PointsMechanism:
    """The point mechanism called ``name`` (the catalogue's points, which sits above this module)."""
    return lookup({m.name: m for m in MECHANISMS}, name, "mechanism")


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Mean over repeats per (mechanism, ε, shape, query size), with the standard error of the mean MRE.

    ``mre_se = sd(MRE over repeats) / sqrt(repeats)`` (NaN with one repeat).  ``release_seconds``
    is the mean time of one release (the same release answers every query size).
    CURATOR-ONLY: computed from true counts.
    """
    keys = ["mechanism", "epsilon", "shape", "query_size"]
    if "choice" not in results.columns:
        results = results.assign(choice="")
    g = results.groupby(keys, sort=False)
    out = g.agg(
        repeats=("repeat", "nunique"),
        n_queries=("n_queries", "first"),
        mre_percent=("mre_percent", "mean"),
        mre_sd=("mre_percent", "std"),
        mae=("mae", "mean"),
        rmse=("rmse", "mean"),
        release_seconds=("release_seconds", "mean"),
        n_leaves=("n_leaves", "mean"),
        choice=("choice", lambda c: ",".join(sorted({str(x) for x in c if isinstance(x, str) and x}))),
    ).reset_index()
    out["mre_se"] = out["mre_sd"] / np.sqrt(out["repeats"])
    return out[SUMMARY_COLUMNS]


def best_per_epsilon(summary: pd.DataFrame) -> list[tuple[float, str, float]]:
    """Per budget ε: the mechanism with the lowest MRE averaged over the query sizes and shapes, and that MRE
    (ties: the first in the summary's order).  CURATOR-ONLY when the summary was computed on real data.

    >>> s = pd.DataFrame({"mechanism": ["a", "b", "a", "b"], "epsilon": [0.1, 0.1, 1.0, 1.0],
    ...                   "mre_percent": [5.0, 3.0, 1.0, 2.0]})
    >>> best_per_epsilon(s)
    [(0.1, 'b', 3.0), (1.0, 'a', 1.0)]
    """
    if summary.empty:
        return []
    mean = summary.groupby(["epsilon", "mechanism"], sort=False)["mre_percent"].mean().reset_index()
    out = []
    for eps in sorted(mean["epsilon"].unique()):
        rows = mean[mean["epsilon"] == eps]
        best = rows.loc[rows["mre_percent"].idxmin()]
        out.append((float(eps), str(best["mechanism"]), float(best["mre_percent"])))
    return out


# ---------------------------------------------------------------- tables and charts


def format_mre(mean: float, se: float | None = None) -> str:
    """``"12.3 ± 0.4"``: MRE in percent with its standard error, digits by magnitude."""
    if mean is None or not math.isfinite(mean):
        return "—"
    a = abs(mean)
    digits = 0 if a >= 100 else 1 if a >= 10 else 2
    text = f"{mean:,.{digits}f}"
    if se is not None and math.isfinite(se):
        text += f" ± {se:,.{digits}f}"
    return text


def _size_label(s: float) -> str:
    return f"{s:.0%}" if abs(s * 100 - round(s * 100)) < 1e-9 else f"{s:.1%}"


def summary_table(summary: pd.DataFrame, query_size: float | None = None,
                  shape: str | None = None, failures: dict[str, str] | None = None) -> pd.DataFrame:
    """Mechanism rows, ε columns, cells ``"MRE % ± SE"``, for one query size and shape.

    Without ``query_size`` (or ``shape``), the first one in the summary is used.  With
    ``failures`` (from :func:`evaluate`), every failed mechanism keeps a row ("–" where it has
    no result) and a column "not run because" gives its reason.
    """
    if summary.empty:
        if not failures:
            return pd.DataFrame()
        table = pd.DataFrame({"not run because": list(failures.values())}, index=list(failures))
        table.index.name = "mechanism"
        return table
    if shape is None:
        shape = summary["shape"].iloc[0]
    if query_size is None:
        query_size = summary["query_size"].iloc[0]
    sub = summary[(summary["shape"] == shape) & np.isclose(summary["query_size"], query_size)]
    cells = sub.assign(cell=[format_mre(m, s) for m, s in zip(sub["mre_percent"], sub["mre_se"], strict=True)])
    table = cells.pivot(index="mechanism", columns="epsilon", values="cell")
    table = table.reindex(index=_unique(list(sub["mechanism"])), columns=_unique(list(sub["epsilon"])))
    table.columns = [f"ε = {e:g}" for e in table.columns]
    if failures:
        table = table.reindex(index=list(table.index) + [n for n in failures if n not in table.index])
        table = table.fillna("–")
        table["not run because"] = [failures.get(n, "") for n in table.index]
    table.index.name = "mechanism"
    return table


def time_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean release time in seconds, mechanism rows, ε columns."""
    t = summary.groupby(["mechanism", "epsilon"], sort=False)["release_seconds"].mean().reset_index()
    table = t.pivot(index="mechanism", columns="epsilon", values="release_seconds")
    table = table.reindex(index=_unique(list(t["mechanism"])), columns=_unique(list(t["epsilon"])))
    table.columns = [f"ε = {e:g}" for e in table.columns]
    table.index.name = "mechanism"
    return table


def _markdown(table: pd.DataFrame, fmt: Callable[[Any], str] = str) -> str:
    cols = [table.index.name or ""] + [str(c) for c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|"]
    for idx, row in table.iterrows():
        lines.append("| " + " | ".join([str(idx)] + [fmt(v) for v in row]) + " |")
    return "\n".join(lines)


def summary_markdown(summary: pd.DataFrame, title: str | None = None, *, heading: str = "##",
                     smoothing: float = metrics.DEFAULT_SMOOTHING) -> str:
    """Markdown: per shape and query size a table of MRE % ± SE (mechanism × ε), then release times."""
    parts: list[str] = []
    if title:
        parts.append(f"{heading} {title}\n")
    reps = sorted(set(int(r) for r in summary["repeats"])) if not summary.empty else []
    nq = sorted(set(int(r) for r in summary["n_queries"])) if not summary.empty else []
    rep_text = "/".join(map(str, reps))
    se_text = ("no standard error with a single repeat" if reps == [1]
               else f"± standard error of the mean over {rep_text} repeats")
    parts.append(
        "Curator-only, not for publication: computed from the true counts. "
        f"MRE in percent, 100·|true − released| / max(true, {smoothing:g}), {se_text}; "
        f"{'/'.join(f'{n:,}' for n in nq)} queries per size.\n"
    )
    for sh in _unique(list(summary["shape"])):
        for s in _unique(list(summary.loc[summary["shape"] == sh, "query_size"])):
            shape_word = "random shape" if sh == "random" else "squares"
            parts.append(f"{heading}# Queries of {_size_label(s)} of the area, {shape_word}\n")
            parts.append(_markdown(summary_table(summary, s, sh)) + "\n")
    chosen = summary[summary["mechanism"] == "auto"] if "choice" in summary.columns else summary.iloc[0:0]
    if len(chosen):
        by_eps = chosen.groupby("epsilon", sort=False)["choice"].first()
        parts.append("`auto` chose (by its rule): "
                     + "; ".join(f"{c or '?'} at ε = {e:g}" for e, c in by_eps.items()) + ".\n")
    parts.append(f"{heading}# Mean time of one release (seconds)\n")
    parts.append(_markdown(time_table(summary), lambda v: f"{v:.3g}") + "\n")
    return "\n".join(parts)


def summary_figure(summary: pd.DataFrame, title: str | None = None):
    """Plotly figure: MRE vs ε per mechanism (log scale, ± SE bars), one panel per query size."""
    import plotly.express as px

    d = summary.copy()
    d["query size"] = [f"{_size_label(s)} of the area" for s in d["query_size"]]
    d["queries"] = d["shape"].map({"random": "random shape", "square": "squares"})
    many_shapes = d["shape"].nunique() > 1
    fig = px.line(
        d, x="epsilon", y="mre_percent", color="mechanism", error_y="mre_se", markers=True,
        facet_col="query size", facet_row="queries" if many_shapes else None, log_y=True,
        labels={"epsilon": "privacy budget ε", "mre_percent": "MRE (%)"}, title=title,
    )
    fig.update_xaxes(type="log", tickvals=sorted(d["epsilon"].unique()))
    return fig


def plot_summary(summary: pd.DataFrame, path: str | Path, title: str | None = None, *,
                 facet_row: str = "shape") -> Path:
    """Write the MRE-vs-ε chart: ``.png`` (matplotlib) or ``.html`` (plotly, plotly.js inlined, offline).

    One panel per query size (columns) and per value of ``facet_row`` (rows: the query
    shape by default; e.g. ``"dataset"`` for a summary with such a column and one shape).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if facet_row != "shape" and summary["shape"].nunique() > 1:
        raise ParameterError(f"Plot one query shape at a time when the rows are '{facet_row}'.")
    if path.suffix.lower() == ".html":
        if facet_row != "shape":
            raise ParameterError("The .html chart has one row per query shape; write a .png instead.")
        summary_figure(summary, title).write_html(str(path), include_plotlyjs=True)
        return path
    if path.suffix.lower() != ".png":
        raise ParameterError(f"The chart '{path}' must end in .png or .html.")
    from matplotlib.figure import Figure  # object API: no pyplot, no global backend state

    row_values = _unique(list(summary[facet_row]))
    sizes = _unique(list(summary["query_size"]))
    names = _unique(list(summary["mechanism"]))
    eps = sorted(summary["epsilon"].unique())

    def row_label(v: Any) -> str:
        if facet_row == "shape":
            return "random shape" if v == "random" else "squares"
        return str(v)

    fig = Figure(figsize=(4.2 * len(sizes) + 1.4, 3.2 * len(row_values) + 0.6), layout="constrained")
    axes = fig.subplots(len(row_values), len(sizes), squeeze=False, sharey="row")
    for i, rv in enumerate(row_values):
        for j, s in enumerate(sizes):
            ax = axes[i][j]
            for name in names:
                d = summary[(summary[facet_row] == rv) & np.isclose(summary["query_size"], s)
                            & (summary["mechanism"] == name)].sort_values("epsilon")
                if d.empty:
                    continue
                se = d["mre_se"].fillna(0.0).to_numpy()
                ax.errorbar(d["epsilon"], d["mre_percent"], yerr=se, marker="o", capsize=3, label=name)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(eps, [f"{e:g}" for e in eps])
            ax.minorticks_off()
            ax.set_title(f"{row_label(rv)}: queries of {_size_label(s)}", fontsize=9)
            ax.set_xlabel("privacy budget ε")
            if j == 0:
                ax.set_ylabel("MRE (%)")
            ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper")
    fig.suptitle(title or "MRE vs ε (curator-only, not for publication)", fontsize=11)
    fig.savefig(path, dpi=110)
    return path
