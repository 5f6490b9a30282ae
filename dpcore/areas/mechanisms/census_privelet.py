"""Privelet release of a census table: noisy tables per level with their expected errors.

The frequency matrix ``x`` of a :class:`~dpcore.areas.census_tables.CensusTable` (leaves ×
bins…) has one **nominal** axis for the geography (the public hierarchy of its code columns)
and one **ordinal** (Haar) axis per attribute.  It is released with
:func:`dpcore.estimate.privelet.release` — Privelet (Xiao, Wang & Gehrke, *Differential Privacy
via Wavelet Transforms*, ICDE 2010, Sec. V–VI): every wavelet
coefficient ``c`` gets Laplace noise of magnitude ``λ / W(c)``, with ``λ`` set from ε, the
count sensitivity Δ and the transform's generalised sensitivity ρ, and the noisy matrix is the
inverse transform.  Privelet+ leaves the axes named in ``plus_axes`` untransformed (identity).

The area totals of every level are sums of the noisy leaves, so a parent's noisy total is
the sum of its children's (consistent by construction, up to float rounding).  Their
expected error is analytic and data-free (:func:`dpcore.estimate.privelet.level_variances`), so it can
be shown before release and published.

The 95 % intervals are ``noisy ± SD·ln 20/√2`` (≈ 2.12·SD; ``interval_half_width("laplace", sd)``,
:func:`half_widths`) for every area of every level.  An area's noise is a weighted sum of a few
independent Laplace draws (one per wavelet coefficient that reaches it: its own, its siblings' through
the mean subtraction, its ancestors', the Haar coefficients of the attributes), and for such a sum
``± 1.96·SD`` (the normal approximation) covers less than 95 %: 93.7 % for one draw, about 94 % for
the areas of a real geography, approaching 95 % only for sums of very many draws (one Laplace draw has
heavier tails than the normal).  ``SD·ln 20/√2``, the exact 95 % quantile of one Laplace draw, covers a
weighted sum of Laplace draws with probability at least 95 % for every weight pattern checked (a
numerical finding, not a proof; 95.0 % for one draw, at most 96.6 % for many equal ones):
benchmarks/results/privelet_weights_coverage.md computes it exactly for every area pattern of
the demo tables and for random weights; benchmarks/results/interval_census_coverage.md measured the
normal interval's shortfall.  The points kind's Privelet publishes the same interval.

This module holds the mechanism (:class:`CensusPrivelet`, kind ``census``): the Privelet axes of
a table, the expected error per level and per area, the release with its level tables, and the
exports (``release.csv``, ``release.json``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from dpcore.data.csv_safe import csv_bytes
from dpcore.errors import ParameterError
from dpcore.estimate import privelet
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource
from dpcore.privacy.units import Unit

__all__ = [
    "CensusPrivelet",
    "CensusRelease",
    "PriveletPlan",
    "area_expected_error",
    "build",
    "build_axes",
    "census_csv",
    "census_frame",
    "census_body",
    "census_json",
    "census_record",
    "expected_error",
    "plan_census",
    "plan_frame",
    "release_census",
    "release_planned",
    "validate_census_record",
]


# ---------------------------------------------------------------------------------------------
# axes
# ---------------------------------------------------------------------------------------------


def _groups(structure: CensusStructure) -> list[np.ndarray]:
    """``groups[j][leaf]`` = index of the leaf's ancestor at level ``j`` (0 = top level)."""
    paths = structure.leaf_paths
    out = []
    for j in range(structure.depth - 1):
        ids = np.empty(len(paths), dtype=np.int64)
        last, cur = None, -1
        for i, p in enumerate(paths):
            q = p[: j + 1]
            if q != last:
                cur += 1
                last = q
            ids[i] = cur
        out.append(ids)
    return out


def _check_plus(structure: CensusStructure, plus_axes: Sequence[str]) -> tuple[str, ...]:
    names = [GEO_AXIS, *structure.ordinals]
    plus = tuple(str(a) for a in plus_axes)
    bad = [a for a in plus if a not in names]
    if bad:
        raise ParameterError(
            f"Privelet+ axis {', '.join(map(repr, bad))} is not an axis of this table; choose among "
            f"{', '.join(names)}."
        )
    return plus


def build_axes(structure: CensusStructure, plus_axes: Sequence[str] = ()) -> list[privelet.Axis]:
    """The Privelet axes of a (public) structure: nominal geography, then ordinal attributes.

    The geography's hierarchy is the implicit root (the total), one group level per level
    column but the finest, and the leaves; group ids follow the sorted leaf paths.
    """
    plus = _check_plus(structure, plus_axes)
    axes = [privelet.Axis.nominal(GEO_AXIS, _groups(structure), transform=GEO_AXIS not in plus,
                                  size=len(structure.leaf_paths))]
    for name, b in zip(structure.ordinals, structure.bins, strict=True):
        axes.append(privelet.Axis.ordinal(name, len(b), transform=name not in plus))
    return axes


def build(table: CensusTable, plus_axes: Sequence[str] = ()) -> tuple[np.ndarray, list[privelet.Axis],
                                                                     list[tuple[str, ...]]]:
    """``(x, axes, leaf_paths)``: the frequency matrix (leaves × bins…), its axes and leaf paths."""
    axes = build_axes(table.structure, plus_axes)
    return table.counts.astype(np.float64), axes, list(table.structure.leaf_paths)


def half_widths(sd: Any) -> Any:
    """The 95 % half-width of an area's total with this SD (a float or an array): ``sd·ln 20/√2``
    (:func:`dpcore.privacy.calibration.interval_half_width`, ``"laplace"``), the exact 95 % quantile
    of one Laplace draw, which covers a weighted sum of independent Laplace draws (every area's noise)
    at least as often (module docstring).  The noise of one coefficient is a discrete Laplace on a grid at
    least 1,024 steps finer than its scale (:mod:`dpcore.estimate.privelet`), so the continuous quantile
    is exact to within about 2·10⁻⁵ in coverage.

    >>> half_widths(np.array([1.0, 2.0])).round(4).tolist()
    [2.1183, 4.2366]
    """
    return interval_half_width("laplace", np.asarray(sd, dtype=np.float64))


def _level_vars(axes: list[privelet.Axis], epsilon: float, sensitivity: int) -> list[float]:
    """Variance of one area's total per level (root first), mean over the level's areas."""
    return [float(v) for v in privelet.level_variances(axes[0], epsilon, axes[1:], sensitivity=sensitivity)]


def _node_vars(axes: list[privelet.Axis], epsilon: float, sensitivity: int) -> list[np.ndarray]:
    """Exact variance of every area's total, per level (root first), in path order."""
    return [np.asarray(v, dtype=np.float64)
            for v in privelet.node_variances(axes[0], epsilon, axes[1:], sensitivity=sensitivity)]


@dataclass(frozen=True, eq=False)
class PriveletPlan:
    """The data-free part of a Privelet census release (Xiao, Wang & Gehrke, ICDE 2010, §4-§5):
    the axes, the noise magnitude λ and the SD of every area's total per level (root first).
    Built once by :func:`plan_census`; :func:`release_planned` releases from it."""

    structure: CensusStructure
    epsilon: float
    plus_axes: tuple[str, ...]
    sensitivity: int
    axes: tuple[privelet.Axis, ...]
    lam: float
    generalized_sensitivity: float
    #: root of the mean variance of one area's total, per level (root first)
    level_sd: tuple[float, ...]
    #: SD of every area's total, per level (root first), in path order
    node_sd: tuple[np.ndarray, ...]


def plan_census(structure: CensusStructure, epsilon: float, *, plus_axes: Sequence[str] = (),
                sensitivity: int = 1) -> PriveletPlan:
    """The data-free Privelet plan of a table with this (public) structure.

    ``plus_axes`` are left untransformed (Privelet+); unknown axes and a bad ε are refused here,
    before anything is spent.  The variances are exact (:func:`dpcore.estimate.privelet.level_variances`,
    :func:`dpcore.estimate.privelet.node_variances`).
    """
    budget.pure(epsilon)  # validates ε with a clear message
    plus = _check_plus(structure, plus_axes)
    axes = build_axes(structure, plus)
    var = _level_vars(axes, epsilon, sensitivity)
    nodes = _node_vars(axes, epsilon, sensitivity)
    return PriveletPlan(
        structure=structure, epsilon=float(epsilon), plus_axes=plus, sensitivity=int(sensitivity),
        axes=tuple(axes), lam=privelet.noise_magnitude(axes, epsilon, sensitivity=sensitivity),
        generalized_sensitivity=float(privelet.generalized_sensitivity(axes)),
        level_sd=tuple(float(np.sqrt(v)) for v in var), node_sd=tuple(np.sqrt(v) for v in nodes),
    )


def expected_error(structure: CensusStructure, epsilon: float, *, plus_axes: Sequence[str] = (),
                   sensitivity: int = 1) -> pd.DataFrame:
    """Data-free expected error per level: SD of one area's total and the ± 95 % half-width.

    Needs only the structure (levels, list of areas, bins), which must be public. Columns:
    ``level, n_areas, sd, ci95, sd_max``: ``sd`` is the root of the mean variance of the
    level's areas (:func:`dpcore.estimate.privelet.level_variances`; all equal when every parent of a
    level has the same fanout), ``ci95 = sd·ln 20/√2`` (:func:`half_widths`: the exact 95 % quantile
    of one Laplace draw, which covers every area's weighted sum of Laplace draws) and ``sd_max`` the
    largest SD of an area of the level.
    """
    return plan_frame(plan_census(structure, epsilon, plus_axes=plus_axes, sensitivity=sensitivity))


def plan_frame(p: PriveletPlan) -> pd.DataFrame:
    """:func:`expected_error`'s table from an already-built plan."""
    rows = []
    for d, name in enumerate(p.structure.level_names):
        sd = p.level_sd[d]
        rows.append({"level": name, "n_areas": len(p.structure.paths_at(d)), "sd": sd,
                     "ci95": float(half_widths(sd)),
                     "sd_max": float(p.node_sd[d].max())})
    return pd.DataFrame(rows)


def area_expected_error(structure: CensusStructure, epsilon: float, path: Sequence[str], *,
                        plus_axes: Sequence[str] = (), sensitivity: int = 1) -> float:
    """Exact SD of the noisy total of one area (its code path; ``()`` for the grand total)."""
    budget.pure(epsilon)
    axes = build_axes(structure, plus_axes)
    query: list[Any] = [structure.leaf_mask(path)]
    query += [np.ones(len(b), dtype=bool) for b in structure.bins]
    return float(np.sqrt(privelet.query_variance(axes, epsilon, query, sensitivity=sensitivity)))


# ---------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CensusRelease:
    """A Privelet census release: noisy tables per level and their expected errors (no truth)."""

    structure: CensusStructure
    epsilon: float
    sensitivity: int
    lam: float
    generalized_sensitivity: float
    plus_axes: tuple[str, ...]
    axes: tuple[dict[str, Any], ...]
    noisy: np.ndarray
    levels: dict[str, pd.DataFrame]
    level_sd: dict[str, float]
    release_id: str
    created: str

    @property
    def cost(self) -> budget.PrivacyCost:
        return budget.pure(self.epsilon)


def _axis_info(axis: privelet.Axis, structure: CensusStructure) -> dict[str, Any]:
    info: dict[str, Any] = {"name": axis.name, "kind": axis.kind, "size": int(axis.size),
                            "transform": bool(axis.transform)}
    if axis.name == GEO_AXIS:
        info["levels"] = list(structure.levels)
        info["areas_per_level"] = {n: len(structure.paths_at(d)) for d, n in enumerate(structure.level_names)}
        info["area_list"] = ("public list given by the curator" if structure.public_areas
                             else "derived from the data (areas with no one are not released)")
        info["transform_name"] = "nominal wavelet" if axis.transform else "identity (Privelet+)"
    else:
        j = structure.ordinals.index(axis.name)
        info["bins"] = list(structure.bins[j])
        info["bins_source"] = structure.bins_origin()[axis.name]
        info["transform_name"] = "Haar wavelet" if axis.transform else "identity (Privelet+)"
    return info


def _level_tables(structure: CensusStructure, noisy: np.ndarray, names: Mapping[str, Mapping],
                  sds: Sequence[np.ndarray]) -> dict[str, pd.DataFrame]:
    """Per-level tables, parents summed from their children (consistent by construction); the
    intervals from :func:`half_widths`."""
    labels = structure.bin_labels()
    values = noisy.reshape(noisy.shape[0], -1)
    paths = list(structure.leaf_paths)
    per_depth: dict[int, tuple[list[tuple[str, ...]], np.ndarray]] = {structure.depth: (paths, values)}
    for d in range(structure.depth - 1, -1, -1):
        child_paths, child_vals = per_depth[d + 1]
        starts, parents = [], []
        for i, p in enumerate(child_paths):
            if not parents or p[:d] != parents[-1]:
                parents.append(p[:d])
                starts.append(i)
        per_depth[d] = (parents, np.add.reduceat(child_vals, np.asarray(starts), axis=0))
    out: dict[str, pd.DataFrame] = {}
    for d, name in enumerate(structure.level_names):
        ps, vals = per_depth[d]
        cols: dict[str, Any] = {}
        for k in range(d):
            lv = structure.levels[k]
            cols[lv] = [p[k] for p in ps]
            if lv in names:
                cols[f"{lv}_name"] = [names[lv].get(p[: k + 1], "") for p in ps]
        total = vals.sum(axis=1)
        cols["noisy_count"] = total
        if labels:
            for j, lab in enumerate(labels):
                cols[lab] = vals[:, j].copy()  # the leaves' values are the release's noisy matrix: a copy
        sd = np.broadcast_to(np.asarray(sds[d], dtype=np.float64), (len(ps),)).copy()
        cols["sd"] = sd
        half = half_widths(sd)
        cols["ci95_low"] = total - half
        cols["ci95_high"] = total + half
        # every array above is this table's own (made here): no second copy of each
        out[name] = pd.DataFrame(cols, copy=False)
    return out


def release_census(table: CensusTable, epsilon: float, noise: NoiseSource, *, plus_axes: Sequence[str] = (),
                   sensitivity: int = 1) -> CensusRelease:
    """Release a census table with Privelet (Privelet+ for ``plus_axes``); charges nothing.

    The noisy leaf matrix comes from :func:`dpcore.estimate.privelet.release` (ε-DP); every level's
    table is a sum of noisy leaves (post-processing), with the analytic SD of one area's
    total from :func:`dpcore.estimate.privelet.level_variances`.  A release that is published goes
    through :func:`dpcore.pipeline.release` (the catalogue's plan), which charges the session first.
    """
    return release_planned(table, plan_census(table.structure, epsilon, plus_axes=plus_axes,
                                              sensitivity=sensitivity), noise)


def release_planned(table: CensusTable, p: PriveletPlan, noise: NoiseSource) -> CensusRelease:
    """:func:`release_census` from an already-built plan (the caller has charged ``p.epsilon``).

    Only the noise is drawn here (:func:`dpcore.estimate.privelet.release`, Xiao, Wang & Gehrke 2010,
    §4); the axes and the SDs are the plan's.
    """
    s = table.structure
    if s is not p.structure and s != p.structure:
        raise ParameterError("The table has another structure (levels, areas, bins) than the plan was made for.")
    rel = privelet.release(table.counts.astype(np.float64), list(p.axes), p.epsilon, noise,
                           sensitivity=p.sensitivity)
    levels = _level_tables(s, np.asarray(rel.noisy, dtype=np.float64), table.names, list(p.node_sd))
    return CensusRelease(
        structure=s,
        epsilon=p.epsilon,
        sensitivity=p.sensitivity,
        lam=float(rel.lam),
        generalized_sensitivity=p.generalized_sensitivity,
        plus_axes=p.plus_axes,
        axes=tuple(_axis_info(a, s) for a in p.axes),
        noisy=np.asarray(rel.noisy, dtype=np.float64),
        levels=levels,
        level_sd=dict(zip(s.level_names, p.level_sd, strict=True)),
        release_id=new_release_id(),  # random: an id derived from the noisy values and the time told both
        created=created_now(),
    )


# ---------------------------------------------------------------------------------------------
# the mechanism
# ---------------------------------------------------------------------------------------------


def check_structure(table: CensusTable, plan: Plan) -> None:
    """Refuse a table whose structure (levels, areas, bins) is not the plan's."""
    if table.structure is not plan.domain and table.structure != plan.domain:
        raise ParameterError("The table has another structure (levels, areas, bins) than the plan was made for.")


class CensusPrivelet(Mechanism):
    """Privelet (Privelet+ for ``plus_axes``) over a census table: every area of every level.

    Privacy: pure ε-DP only; one unit of privacy added or removed changes one cell of the table
    by its contribution Δ; λ is set from ε, Δ and the transform's generalised sensitivity ρ
    (Xiao, Wang & Gehrke 2010, Sec. V–VI).  The whole ε is spent once.
    """

    kind = "census"
    name = "privelet"
    title = "Privelet (wavelet noise, every area of every level)"
    summary = ("Wavelet coefficients of the table get Laplace noise; every area's total of every level is the sum "
               "of its noisy finest areas, so levels add up.")
    when_to_use = "Area totals of every level, and ordinal attributes (age bands) split into ranges, under pure ε-DP."
    reference = "X. Xiao, G. Wang, J. Gehrke, Differential Privacy via Wavelet Transforms, ICDE 2010"
    definitions = ("pure",)
    params = (Param("plus_axes", "Axes without transform (Privelet+)", tuple, (),
                    f"Axes noised directly instead of through the wavelet: '{GEO_AXIS}' or an attribute name."),)

    def _plan(self, domain: CensusStructure, cost: budget.PrivacyCost, params: dict[str, Any], unit: Unit,
              public: Mapping[str, Any]) -> Plan:
        if not isinstance(domain, CensusStructure):
            raise ParameterError(f"A census plan needs the public structure (got {type(domain).__name__}).")
        if unit.neighbour != "add_remove":
            raise ParameterError("Privelet protects one unit added or removed; choose the add/remove neighbours.")
        inner = plan_census(domain, cost.value, plus_axes=params["plus_axes"],
                            sensitivity=unit.contribution)  # refuses unknown axes
        table = plan_frame(inner)
        plus, lam, gs = inner.plus_axes, inner.lam, inner.generalized_sensitivity
        rows = tuple(
            PlanRow(level=d, name=str(r.level), cost=None, noise="laplace_on_grid", scale=lam, sensitivity=gs,
                    n_counts=int(r.n_areas), sd=float(r.sd), ci95=float(r.ci95),
                    mean_abs=math.sqrt(2 / math.pi) * float(r.sd), max_abs=None,
                    note="the whole ε is spent once on the wavelet coefficients; every level is a sum of noisy "
                         "finest areas (mean error: normal approximation)",
                    details={"sd_max": float(r.sd_max)})
            for d, r in enumerate(table.itertuples(index=False))
        )
        label = "census release (Privelet" + ("+" if plus else "") + ")"
        extra = {"plus_axes": list(plus), "levels": list(domain.levels)}
        return Plan(self.kind, self.name, params, cost, unit, rows, inner=inner, label=label, extra=extra,
                    domain=domain, public=dict(public))

    def check_data(self, plan: Plan, aggregate: CensusTable) -> None:
        """The table has the plan's structure (levels, areas, bins); run before the charge.  The
        release has no other refusal that depends on the counts: the exact wavelet coefficients
        are Python integers when they outgrow float64 (:mod:`dpcore.estimate.privelet_exact`)."""
        self.check_plan(plan)
        check_structure(aggregate, plan)

    def release(self, plan: Plan, aggregate: CensusTable, noise: NoiseSource, *, checked: bool = False) -> KindRelease:
        if not checked:  # a direct caller: the pipeline ran it before the charge and says so
            self.check_data(plan, aggregate)
        inner = release_planned(aggregate, plan.inner, noise)  # no ledger: the session charges
        return KindRelease.of(plan, inner, census_record, census_files)


# ---------------------------------------------------------------------------------------------
# exports
# ---------------------------------------------------------------------------------------------


def census_frame(release: CensusRelease) -> pd.DataFrame:
    """All levels in one table: ``level``, code columns, names, noisy counts, sd, 95 % interval."""
    # noise_sd: the common name of the interval columns (dpcore.core.record.INTERVAL_COLUMNS)
    frames = [df.assign(level=name, noise_sd=df["sd"]) for name, df in release.levels.items()]
    df = pd.concat(frames, ignore_index=True, sort=False)
    front = ["level", *release.structure.levels]
    names = [c for c in df.columns if c.endswith("_name") and c not in front]
    rest = [c for c in df.columns if c not in front and c not in names]
    df = df[front + names + rest]
    for c in release.structure.levels + tuple(names):
        df[c] = df[c].fillna("")
    return df


def census_csv(release: CensusRelease) -> bytes:
    """``release.csv``: one row per area of every level (the total first)."""
    return csv_bytes(census_frame(release), lambda d: d.to_csv(index=False).encode("utf-8"))


#: The 95 % interval of every area in words (:func:`half_widths`): the record's and the app's.
CI95_TEXT = "noisy_count ± sd·ln 20/√2 (≈ 2.12·sd, the exact 95 % quantile of one Laplace draw)"
#: The record's words for release.csv's columns.
COLUMNS_TEXT = ("noisy_count is the released total of an area (sum of its noisy leaves); "
                f"ci95_low/high = {CI95_TEXT}: an area's noise is a weighted sum of a few Laplace draws, which this interval covers in "
                "at least 95 % of releases, where the normal ± 1.96·sd covers less than 95 % (93.7 % for one draw)")


def census_body(release: CensusRelease) -> dict[str, Any]:
    """What only a Privelet census record has: the parameters, the levels and the outputs."""
    return {
        "params": {
            "epsilon": release.epsilon,
            "sensitivity": release.sensitivity,
            "generalized_sensitivity": release.generalized_sensitivity,
            "lambda": release.lam,
            "axes": [dict(a) for a in release.axes],
        },
        "levels": [
            {"level": name, "n_areas": int(len(release.levels[name])), "sd": release.level_sd[name],
             "ci95_half_width": float(half_widths(release.level_sd[name]))}
            for name in release.structure.level_names
        ],
        "outputs": {
            "files": ["release.csv", "release.json"],
            "columns": COLUMNS_TEXT,
        },
    }


def census_record(release: CensusRelease, ledger: Ledger | None = None, *, plan: Plan | None = None) -> dict[str, Any]:
    """The JSON record of how the release was made (no true value, no file name): the one
    envelope (:func:`dpcore.core.record.build_record`) around :func:`census_body`; ``plan`` is
    the core plan the release was made from (its rows go into the record)."""
    s = release.structure
    return build_record(
        schema="dpcore-census-release/1", kind="census", release_id=release.release_id, created=release.created,
        mechanism={"name": "privelet", "title": "Privelet+" if release.plus_axes else "Privelet",
                   "reference": CensusPrivelet.reference, "plus_axes": list(release.plus_axes)},
        cost=release.cost, unit_of_privacy=unit_of_privacy_words(plan.unit if plan is not None else None,
                                                                 "one person (one unit of count)"),
        privacy={
            "neighbouring_relation": "add or remove one person"
            + ("" if release.sensitivity == 1 else f" (counts change by at most {release.sensitivity} in L1)"),
            "sensitivity_l1": release.sensitivity,
            "composition": "the whole epsilon is spent by this one release",
        },
        body=census_body(release),
        notes=[
            "All counts are noisy and unrounded; negative values are kept so sums stay unbiased.",
            "A parent's noisy total is the sum of its children's (consistent by construction).",
            "Expected errors are analytic: they come from the mechanism and the public structure, not the data.",
            "The list of areas " + ("comes from a public list." if s.public_areas else
                                    "was derived from the data: areas with no one are missing from this release."),
            *[f"The values of '{o}' come from {src}." for o, src in s.bins_origin().items()],
        ],
        ledger=ledger, plan=plan.rows_dict() if plan is not None else None,
    )


def validate_census_record(record: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if the record breaks the envelope or the Privelet census body schema."""
    validate_record(record)


def census_json(release: CensusRelease, ledger: Ledger | None = None, *, plan: Plan | None = None) -> bytes:
    return orjson.dumps(census_record(release, ledger, plan=plan),
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def census_files(release: CensusRelease, ledger: Ledger | None = None, *,
                 plan: Plan | None = None) -> dict[str, bytes]:
    """The release's files, name -> bytes: ``release.csv`` and ``release.json`` (the record,
    ``ledger`` as of the charge, the rows of the core ``plan``).  Made once, when the release is made."""
    return {"release.csv": census_csv(release), "release.json": census_json(release, ledger, plan=plan)}
