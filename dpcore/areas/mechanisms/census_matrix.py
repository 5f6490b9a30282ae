"""Marginals of a census table with the matrix mechanism (Li & Miklau, PVLDB 2012, Sec. 4.2).

A census table counts people per area × ordinal attributes (age band, income band): the
frequency matrix ``x`` of :class:`dpcore.areas.census_tables.CensusTable`, with the geography taken at one
level (its areas' totals: a public aggregation, one person still changes one cell by 1).  The
public workload is a union of **marginals** over the axes ``(geography, attribute₁, …)``: for
example the 1-way marginals (people per area, people per age band) and the 2-way marginal
area × age band.  For a union of marginals the optimal strategy is known in closed form
(:func:`dpcore.estimate.matrix_design.marginal_strategy`, basis-free and exactly at the SVD bound), so
the release is as accurate as any matrix mechanism can be for these tables.

Privacy: ρ-zCDP with the discrete Gaussian through :func:`dpcore.estimate.matrix_release.release` (the
strategy's L2 sensitivity, exact discrete samplers of :mod:`dpcore.privacy.noise`).  Under pure ε-DP
the closed form is dense and bad under L1 sensitivity, so :func:`matrix_design.l1_strategy`
chooses an L1 strategy and the plan says so (§7.3).  Only the marginal tables are published:
the cell estimate ``x̂`` is not unbiased for a rank-deficient workload (§7.2 P9) and is never
exported.

The 95 % interval of a cell is ``noisy_count ± 1.96·standard_error`` (a least-squares combination
of strategy answers), except where the L1 strategy is the identity under pure ε: there every cell
of the table is answered once with discrete Laplace noise, a marginal cell is the exact sum of the
m cells it adds up, its error the sum ``S_m`` of m iid discrete Laplace draws, and it publishes
``± k_m``, the smallest whole number with ``P(|S_m| ≤ k_m) ≥ 0.95``
(:func:`dpcore.privacy.calibration.discrete_sum_half_width`).  The sum is integer-valued,
so ``± 1.96·se`` would cover only ``|S_m| ≤ ⌊1.96·se⌋``: under 95 % in 3,774 of 6,016 (ε, m)
cases checked (benchmarks/matrix_laplace_sum_coverage.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd

from dpcore.areas.census_tables import GEO_AXIS, CensusStructure, CensusTable
from dpcore.areas.unit import unit_of_privacy_words
from dpcore.core.mechanism import KindRelease, Mechanism, Param, Plan, PlanRow
from dpcore.core.record import (
    build_record,
    created_now,
    new_release_id,
    validate_record,
)
from dpcore.data.csv_safe import csv_bytes, estimate_decimals
from dpcore.errors import ParameterError
from dpcore.estimate import (
    matrix_cache,
    matrix_design,
    matrix_errors,
    matrix_release,
    matrix_strategy,
    matrix_workload,
)
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import discrete_sum_half_width, interval_half_width
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

#: Most cells (areas × bins) of the table: the closed-form strategy is formed explicitly.
MAX_CELLS = matrix_workload.FULL_METHOD_MAX_N
SCHEMA = "dpcore-census-marginals/1"


def axes_of(structure: CensusStructure, level: str) -> tuple[list[str], list[list[str]]]:
    """Axis names and value labels: ``(geography level, *ordinals)``."""
    depth = structure.level_depth(level)
    if depth == 0:
        raise ParameterError("Choose a geographic level below the total (e.g. county) for the marginals.")
    areas = ["/".join(p) for p in structure.paths_at(depth)]
    return [level, *structure.ordinals], [areas, *[list(b) for b in structure.bins]]


def _geo_matrix(structure: CensusStructure, depth: int) -> np.ndarray:
    """Leaf → area-at-depth index (leaves are sorted, so each area's leaves are contiguous)."""
    idx = np.empty(len(structure.leaf_paths), dtype=np.int64)
    last, k = None, -1
    for i, p in enumerate(structure.leaf_paths):
        if p[:depth] != last:
            last, k = p[:depth], k + 1
        idx[i] = k
    return idx


def parse_marginals(spec: str | Sequence[Sequence[str]], axes: Sequence[str]) -> list[tuple[int, ...]]:
    """Marginals from ``"1"``/``"2"`` (all k-way) or lists of axis names (``[["county", "age"], ["age"]]``).

    A text spec may also be ``"county*age;age"`` (``*`` joins axes, ``;`` separates marginals).
    """
    if isinstance(spec, str):
        txt = spec.strip()
        if txt.isdigit():
            k = int(txt)
            if not 1 <= k <= len(axes):
                raise ParameterError(f"k-way marginals need 1 <= k <= {len(axes)} (the table has axes "
                                     f"{', '.join(axes)}); got {k}.")
            return [tuple(c) for c in itertools.combinations(range(len(axes)), k)]
        groups = [[a.strip() for a in part.split("*") if a.strip()] for part in txt.split(";") if part.strip()]
    else:
        groups = [[str(a) for a in g] for g in spec]
    if not groups:
        raise ParameterError("Choose at least one marginal (e.g. 1 for all one-way tables).")
    out = []
    for g in groups:
        unknown = [a for a in g if a not in axes]
        if unknown or not g:
            raise ParameterError(f"Unknown axis {', '.join(repr(u) for u in unknown) or '(none)'} in a marginal; "
                                 f"the axes are {', '.join(axes)}.")
        t = tuple(sorted({axes.index(a) for a in g}))
        if t not in out:
            out.append(t)
    return out


def workload(structure: CensusStructure, level: str, marginals: Sequence[tuple[int, ...]]) -> matrix_workload.Workload:
    names, values = axes_of(structure, level)
    dom = [len(v) for v in values]
    n = math.prod(dom)
    if n > MAX_CELLS:
        raise ParameterError(
            f"The table at level '{level}' has {n:,} cells ({' × '.join(f'{d:,}' for d in dom)}); the matrix "
            f"mechanism's marginal strategy handles at most {MAX_CELLS:,}. Choose a coarser level or fewer "
            "attributes, or use Privelet."
        )
    return matrix_workload.marginals_workload(dom, subsets=list(marginals))


_MEMO = matrix_cache.DesignMemo(4)


def strategy(w: matrix_workload.Workload, definition: str) -> matrix_strategy.Strategy:
    """The closed-form marginal strategy (zCDP) or the best L1 strategy (pure ε), memoised by
    workload: a plan and its release (and page reruns) design it once."""
    return _MEMO.get((w.content_hash(), definition),
                     lambda: matrix_design.l1_strategy(w) if definition == "pure" else matrix_design.marginal_strategy(w))


def _calibrate(s: matrix_strategy.Strategy, cost: PrivacyCost) -> Any:
    return matrix_release.calibrate(s, epsilon=cost.value) if cost.definition == "pure" else matrix_release.calibrate(s, rho=cost.value)


def _marginal_rows(names: Sequence[str], values: Sequence[Sequence[str]], marginals: Sequence[tuple[int, ...]]
                   ) -> list[dict[str, Any]]:
    """One entry per marginal: its name, axes and the labels of its cells (row-major)."""
    out = []
    for t in marginals:
        labels = list(itertools.product(*[values[a] for a in t]))
        out.append({"marginal": " × ".join(names[a] for a in t), "axes": [names[a] for a in t],
                    "cells": len(labels), "labels": labels})
    return out


@dataclass(frozen=True)
class MarginalsPlan:
    """Data-free facts of a marginals release (safe to show and publish).

    ``exact_half`` holds, per marginal, the exact 95 % half-width of its cells when each is the sum
    of m discrete Laplace draws (:meth:`n_draws`, :func:`sum_half_width`), else None (the normal
    ``1.96·se``)."""

    level: str
    cost: PrivacyCost
    axes: tuple[str, ...]
    marginals: tuple[tuple[int, ...], ...]
    per_marginal: tuple[dict[str, Any], ...]
    info: dict[str, Any]
    exact_half: tuple[float | None, ...] = ()

    def n_draws(self, i: int) -> int | None:
        """How many discrete Laplace draws each cell of marginal ``i`` sums (None: a least-squares
        cell): the table's cells over the marginal's (:func:`identity_draws`), public facts; 1 when
        the plan does not state them."""
        if not self.exact_half or self.exact_half[i] is None:
            return None
        if "cells" not in self.info or not self.per_marginal:
            return 1
        return int(self.info["cells"]) // int(self.per_marginal[i]["cells"])

    def half_width(self, i: int, se: Any) -> Any:
        """The 95 % half-width of marginal ``i``'s cells with standard errors ``se``."""
        k = self.exact_half[i] if self.exact_half else None
        return interval_half_width("normal", se) if k is None else np.full(np.shape(se), k)


def _is_identity(a: np.ndarray) -> bool:
    """Whether the square matrix ``a`` is the identity, without forming one (``np.eye`` of the
    largest table is 134 MB): every diagonal entry 1 and no other entry nonzero."""
    return bool(np.all(np.diagonal(a) == 1)) and int(np.count_nonzero(a)) == a.shape[0]


def identity_draws(s: matrix_strategy.Strategy, cal: Any, marginal: tuple[int, ...], dom: Sequence[int]
                   ) -> int | None:
    """How many discrete Laplace draws each cell of a marginal sums, or None for a least-squares cell.

    Under pure ε the L1 strategy may be the identity (every cell of the table answered once, Li &
    Miklau 2012, §7.3) with exact integer (discrete Laplace) noise; the estimate is then the noisy
    table itself and a marginal cell adds up ``m = n / cells`` of its cells (n the table's cells,
    ``cells`` the marginal's): its error is the sum of m iid draws, m a public fact of the
    structure (1 for the marginal over every axis).  Every other cell is a least-squares
    combination: None.
    """
    if (cal.distribution != "discrete_laplace" or s.A is None
            or s.A.shape[0] != s.A.shape[1] or not _is_identity(s.A)):
        return None
    n, cells = math.prod(dom), math.prod(dom[a] for a in marginal)
    if n % cells:  # pragma: no cover - a marginal's cells partition the table
        raise ParameterError("Internal error: a marginal's cells do not partition the table.")
    return n // cells


def sum_half_width(cal: Any, m: int | None) -> float | None:
    """The exact 95 % half-width ``k_m`` of a cell that sums m discrete Laplace draws of the
    calibrated scale (:func:`dpcore.privacy.calibration.discrete_sum_half_width`; m = 1 is
    the single-draw quantile), None for a least-squares cell."""
    return None if m is None else discrete_sum_half_width("discrete_laplace", cal.scale, m)


def plan(structure: CensusStructure, level: str, marginals: Sequence[tuple[int, ...]], cost: PrivacyCost
         ) -> MarginalsPlan:
    """Expected SD of every marginal cell, RMSE, the SVD lower bound and the ratio: no data."""
    names, values = axes_of(structure, level)
    w = workload(structure, level, marginals)
    s = strategy(w, cost.definition)
    cal = _calibrate(s, cost)
    sd = np.sqrt(matrix_errors.query_variances_per_p(w, s) / s.sensitivity() ** 2 * cal.variance)
    dom = [len(v) for v in values]
    draws = tuple(identity_draws(s, cal, t, dom) for t in marginals)
    per, off = [], 0
    for row, m in zip(_marginal_rows(names, values, marginals), draws, strict=True):
        v = sd[off:off + row["cells"]]
        if m is not None:  # each cell's variance is m single-draw variances: m is read off se² too
            ratio = v**2 / cal.variance
            if not np.allclose(ratio, m, rtol=1e-9, atol=0):  # pragma: no cover - the identity's algebra
                raise ParameterError(f"Internal error: cells of {row['marginal']} have se²/Var ≠ {m} draws.")
        off += row["cells"]
        per.append({"marginal": row["marginal"], "cells": row["cells"], "sd_mean": float(np.sqrt(np.mean(v**2))),
                    "sd_max": float(v.max())})
    rmse = float(np.sqrt(np.mean(sd**2)))
    info: dict[str, Any] = {
        "workload": w.name, "n_queries": int(w.m), "cells": int(w.n),
        "strategy": ("closed-form marginal strategy (optimal)" if s.kind == "marginal" else f"L1 strategy ({s.kind})"),
        "strategy_queries": int(s.p), "noise": cal.distribution, "noise_scale": float(cal.scale),
        "noise_variance": float(cal.variance), "expected_rmse_per_query": rmse, "notes": [],
        "bins_source": structure.bins_origin(),
    }
    if cost.definition == "pure":
        info["rmse_lower_bound"] = info["ratio_to_lower_bound"] = None
        info["notes"].append("Pure ε-DP: the optimal marginal strategy is tuned for Gaussian noise and has a large L1 "
                             f"sensitivity, so an L1 strategy ({s.kind}) is used (Li & Miklau 2012, Sec. 3.5). Choose ρ-zCDP for the "
                             "optimal one.")
    else:
        rep = matrix_errors.error_report(w, s)
        per_unit = math.sqrt(cal.variance) / s.sensitivity()
        info["rmse_lower_bound"] = rep["rmse_lower_bound_per_sqrt_p"] * per_unit
        info["ratio_to_lower_bound"] = rep["ratio_rmse"]
    exact = tuple(sum_half_width(cal, m) for m in draws)
    out = MarginalsPlan(level, cost, tuple(names), tuple(marginals), tuple(per), info, exact)
    assert all(out.n_draws(i) == m for i, m in enumerate(draws) if exact[i] is not None)  # the one m of the plan
    return out


@dataclass(frozen=True, eq=False)
class MarginalsRelease:
    plan: MarginalsPlan
    tables: dict[str, pd.DataFrame]
    guarantee: str
    release_id: str = field(default_factory=new_release_id)
    created: str = field(default_factory=created_now)  # the session restamps it with the charge time


def _inputs(table: CensusTable, p: MarginalsPlan) -> tuple[Any, Any, np.ndarray, dict[str, float]]:
    """The workload, strategy, data vector (the table at the plan's level) and cost arguments."""
    s_ = table.structure
    depth = s_.level_depth(p.level)
    geo = _geo_matrix(s_, depth)
    x = np.zeros((int(geo.max()) + 1, *table.counts.shape[1:]))
    np.add.at(x, geo, table.counts)
    w = workload(s_, p.level, p.marginals)
    st = strategy(w, p.cost.definition)
    kw = {"epsilon": p.cost.value} if p.cost.definition == "pure" else {"rho": p.cost.value}
    return w, st, x.reshape(-1), kw


def check_data(table: CensusTable, p: MarginalsPlan) -> None:
    """The refusals of :func:`release` that depend on the table, run before the budget is charged.

    The strategy answers of the true table must fit the noise grid
    (:func:`dpcore.estimate.matrix_release.check_data`; Li & Miklau 2012, with the exact answers of
    issue 18, item 3c).  A refusal publishes nothing and is seen by the curator only: it says the
    counts exceed about 2^62 grid units, far beyond any census table.
    """
    w, st, x, kw = _inputs(table, p)
    matrix_release.check_data(w, st, x, **kw)


def release(table: CensusTable, p: MarginalsPlan, noise: NoiseSource) -> MarginalsRelease:
    """Noisy marginal tables with their standard errors (the caller has charged ``p.cost``)."""
    w, st, x, kw = _inputs(table, p)
    res = matrix_release.release(w, st, x, noise, **kw)
    if res.cost.value > p.cost.value * (1 + 1e-9):  # pragma: no cover - calibrate() never rounds up
        raise ParameterError(f"Internal error: the release would cost {res.cost.label()}, more than planned.")
    names, values = axes_of(table.structure, p.level)
    tables: dict[str, pd.DataFrame] = {}
    off = 0
    for j, row in enumerate(_marginal_rows(names, values, p.marginals)):
        k = row["cells"]
        ans, se = res.answers[off:off + k], res.standard_errors[off:off + k]
        off += k
        cols: dict[str, Any] = {a: [lab[i] for lab in row["labels"]] for i, a in enumerate(row["axes"])}
        half = p.half_width(j, se)  # a least-squares estimate, or a sum of m discrete Laplace draws
        cols.update(noisy_count=ans, standard_error=se, ci95_low=ans - half, ci95_high=ans + half)
        tables[row["marginal"]] = pd.DataFrame(cols)
    return MarginalsRelease(p, tables, res.guarantee)


def marginals_csv(rel: MarginalsRelease) -> bytes:
    """One long table: ``marginal``, one column per axis (empty where summed out), the estimates."""
    frames = []
    for name, df in rel.tables.items():
        f = df.copy()
        f.insert(0, "marginal", name)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    out["noise_sd"] = out["standard_error"]  # the common name (dpcore.core.record.INTERVAL_COLUMNS)
    cols = ["marginal", *[a for a in rel.plan.axes if a in out.columns],
            "noisy_count", "standard_error", "noise_sd", "ci95_low", "ci95_high"]
    return csv_bytes(estimate_decimals(out[cols]), lambda d: d.to_csv(index=False).encode())



def marginals_body(rel: MarginalsRelease) -> dict[str, Any]:
    """What only a marginals record has: the table and its marginals, the expected errors, the outputs."""
    p = rel.plan
    return {
        "table": {"geography_level": p.level, "axes": list(p.axes),
                  "marginals": [[p.axes[a] for a in t] for t in p.marginals],
                  "bins_source": dict(p.info.get("bins_source", {}))},
        "expected_error": {"per_marginal": list(p.per_marginal),
                           "rmse_per_query": p.info["expected_rmse_per_query"],
                           "rmse_lower_bound": p.info["rmse_lower_bound"],
                           # to 9 digits: at the bound, rounding left 0.9999999999999999 (below the schema's 1)
                           "ratio_to_lower_bound": (None if p.info["ratio_to_lower_bound"] is None
                                                    else round(float(p.info["ratio_to_lower_bound"]), 9))},
        "outputs": {"files": ["marginals.csv", "release.json"],
                    "csv_columns": ["marginal", *p.axes, "noisy_count", "standard_error", "noise_sd", "ci95_low",
                                    "ci95_high"]},
    }


#: The 95 % interval of a least-squares cell in words (:meth:`MarginalsPlan.half_width`).
NORMAL_CI95_TEXT = "noisy_count ± 1.96·standard_error"


def interval_text(p: MarginalsPlan, i: int) -> str:
    """Marginal ``i``'s 95 % interval in words, by the rule of :meth:`MarginalsPlan.half_width`.

    >>> p = MarginalsPlan("county", PrivacyCost("pure", 1.0), ("county",), ((0,),), (), {}, (6.0,))
    >>> interval_text(p, 0)
    'noisy_count ± 6 (the exact 95 % quantile of one discrete Laplace draw: each cell is one draw)'
    >>> q = MarginalsPlan("age", PrivacyCost("pure", 1.0), ("county", "age"), ((1,),), ({"cells": 2},), {"cells": 6},
    ...                   (10.0,))
    >>> interval_text(q, 0)
    'noisy_count ± 10 (the exact 95 % quantile of the sum of 3 discrete Laplace draws: each cell adds up 3 cells)'
    """
    m = p.n_draws(i)
    if m is None:
        return NORMAL_CI95_TEXT
    k = int(p.exact_half[i] or 0)  # not None: n_draws said so
    if m == 1:
        return f"noisy_count ± {k} (the exact 95 % quantile of one discrete Laplace draw: each cell is one draw)"
    return (f"noisy_count ± {k} (the exact 95 % quantile of the sum of {m} discrete Laplace draws: each cell adds up "
            f"{m} cells)")


def _interval_notes(p: MarginalsPlan) -> list[str]:
    """One note for the marginals whose cells are sums of discrete Laplace draws (:func:`identity_draws`)."""
    tables = [f"{p.per_marginal[i]['marginal']}: ± {int(k)}, m = {p.n_draws(i)}"
              for i, k in enumerate(p.exact_half) if k is not None]
    if not tables:
        return []
    return ["Identity strategy: every cell of the table is one discrete Laplace draw, and a marginal cell adds up m "
            "of them. ci95_low/high = noisy_count ± k, the exact 95 % quantile of the sum of m discrete Laplace "
            f"draws ({'; '.join(tables)})."]


def marginals_record(rel: MarginalsRelease, ledger: Ledger | None = None, *, plan: Plan | None = None) -> dict[str, Any]:
    """The machine-readable record (public parameters, strategy, expected errors; no true count):
    the one envelope (:func:`dpcore.core.record.build_record`) around :func:`marginals_body`;
    ``plan`` is the core plan the release was made from (its rows go into the record)."""
    p = rel.plan
    return build_record(
        schema=SCHEMA, kind="census", release_id=rel.release_id, created=rel.created,
        mechanism={"name": "matrix", "title": CensusMatrix.title, "reference": CensusMatrix.reference,
                   "strategy": p.info["strategy"], "strategy_queries": p.info["strategy_queries"]},
        cost=p.cost, unit_of_privacy=unit_of_privacy_words(plan.unit if plan is not None else None,
                                                           "one person (add or remove)"),
        privacy={"guarantee": rel.guarantee, "noise": p.info["noise"],
                 "randomness": "exact discrete samplers driven by the operating system's CSPRNG (os.urandom)"},
        body=marginals_body(rel),
        notes=["All values are outputs of the mechanism; no true count is published.",
               "Standard errors are analytic (Var(z)·w X⁺ wᵀ per query), from public parameters only.",
               *_interval_notes(p),
               *p.info["notes"],
               *[f"The values of '{o}' come from {src}." for o, src in p.info.get("bins_source", {}).items()]],
        ledger=ledger, plan=plan.rows_dict() if plan is not None else None,
    )


def validate_marginals_record(record: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if the record breaks the envelope or the marginals body schema."""
    validate_record(record)


def marginals_json(rel: MarginalsRelease, ledger: Ledger | None = None, *, plan: Plan | None = None) -> bytes:
    return orjson.dumps(marginals_record(rel, ledger, plan=plan),
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def marginals_files(rel: MarginalsRelease, ledger: Ledger | None = None, *,
                    plan: Plan | None = None) -> dict[str, bytes]:
    """The release's files, name -> bytes: ``marginals.csv`` and ``release.json`` (the record,
    ``ledger`` as of the charge, the rows of the core ``plan``).  Made once, when the release is made."""
    return {"marginals.csv": marginals_csv(rel), "release.json": marginals_json(rel, ledger, plan=plan)}


class CensusMatrix(Mechanism):
    """Marginal tables of a census table with the matrix mechanism (closed-form strategy under zCDP).

    Privacy: one person added or removed changes one cell of the table at the chosen level by 1;
    the strategy's L2 (zCDP) or L1 (pure ε) sensitivity calibrates the noise of its one answer,
    which spends the whole budget (Li & Miklau 2012, Sec. 3.5).
    """

    kind = "census"
    name = "matrix"
    title = "Matrix mechanism (marginals)"
    summary = ("One noisy answer to the optimal strategy for a union of marginal tables (area × age band, ...); "
               "every table cell comes with its exact standard error.")
    when_to_use = "A few marginal tables of a census table at one geographic level, best under ρ-zCDP."
    reference = "Li & Miklau, PVLDB 5(6) 2012, Sec. 4.2"
    params = (
        Param("level", "Geographic level", str, "", "Level of the areas (empty: the finest level)."),
        Param("marginals", "Marginal tables", str, "1",
              "'1' (all one-way tables), '2' (all two-way), or tables like 'county*age_band;age_band'."),
    )

    def _plan(self, domain: CensusStructure, cost: PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, CensusStructure):
            raise ParameterError(f"A census plan needs the public structure (got {type(domain).__name__}).")
        if unit.neighbour != "add_remove":
            raise ParameterError("The marginals protect one person added or removed; choose the add/remove neighbours.")
        if unit.cap not in (None, 1):
            raise ParameterError(f"{self.title} counts each {unit.entity} once; a cap of {unit.cap} records is "
                                 "not supported.")
        level = params["level"] or domain.levels[-1]
        axes, _ = axes_of(domain, level)
        inner = plan(domain, level, parse_marginals(params["marginals"], axes), cost)
        info = inner.info
        rows = tuple(
            PlanRow(level=i, name=m["marginal"], cost=None, noise=info["noise"], scale=info["noise_scale"],
                    sensitivity=None, n_counts=m["cells"], sd=m["sd_mean"], ci95=float(inner.half_width(i, m["sd_mean"])),
                    mean_abs=math.sqrt(2 / math.pi) * m["sd_mean"], max_abs=None,
                    note="one strategy answered with the whole budget; sd is the RMS over the table's cells "
                         "(mean error: normal approximation)",
                    details={"sd_max": m["sd_max"]})
            for i, m in enumerate(inner.per_marginal)
        )
        extra = {"level": level, "marginals": [[inner.axes[a] for a in t] for t in inner.marginals],
                 "strategy": info["strategy"]}
        return Plan(self.kind, self.name, {**params, "level": level}, cost, unit, rows, inner=inner,
                    label="census marginals (matrix mechanism)", extra=extra, domain=domain, public=dict(public))

    def check_data(self, plan: Plan, aggregate: CensusTable) -> None:
        """The table has the plan's structure and its strategy answers fit the noise grid
        (:func:`check_data`); run before the charge.  A refusal depends on the counts, but
        nothing is released or charged, only the curator sees it, and it refuses only counts
        beyond about 2^62 grid units."""
        self.check_plan(plan)
        if aggregate.structure is not plan.domain and aggregate.structure != plan.domain:
            raise ParameterError("The table has another structure (levels, areas, bins) than the plan was made for.")
        check_data(aggregate, plan.inner)

    def release(self, plan: Plan, aggregate: CensusTable, noise: NoiseSource, *, checked: bool = False) -> KindRelease:
        if not checked:  # a direct caller: the pipeline ran it before the charge and says so
            self.check_data(plan, aggregate)
        return KindRelease.of(plan, release(aggregate, plan.inner, noise), marginals_record, marginals_files)


__all__ = ["GEO_AXIS", "CensusMatrix", "MarginalsPlan", "MarginalsRelease", "axes_of", "check_data", "marginals_csv",
           "marginals_body", "marginals_files", "marginals_json", "marginals_record", "parse_marginals", "plan", "release",
           "validate_marginals_record", "workload"]
