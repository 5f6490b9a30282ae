"""Origin/destination (O/D) releases on a public area hierarchy: InfTDA and its baselines.

Spec: ``shared/specs/topdown-od.md`` (paper: Boninsegna & Silvestri, *Differentially Private
Release of Hierarchical Origin/Destination Data with a TopDown Approach*).

The trips (one per person, or up to ``m`` per person) are counted per pair (origin area,
destination area) at the finest level ``g`` of a **public** hierarchy.  The O/D counts are
rewritten as a tree of depth ``T = 2g`` (spec §1.4).  In the *destination tree* a node
``(u_{k−1}, v_{k−1})`` first gets the children ``(u_{k−1}, v_k)`` for every sub-area ``v_k`` of
``v_{k−1}`` (a cross-level table), and each of those the children ``(u_k, v_k)`` for every
sub-area ``u_k`` of ``u_{k−1}`` (the O/D matrix at level k).  The *origin tree* refines the
origin first.  Every tree level partitions the trips, so each is a histogram with the same
sensitivity.

Mechanisms
----------
* ``inftda`` — InfTDA (spec §2.2): from the root down, the children of every **surviving** node
  (all of them, from the public list, zeros included) get discrete Gaussian (or discrete
  Laplace) noise and are projected by IntOpt onto non-negative integers summing to the parent's
  released value, minimising the largest change (closed form, one lexsort per level:
  :func:`dpcore.estimate.topdown_opt.intopt_segments`).  Children released as 0 are dropped with their
  whole subtree (post-processing: lazy noise equals noising the whole level and discarding).
* ``tda_l2`` — the same walk with the exact integer least-squares projection (scaled simplex
  plus controlled rounding, :func:`dpcore.estimate.topdown_opt.l2_round_segments`), spec §2.7.
* ``tda_linf_milp`` — baseline (§2.7–2.8): the same walk and the same L∞ objective, solved by a
  black-box MILP (scipy/HiGHS) per node, which returns an arbitrary optimal vertex instead of
  IntOpt's sparse one (the paper's TDA_ℓ∞).  One solver call per surviving node, so it is
  refused above :data:`MILP_MAX_SUBPROBLEMS` calls per level; for comparisons on small data.
* ``vanilla_gauss`` — baseline (§2.8): the whole budget on every cell of the full finest O/D
  domain; coarser levels are sums (unbiased, may be negative; exact zeros are dropped).  Needs
  the full domain in memory, so it is refused above :data:`VANILLA_MAX_CELLS`.
* ``sh`` — baseline (§2.1, §2.8): the stability-based histogram, (ε, δ)-DP: discrete Laplace
  on the *observed* finest pairs only and a threshold that hides pairs of a single person.
  Biased; no false positives.  Its (ε, δ) cost cannot be added to a pure-ε or zCDP ledger, so
  it is for comparisons (benchmarks, the library) only.

Privacy (spec §1.5, §2.2–2.3, §8.1 item 15)
-------------------------------------------
Neighbours are ``"bounded"`` (replace one person: the total is public and exact when every
person has exactly one trip) or ``"unbounded"`` (add or remove one person: the total is noised).
With up to ``m`` trips per person the L2 sensitivity is ``√2·m`` (bounded) or ``m``
(unbounded) at every level above the leaves, and at the leaves ``√(2m)`` / ``√m`` when a person's
trips are distinct pairs (repeats allowed: as above the leaves); the L1 sensitivity is ``2m`` /
``m``.  With ``m > 1`` the total is not invariant even under bounded neighbours (pitfall 3), so
the root is measured (sensitivity ``m``).  The budget is split over the measured levels; a level
in which every node has a single child ("copy level") is not measured and gets no share.  σ is
computed from each level's share and sensitivity (never hard-coded ``T/ρ``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpcore.areas import tree_mechanisms
from dpcore.areas.hierarchy import Hierarchy, _code_frame, _plural, _rows, code_text
from dpcore.data.engines import base as _engine_rules
from dpcore.errors import InputError, ParameterError
from dpcore.estimate import topdown_opt
from dpcore.privacy import budget
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource

__all__ = [
    "MECHANISMS",
    "MILP_MAX_SUBPROBLEMS",
    "VANILLA_MAX_CELLS",
    "ODCounts",
    "ODLevelPlan",
    "ODMechanismInfo",
    "ODPlan",
    "ODRelease",
    "empirical_errors",
    "get",
    "hierarchy_from_prefixes",
    "leaf_lookup",
    "match_leaves",
    "plan",
    "release",
    "tree_levels",
]

Neighbour = Literal["bounded", "unbounded"]
Orientation = Literal["destination", "origin"]

#: Largest total number of trips: counts are read as floats, which are exact up to 2⁵³.
MAX_COUNT = 2**53
#: Largest full finest O/D domain (origin areas × destination areas) VanillaGauss will noise: the
#: US county × county domain (10.4 M) peaks at about 1.7 GB, so 12 M keeps a release near 2 GB.
VANILLA_MAX_CELLS = 12_000_000
#: Most MILP calls per tree level the black-box TDA_ℓ∞ baseline will make.
MILP_MAX_SUBPROBLEMS = 20_000


@dataclass(frozen=True)
class ODMechanismInfo:
    """What the app and the CLI say about an O/D mechanism."""

    name: str
    title: str
    description: str
    when: str
    consistent: bool
    nonnegative: bool
    ledger: bool
    paper: str


MECHANISMS: dict[str, ODMechanismInfo] = {
    m.name: m
    for m in (
        ODMechanismInfo(
            "inftda", "InfTDA (TopDown, L∞ / IntOpt)",
            "From the total down, the flows out of every released area pair are split one level finer "
            "(destination, then origin); all possible sub-pairs get noise, then IntOpt finds the closest "
            "non-negative whole numbers adding up to the parent (smallest largest change). Pairs "
            "released as 0 are dropped with everything below them.",
            "The default: consistent, non-negative, whole-number O/D tables at every level, few "
            "spurious flows, and a proven bound on the largest error per level.",
            True, True, True, "Boninsegna & Silvestri (topdown-od.md §2.2, §2.6)"),
        ODMechanismInfo(
            "tda_l2", "TopDown L2 (least squares)",
            "The same TopDown walk with the least-squares projection (non-negative, adding up to the "
            "parent) and exact controlled rounding, as the US Census Bureau's TopDown does.",
            "Comparing with the Census Bureau's approach; about the same accuracy as InfTDA, more "
            "spurious flows.",
            True, True, True, "topdown-od.md §2.7"),
        ODMechanismInfo(
            "tda_linf_milp", "TopDown L∞ with a generic MILP solver (baseline)",
            "The InfTDA walk with the same objective solved per area pair by a black-box MILP "
            "(HiGHS), which returns an arbitrary optimal answer rather than the sparse one.",
            "Comparisons on small data: it shows why IntOpt's choice among optimal answers matters "
            "(more spurious flows), and it is far slower.",
            True, True, True, "topdown-od.md §2.7 (TDA_ℓ∞)"),
        ODMechanismInfo(
            "vanilla_gauss", "Gaussian on every finest pair (baseline)",
            "The whole budget on every possible finest O/D pair (zeros included); coarser tables are "
            "sums. Unbiased but negative values are kept, and the error grows as one zooms out.",
            "Small domains where only the finest pairs matter.",
            True, False, True, "topdown-od.md §2.8 (VanillaGauss)"),
        ODMechanismInfo(
            "sh", "Stability histogram (baseline, (ε, δ)-DP)",
            "Noise on the observed finest pairs only; pairs below a threshold are suppressed. No "
            "spurious flows, but every suppressed flow is lost from the totals.",
            "Comparisons only: its (ε, δ) cost cannot be added to a pure-ε or zCDP budget ledger.",
            True, True, False, "Bun, Nissim & Stemmer; topdown-od.md §2.1"),
    )
}


def get(name: str) -> ODMechanismInfo:
    key = str(name).strip().lower().replace("-", "_")
    if key not in MECHANISMS:
        raise ParameterError(
            f"Unknown O/D mechanism '{name}'. Available: {', '.join(MECHANISMS)} "
            "(run 'python -m dpcore mechanisms' for details)."
        )
    return MECHANISMS[key]


# ---------------------------------------------------------------------------------------------
# public structure
# ---------------------------------------------------------------------------------------------


def hierarchy_from_prefixes(
    codes: Sequence[Any] | pd.Series,
    lengths: Sequence[int],
    names: Sequence[str] | None = None,
    *,
    source: str = "area list",
) -> Hierarchy:
    """A hierarchy whose levels are prefixes of one code (block ``440070101001000`` → state
    ``44``, county ``44007``, …).

    ``codes`` is the **public** list of finest areas (every area, zero-flow ones included).  The
    codes must all have the finest length; every level's codes are unique across the level.
    """
    lengths = [int(v) for v in lengths]
    if not lengths or any(b <= a for a, b in zip(lengths, lengths[1:], strict=False)) or lengths[0] < 1:
        raise ParameterError(
            f"Prefix lengths {lengths} must be increasing whole numbers, e.g. 2,5,11,12,15 for "
            "census block codes (state, county, tract, block group, block)."
        )
    names = [str(n) for n in names] if names is not None else [f"level{i + 1}" for i in range(len(lengths))]
    if len(names) != len(lengths):
        raise ParameterError(f"Give one level name per prefix length ({len(lengths)}), e.g. state,county.")
    cf = _code_frame(pd.DataFrame({"code": pd.Series(list(codes) if not isinstance(codes, pd.Series) else codes)}),
                     ["code"], "The area list")
    s = pd.Series(cf["code"].to_numpy(dtype=object)).astype(str)
    bad = (s.str.len() != lengths[-1]).to_numpy()
    if bad.any():
        ex = ", ".join(s[bad].head(3).tolist())
        raise InputError(
            f"{_plural(int(bad.sum()), 'code')} of the area list ({_rows(bad)}; e.g. {ex}) do not have "
            f"{lengths[-1]} characters, the finest prefix length. Read the codes as text (leading zeros "
            "kept) or fix the prefix lengths."
        )
    df = pd.DataFrame({n: s.str.slice(0, ln) for n, ln in zip(names, lengths, strict=True)})
    return Hierarchy.from_frame(df, names, codes="global", source=source)  # type: ignore[arg-type]


def match_leaves(h: Hierarchy, values: pd.Series | Sequence[Any]) -> np.ndarray:
    """Finest-area index of every value, ``-1`` where it is missing or not an area.

    A value may be the area's own code (when unique across the level), its joined path code
    (GEOID style) or its ``a/b/c`` label; whichever style matches the most values is used.
    Whole floats (``1.0``, as Parquet may store codes) become integer text; spaces are stripped.
    """
    return _match(h, _text(values).to_numpy(dtype=object))


def _match(h: Hierarchy, v: np.ndarray) -> np.ndarray:
    """:func:`match_leaves` on codes that are already clean text (object array)."""
    L = h.depth
    candidates = []
    if h.code_modes[-1] == "global":
        candidates.append(h.codes(L))
    candidates += [h.joined_codes(L), h.labels(L)]
    best: np.ndarray | None = None
    for cand in candidates:
        idx = pd.Index(cand)
        if not idx.is_unique:
            continue
        pos = idx.get_indexer(v)
        if best is None or (pos >= 0).sum() > (best >= 0).sum():
            best = pos
        if (pos >= 0).all():
            break
    assert best is not None  # labels are always unique
    return best.astype(np.int64)


def leaf_lookup(h: Hierarchy, values: pd.Series | Sequence[Any], what: str) -> np.ndarray:
    """:func:`match_leaves`, but missing codes and codes that are not in the public area list
    are an error naming the rows."""
    cf = _code_frame(pd.DataFrame({what: pd.Series(values).reset_index(drop=True)}), [what], "The trips")
    v = cf[what].to_numpy(dtype=object)
    best = _match(h, v)  # _code_frame has cleaned the codes already
    missing = best < 0
    if missing.any():
        ex = list(dict.fromkeys(v[missing].tolist()))[:3]
        raise InputError(
            f"{_plural(int(missing.sum()), 'row')} of the trips ({_rows(missing)}) have {'an' if what[:1] in 'aeiou' else 'a'} {what} that is not "
            f"a finest area ('{h.levels[-1]}') of the public hierarchy (e.g. {', '.join(map(str, ex))}). "
            "Fix the codes, drop those rows, or use a hierarchy that lists these areas."
        )
    return best.astype(np.int64)


def tree_levels(depth: int, orientation: Orientation = "destination") -> list[tuple[int, int]]:
    """``(origin depth, destination depth)`` of every O/D tree level 0..2g (spec §1.4)."""
    if orientation not in ("destination", "origin"):
        raise ParameterError("The tree orientation is 'destination' (refine destinations first) or 'origin'.")
    out = [(0, 0)]
    for k in range(1, depth + 1):
        out.append((k - 1, k) if orientation == "destination" else (k, k - 1))
        out.append((k, k))
    return out


def _group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys and the exact int64 sum of their values, zero sums dropped
    (``np.bincount`` would go through float64)."""
    if keys.size == 0:
        return keys.astype(np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    sums = np.add.reduceat(np.asarray(values, dtype=np.int64)[order], starts)
    uniq = k[starts]
    nz = sums != 0
    return uniq[nz], sums[nz]


def _ancestors(h: Hierarchy) -> list[np.ndarray]:
    """``anc[d][leaf]``: index at depth d of every finest area's ancestor (d = 0..L)."""
    anc = [np.arange(h.n_leaves, dtype=np.int64)]
    for d in range(h.depth - 1, -1, -1):
        anc.insert(0, h.parents[d][anc[0]])
    return anc


def _check_pair(origin: Hierarchy, destination: Hierarchy) -> None:
    for h in (origin, destination):
        bad = [lv for lv in h.levels if ">" in lv]
        if bad:
            raise ParameterError(
                f"The level name '{bad[0]}' contains '>', which O/D exports use between an origin and a "
                "destination level (state>county). Rename the level."
            )
    if origin.depth != destination.depth:
        raise ParameterError(
            f"The origin hierarchy has {origin.depth} levels and the destination hierarchy "
            f"{destination.depth}; they must have the same number of levels (add a copy level to the "
            "shorter one: each area its own single child)."
        )


def level_name(origin: Hierarchy, destination: Hierarchy, od: int, dd: int) -> str:
    """``"county"`` for an intra-level table, ``"state>county"`` (origin > destination) otherwise."""
    a, b = origin.level_names[od], destination.level_names[dd]
    return a if (od == dd and a == b) else f"{a}>{b}"


# ---------------------------------------------------------------------------------------------
# confidential counts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ODCounts:
    """Trip counts per finest (origin, destination) pair, sparse.  **Confidential.**

    ``origin``/``destination`` are finest-area indices into the two hierarchies, one entry per
    observed pair (sorted, unique), ``count`` > 0.  ``max_trips`` (m) and ``distinct`` describe
    the contribution bound the counts respect (m = 1: one trip per person).
    """

    origin_h: Hierarchy
    destination_h: Hierarchy
    origin: np.ndarray
    destination: np.ndarray
    count: np.ndarray
    max_trips: int = 1
    distinct: bool = True
    dropped_trips: int = 0
    #: Order-independent hash of the input rows (codes as text), before any cap: the same trips
    #: re-encoded, reordered, gzipped or given as (origin, destination, count) rows hash the same,
    #: so a budget keyed by it cannot be reset by re-uploading.  Confidential-data derived: use it
    #: as a key only, never publish it.
    fingerprint: str = ""

    @property
    def total(self) -> int:
        return int(self.count.sum())

    @property
    def n_pairs(self) -> int:
        return int(self.count.size)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        origin_h: Hierarchy,
        destination_h: Hierarchy | None = None,
        *,
        origin: str,
        destination: str,
        count: str | None = None,
        user: str | None = None,
        max_trips: int = 1,
        distinct: bool = True,
        noise: NoiseSource | None = None,
    ) -> ODCounts:
        """Counts from trip rows (one per trip, optional person id) or from ``count`` rows.

        With ``user``, every person keeps at most ``max_trips`` trips (chosen at random with
        the rule of :func:`dpcore.data.engines.base.cap_groups`; with ``distinct`` a person's repeated
        pairs count once first).  ``noise`` is not used (kept for callers).  Without it,
        every trip is taken to be a different person (``max_trips`` must be 1).
        """
        destination_h = destination_h or origin_h
        _check_pair(origin_h, destination_h)
        if not isinstance(df, pd.DataFrame) or df.empty:
            raise InputError("The trips table is empty. Give one row per trip, or origin, destination and count.")
        for col, what in ((origin, "origin"), (destination, "destination"), (count, "count"), (user, "person id")):
            if col is not None and col not in df.columns:
                raise InputError(
                    f"The trips table has no {what} column '{col}'. Its columns are: "
                    f"{', '.join(map(str, list(df.columns)[:20]))}."
                )
        m = int(max_trips)
        if m < 1:
            raise ParameterError("The most trips per person (m) must be at least 1.")
        if count is not None and user is not None:
            raise ParameterError("Give either a count column (aggregated pairs) or a person id (trip rows), not both.")
        if user is None and m != 1:
            raise ParameterError(
                "Without a person id every trip is a different person, so m must be 1. Name the person-id "
                "column to cap each person at m trips."
            )
        o = leaf_lookup(origin_h, df[origin], "origin")
        d = leaf_lookup(destination_h, df[destination], "destination")
        nd = destination_h.n_leaves
        key = o * nd + d
        dropped = 0
        if count is not None:
            c = pd.to_numeric(df[count], errors="coerce").to_numpy(dtype=float)
            bad = ~np.isfinite(c) | (c < 0) | (c != np.floor(c))
            if bad.any():
                raise InputError(
                    f"The count column '{count}' has {_plural(int(bad.sum()), 'value')} that are not whole "
                    f"numbers ≥ 0 ({_rows(bad)}). Fix or drop those rows."
                )
            too_big = c > MAX_COUNT
            if too_big.any() or float(c.sum()) > MAX_COUNT:
                raise InputError(
                    f"The count column '{count}' adds up to more than {MAX_COUNT:,} trips"
                    + (f" ({_rows(too_big)} alone exceed it)" if too_big.any() else "")
                    + ". Counts that large cannot be added exactly; check the column (is it really a count?)."
                )
            w = c.astype(np.int64)
        else:
            w = np.ones(len(df), dtype=np.int64)
            if user is not None:
                uid = _engine_rules.canonical_id(df[user])
                bad = pd.isna(uid)
                if bad.any():
                    raise InputError(f"The person id column '{user}' is empty in {_rows(bad)}. Fill it or drop those rows.")
                # the engines' rule (dpcore.data.engines.base.cap_groups): a person keeps the m trips
                # with the smallest md5(person, origin, destination); with ``distinct`` a repeated
                # pair counts once.  Order independent, so DuckDB and Spark keep the same trips.
                frame = pd.DataFrame({"u": uid, "o": _text(df[origin]).to_numpy(object),
                                      "d": _text(df[destination]).to_numpy(object)})
                kept = _engine_rules.cap_groups(frame, ["o", "d"], m, bool(distinct))
                ok = leaf_lookup(origin_h, kept["o"], "origin")
                dk = leaf_lookup(destination_h, kept["d"], "destination")
                dropped = int(len(df) - kept["count"].sum())
                key = ok * nd + dk
                w = kept["count"].to_numpy(dtype=np.int64)
        uniq, tot = _group_sum(key, w)
        # before the cap (w is then all ones): the budget belongs to the trips, not to one sample
        fp = _trips_fingerprint(df[origin], df[destination], w if count is not None else None)
        return cls(origin_h, destination_h, (uniq // nd).astype(np.int64), (uniq % nd).astype(np.int64),
                   tot, m, bool(distinct), dropped, fp)

    @classmethod
    def from_code_counts(
        cls,
        cc: Any,
        origin_h: Hierarchy,
        destination_h: Hierarchy | None = None,
        *,
        max_trips: int = 1,
        distinct: bool = True,
    ) -> ODCounts:
        """Counts from an engine's :class:`~dpcore.data.engines.base.CodeCounts` over (origin,
        destination) codes: the same result as :meth:`from_frame` on the raw rows (the engines
        apply the same per-person cap), for inputs too large for memory."""
        destination_h = destination_h or origin_h
        _check_pair(origin_h, destination_h)
        ko, kd = cc.keys
        f = cc.frame
        if f.empty:
            raise InputError("The trips table is empty. Give one row per trip, or origin, destination and count.")
        if float(f["count_all"].sum()) > MAX_COUNT:
            raise InputError(f"The trips add up to more than {MAX_COUNT:,}. Counts that large cannot be added exactly; "
                             "check the count column (is it really a count?).")
        o = leaf_lookup(origin_h, f[ko], "origin")
        d = leaf_lookup(destination_h, f[kd], "destination")
        nd = destination_h.n_leaves
        uniq, tot = _group_sum(o * nd + d, f["count"].to_numpy(dtype=np.int64))
        fp = _trips_fingerprint(f[ko], f[kd], f["count_all"].to_numpy(dtype=np.int64))
        return cls(origin_h, destination_h, (uniq // nd).astype(np.int64), (uniq % nd).astype(np.int64),
                   tot, int(max_trips), bool(distinct), int(cc.n_capped), fp)

    def level(self, od: int, dd: int) -> tuple[np.ndarray, np.ndarray]:
        """True counts at origin depth ``od`` × destination depth ``dd``: (sorted keys, counts),
        key = origin index × (areas at dd) + destination index; only positive pairs."""
        cache = self.__dict__.setdefault("_level_cache", {})
        if (od, dd) not in cache:
            anc_o = self.__dict__.setdefault("_anc_o", _ancestors(self.origin_h))
            anc_d = self.__dict__.setdefault("_anc_d", _ancestors(self.destination_h))
            n_d = self.destination_h.sizes[dd]
            key = anc_o[od][self.origin] * n_d + anc_d[dd][self.destination]
            cache[(od, dd)] = _group_sum(key, self.count)
        return cache[(od, dd)]

    def lookup(self, od: int, dd: int, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        """True counts of the pairs ``(o[i], d[i])`` (0 where nobody travels)."""
        keys, c = self.level(od, dd)
        q = o * self.destination_h.sizes[dd] + d
        if keys.size == 0:
            return np.zeros(q.size, dtype=np.int64)
        pos = np.searchsorted(keys, q)
        pos_c = np.minimum(pos, keys.size - 1)
        return np.where(keys[pos_c] == q, c[pos_c], 0)


def _text(values: Any) -> pd.Series:
    return code_text(values).fillna("")


def _trips_fingerprint(origin: Any, destination: Any, count: np.ndarray | None) -> str:
    """Hash of the multiset of trips: trips per (origin, destination) pair, codes as text.

    Person ids are left out on purpose: the same trips loaded with or without the person column
    (or with renamed ids) are the same people's data and must draw on one budget.
    """
    frame = pd.DataFrame({"o": _text(origin), "d": _text(destination)})
    frame["n"] = np.ones(len(frame), dtype=np.int64) if count is None else np.asarray(count, np.int64)
    agg = frame.groupby(["o", "d"], sort=False)["n"].sum()
    agg = agg[agg > 0].reset_index()
    rows = np.sort(pd.util.hash_pandas_object(agg, index=False).to_numpy())
    return hashlib.sha256(b"od-trips/1" + rows.tobytes()).hexdigest()[:20]


# ---------------------------------------------------------------------------------------------
# plan: budget, noise and analytic errors, before the data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ODLevelPlan:
    """One tree level: its tables, budget, noise and expected error (all data-free)."""

    level: int
    name: str
    origin_depth: int
    destination_depth: int
    origin_level: str
    destination_level: str
    kind: str  # "total", "intra" or "cross"
    pairs: int  # full public domain size of the level
    branching: float  # mean number of children per node of the level above (1 = copy level)
    measured: bool
    share: float
    noise: str | None
    scale: float
    l1_sensitivity: float
    l2_sensitivity: float
    noise_sd: float
    sd: float  # RMSE per cell (approximation, spec §6.2 item 3)
    mean_abs: float
    max_abs: float  # typical maximum absolute error over the level
    bound: float  # guaranteed max-error bound with probability 95 % (L∞ only; NaN otherwise)
    unreliable_below: float  # flows below this are likely noise (≈ 2σ, spec §6.2 item 7)
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True, eq=False)
class ODPlan:
    """The data-free description of an O/D release (safe to show and publish)."""

    mechanism: str
    cost: PrivacyCost | None  # None for 'sh' ((ε, δ)-DP: see ``approx``)
    approx: tuple[float, float] | None
    neighbour: str
    max_trips: int
    distinct: bool
    orientation: str
    split: str
    split_weights: tuple[float, ...]
    order: str
    tiebreak: str
    levels: tuple[ODLevelPlan, ...]
    scales: tuple[Any, ...] = field(repr=False)
    sh_threshold: float | None = None

    @property
    def total_public(self) -> bool:
        return self.neighbour == "bounded" and self.max_trips == 1 and self.mechanism in (
            "inftda", "tda_l2", "tda_linf_milp")

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "cost": self.cost.to_dict() if self.cost is not None else None,
            "approx_dp": ({"epsilon": self.approx[0], "delta": self.approx[1]} if self.approx else None),
            "neighbour": self.neighbour, "max_trips": self.max_trips, "distinct": self.distinct,
            "orientation": self.orientation, "split": self.split, "split_weights": list(self.split_weights),
            "zeroing_order": self.order, "tiebreak": self.tiebreak, "total_public": self.total_public,
            "sh_threshold": self.sh_threshold,
            "levels": [lv.to_dict() for lv in self.levels],
        }


def _sens(neighbour: str, m: int, distinct: bool, leaf: bool) -> tuple[float, float]:
    """(L1, L2) sensitivity of one tree level (spec §1.5 with the m > 1 correction)."""
    if neighbour == "bounded":
        l1 = 2.0 * m
        l2 = math.sqrt(2.0 * m) if (leaf and distinct) else math.sqrt(2.0) * m
    else:
        l1 = float(m)
        l2 = math.sqrt(m) if (leaf and distinct) else float(m)
    return l1, l2


def _branching(origin: Hierarchy, destination: Hierarchy, lv: list[tuple[int, int]]) -> list[float]:
    """Mean number of children per node of the level above (1.0 for the root)."""
    out = [1.0]
    for (po, pd_), (o, d) in zip(lv, lv[1:], strict=False):
        if o > po:
            out.append(origin.sizes[o] / origin.sizes[po])
        else:
            out.append(destination.sizes[d] / destination.sizes[pd_])
    return out


def _copy_level(origin: Hierarchy, destination: Hierarchy, lv: list[tuple[int, int]], t: int) -> bool:
    (po, pd_), (o, _d) = lv[t - 1], lv[t]
    h, depth = (origin, po) if o > po else (destination, pd_)
    return bool((h.n_children(depth) == 1).all())


def _check_options(neighbour: str, order: str, tiebreak: str, max_trips: int) -> None:
    if neighbour not in ("bounded", "unbounded"):
        raise ParameterError("Neighbours are 'bounded' (replace one person; total public) or 'unbounded' "
                             "(add or remove one person).")
    if order not in ("ascending", "descending"):
        raise ParameterError("The zeroing order is 'ascending' (fewer spurious flows) or 'descending' "
                             "(fewer missed flows).")
    if tiebreak not in ("random", "index"):
        raise ParameterError("Ties are broken 'random' (no area favoured) or by 'index'.")
    if int(max_trips) < 1:
        raise ParameterError("The most trips per person (m) must be at least 1.")


def plan(
    origin: Hierarchy,
    destination: Hierarchy | None,
    mechanism: str,
    cost: PrivacyCost | None,
    *,
    neighbour: Neighbour = "bounded",
    max_trips: int = 1,
    distinct: bool = True,
    orientation: Orientation = "destination",
    split: str = "uniform",
    weights: Sequence[float] | None = None,
    order: str = "ascending",
    tiebreak: str = "random",
    approx: tuple[float, float] | None = None,
    beta: float = 0.05,
) -> ODPlan:
    """Budget split, noise and analytic errors per tree level, before any data is touched.

    ``cost`` is ρ-zCDP (discrete Gaussian; the paper) or pure ε (discrete Laplace; our
    extension).  For ``sh`` give ``approx=(ε, δ)`` and no cost.  The split runs over the
    measured levels (the root only when the total is not public; copy levels never), top first;
    ``weights`` are used with ``split="custom"``.

    Estimates (spec §6.2; data-free, publishable): per-node noise SD σ_ℓ; the TopDown RMSE
    recursion ``V_ℓ = σ_ℓ²(1 − 1/b_ℓ) + V_{ℓ−1}/b_ℓ²`` with ``b_ℓ`` the mean number of children;
    the typical maximum ``√V_ℓ·√(2 ln N_ℓ)`` over the ``N_ℓ`` possible pairs (Laplace tails under
    pure ε); the guaranteed bound ``B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β))`` (L∞ only, zCDP; pure
    ε uses the Laplace tail ``2 Σ t_κ ln(2ℓN_κ/β)``); and the reliability threshold 2σ_ℓ.
    """
    info = get(mechanism)
    destination = destination or origin
    _check_pair(origin, destination)
    _check_options(neighbour, order, tiebreak, max_trips)
    m = int(max_trips)
    g = origin.depth
    lv = tree_levels(g, orientation)
    T = len(lv) - 1
    b = _branching(origin, destination, lv)
    pairs = [origin.sizes[o] * destination.sizes[d] for o, d in lv]
    names = [level_name(origin, destination, o, d) for o, d in lv]
    kinds = ["total"] + ["intra" if o == d else "cross" for o, d in lv[1:]]

    def lp(t: int, **kw: Any) -> ODLevelPlan:
        o, d = lv[t]
        base = dict(level=t, name=names[t], origin_depth=o, destination_depth=d,
                    origin_level=origin.level_names[o], destination_level=destination.level_names[d],
                    kind=kinds[t], pairs=pairs[t], branching=b[t])
        base.update(kw)
        return ODLevelPlan(**base)

    if info.name == "sh":
        if cost is not None or approx is None:
            raise ParameterError("The stability histogram is (ε, δ)-DP: give approx=(ε, δ), not a pure/zCDP cost.")
        eps, delta = float(approx[0]), float(approx[1])
        if not (eps > 0 and math.isfinite(eps)) or not (0 < delta < 1):
            raise ParameterError("The stability histogram needs ε > 0 and 0 < δ < 1.")
        if m != 1:
            raise ParameterError("The stability histogram baseline supports one trip per person only.")
        l1 = 2.0 if neighbour == "bounded" else 1.0
        k_cells = 2 if neighbour == "bounded" else 1
        scale = budget.laplace_scale_for_epsilon(eps, l1)
        # a pair of one person survives with P(Z ≥ τ − 1) ≤ exp(−(τ − 1)/t); k such pairs ≤ δ
        tau = 1.0 + float(scale) * math.log(k_cells / delta)
        sd = math.sqrt(_noise.discrete_laplace_variance(scale))
        levels = [lp(t, measured=(t == T), share=eps if t == T else 0.0,
                     noise="discrete_laplace" if t == T else None, scale=float(scale) if t == T else 0.0,
                     l1_sensitivity=l1 if t == T else 0.0, l2_sensitivity=0.0,
                     noise_sd=sd if t == T else 0.0, sd=math.nan, mean_abs=math.nan, max_abs=math.nan,
                     bound=math.nan, unreliable_below=tau,
                     basis="data-dependent: suppressed flows are lost from every sum (biased)")
                  for t in range(T + 1)]
        return ODPlan(info.name, None, (eps, delta), neighbour, m, True, orientation, "finest only", (),
                      order, tiebreak, tuple(levels), tuple([None] * T + [scale]), tau)

    if not isinstance(cost, PrivacyCost):
        raise ParameterError("The cost must be a PrivacyCost: ρ-zCDP (discrete Gaussian) or pure ε (discrete Laplace).")
    if approx is not None:
        raise ParameterError(f"{info.title} takes a pure-ε or zCDP cost, not (ε, δ); convert (ε, δ) to ρ first.")

    if info.name == "vanilla_gauss":
        cells = origin.n_leaves * destination.n_leaves
        if cells > VANILLA_MAX_CELLS:
            raise ParameterError(
                f"VanillaGauss noises every possible finest pair: {origin.n_leaves:,} × {destination.n_leaves:,} = "
                f"{cells:,} cells, more than {VANILLA_MAX_CELLS:,}. Use InfTDA (its work follows the released "
                "flows), or a coarser finest level."
            )
        measured = [t == T for t in range(T + 1)]
    else:
        root_measured = not (neighbour == "bounded" and m == 1)
        measured = [root_measured] + [not _copy_level(origin, destination, lv, t) for t in range(1, T + 1)]
    n_meas = sum(measured)
    if n_meas == 0:
        raise ParameterError(
            "Nothing to measure: every area of this hierarchy has a single sub-area and the total is public, "
            "so every O/D table equals the total. Use a hierarchy with more than one finest area."
        )
    if info.name == "tda_linf_milp":  # data-free: one solver call per (possible) parent pair
        worst = max((pairs[t - 1] for t in range(1, T + 1) if measured[t]), default=0)
        if worst > MILP_MAX_SUBPROBLEMS:
            raise ParameterError(
                f"The MILP baseline could need {worst:,} solver calls at one level (limit {MILP_MAX_SUBPROBLEMS:,}). "
                "Use InfTDA, which solves the same problem exactly in closed form, or a smaller hierarchy."
            )
    if split == "custom":
        if weights is None or len(list(weights)) != n_meas:
            nm = [names[t] for t in range(T + 1) if measured[t]]
            raise ParameterError(
                f"A custom split needs {n_meas} weights, one per measured level ({', '.join(nm)}), top first, "
                "e.g. " + ",".join(["1"] * n_meas) + "."
            )
    shares_m = budget.split(cost.value, n_meas, split, weights=weights) if split in (
        "uniform", "geometric", "custom") else None
    if shares_m is None:
        raise ParameterError("The budget split is 'uniform' (the paper), 'geometric' (finer levels get more) or 'custom'.")
    it = iter(shares_m)
    shares = [next(it) if mm else 0.0 for mm in measured]

    scales: list[Any] = []
    var: list[float] = []
    noises: list[str | None] = []
    sens: list[tuple[float, float]] = []
    for t in range(T + 1):
        if t == 0:
            l1, l2 = float(m), float(m)  # the total changes by at most m
        else:
            l1, l2 = _sens(neighbour, m, distinct, leaf=(t == T))
        sens.append((l1, l2))
        if not measured[t]:
            scales.append(None)
            var.append(0.0)
            noises.append(None)
            continue
        nm, sc, v = tree_mechanisms._noise_facts(cost.definition, shares[t], l1, l2)
        noises.append(nm)
        scales.append(sc)
        var.append(v)

    laplace = cost.definition == "pure"
    levels: list[ODLevelPlan] = []
    if info.name == "vanilla_gauss":
        leaf_pairs = pairs[T]
        under_o, under_d = origin.leaves_under(), destination.leaves_under()
        for t in range(T + 1):
            o, d = lv[t]
            v = var[T] * leaf_pairs / pairs[t]  # the average cell sums N_T/N_ℓ leaf noises
            sd = math.sqrt(v)
            fam_lap = laplace and t == T
            if fam_lap:
                mean_abs = sd * math.sqrt(0.5)
                max_abs = _typical_max(sd, pairs[t], True)
            else:
                # a pair (u, v) sums |u|·|v| leaf noises: its SD follows the public area sizes, and
                # the largest areas dominate the maximum (Texas → Texas is 17× the mean state pair)
                su, cu = np.unique(under_o[o], return_counts=True)
                sv, cv = np.unique(under_d[d], return_counts=True)
                sds = math.sqrt(var[T]) * np.sqrt(np.outer(su, sv).ravel().astype(float))
                w = np.outer(cu, cv).ravel().astype(float)
                mean_abs = float(np.sum(sds * w) / np.sum(w)) * math.sqrt(2.0 / math.pi)
                max_abs = _expected_max_grouped(sds, w)
            levels.append(lp(t, measured=measured[t], share=shares[t], noise=noises[t],
                             scale=float(scales[t]) if scales[t] is not None else 0.0,
                             l1_sensitivity=sens[t][0] if measured[t] else 0.0,
                             l2_sensitivity=sens[t][1] if measured[t] else 0.0,
                             noise_sd=math.sqrt(var[t]), sd=sd, mean_abs=mean_abs,
                             max_abs=max_abs, bound=math.nan, unreliable_below=2.0 * sd,
                             basis="sum of finest-pair noise (normal above the finest level, SD from the "
                                   "public area sizes); unbiased, may be negative"))
        return ODPlan(info.name, cost, None, neighbour, m, bool(distinct), orientation, "finest only", (),
                      order, tiebreak, tuple(levels), tuple(scales))

    V = [var[0]]  # the TopDown recursion (all three TopDown variants)
    for t in range(1, T + 1):
        if not measured[t]:
            V.append(V[t - 1])  # a copy level repeats its parent
        else:
            V.append(var[t] * (1.0 - 1.0 / b[t]) + V[t - 1] / (b[t] * b[t]))
    bounds = []
    for t in range(T + 1):
        if info.name not in ("inftda", "tda_linf_milp") or t == 0:  # any exact L∞ minimiser
            bounds.append(0.0 if t == 0 and not measured[0] else math.nan)
            continue
        # union bound: β is split over the t levels (and the noised total, when there is one)
        parts = t + (1 if measured[0] else 0)
        acc = 0.0
        for k in range(1, t + 1):
            if not measured[k]:
                continue
            if laplace:
                acc += float(scales[k]) * math.log(2.0 * parts * pairs[k] / beta)
            else:
                acc += float(scales[k]) * math.sqrt(2.0 * math.log(2.0 * parts * pairs[k] / beta))
        r0 = 0.0
        if measured[0]:  # a noised total adds its own error to every level below
            r0 = (float(scales[0]) * math.log(2.0 * parts / beta) if laplace
                  else float(scales[0]) * math.sqrt(2.0 * math.log(2.0 * parts / beta)))
        bounds.append(2.0 * acc + r0)
    for t in range(T + 1):
        sd = math.sqrt(V[t])
        mean_abs = sd * (math.sqrt(0.5) if laplace else math.sqrt(2.0 / math.pi))
        levels.append(lp(t, measured=measured[t], share=shares[t], noise=noises[t],
                         scale=float(scales[t]) if scales[t] is not None else 0.0,
                         l1_sensitivity=sens[t][0] if measured[t] else 0.0,
                         l2_sensitivity=sens[t][1] if measured[t] else 0.0,
                         noise_sd=math.sqrt(var[t]), sd=sd, mean_abs=mean_abs,
                         max_abs=_typical_max(sd, pairs[t], laplace), bound=bounds[t],
                         unreliable_below=2.0 * math.sqrt(var[t]) if measured[t] else 2.0 * sd,
                         basis="TopDown recursion V = σ²(1 − 1/b) + V_parent/b² (dense regime, spec §6.2)"))
    return ODPlan(info.name, cost, None, neighbour, m, bool(distinct), orientation, split,
                  tuple(float(w) for w in (weights or ())), order, tiebreak, tuple(levels), tuple(scales))


def _expected_max_grouped(sds: np.ndarray, counts: np.ndarray) -> float:
    """``E[max |e|]`` over independent normal errors, ``counts[i]`` of them with SD ``sds[i]``:
    ``∫_0^∞ 1 − Π_i (1 − erfc(t/(s_i√2)))^{c_i} dt`` on a fine grid."""
    from scipy import special

    s = np.asarray(sds, float)
    c = np.asarray(counts, float)
    keep = s > 0
    s, c = s[keep], c[keep]
    if s.size == 0:
        return 0.0
    if c.sum() == 1:
        return float(s[0] * math.sqrt(2.0 / math.pi))
    if s.size > 512:  # group into 512 geometric bins, each at its largest SD (a slight overestimate)
        edges = np.geomspace(s.min(), s.max() * (1 + 1e-12), 513)
        b = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, 511)
        c = np.bincount(b, weights=c, minlength=512)
        s = edges[1:]  # the bin's upper edge: at most 1.7 % above any SD in it
        keep = c > 0
        s, c = s[keep], c[keep]
    top = float(s.max()) * (4.0 + math.sqrt(2.0 * (math.log(c.sum()) + 8.0)))
    t = np.linspace(0.0, top, 2001)
    tail = special.erfc(t[:, None] / (s[None, :] * math.sqrt(2.0)))
    log_none = (np.log1p(-np.minimum(tail, 1 - 1e-16)) * c[None, :]).sum(axis=1)
    p_exceed = -np.expm1(log_none)
    return float(np.sum((p_exceed[1:] + p_exceed[:-1]) * 0.5 * np.diff(t)))


def _typical_max(sd: float, n: int, laplace: bool) -> float:
    """Typical largest |error| over ``n`` cells with error SD ``sd``: ``sd·√(2 ln n)`` (normal,
    spec §6.2 item 4) or ``sd/√2 · ln n`` (Laplace tails); one cell: its mean |error|."""
    if sd <= 0:
        return 0.0
    if n <= 1:
        return sd * (math.sqrt(0.5) if laplace else math.sqrt(2.0 / math.pi))
    return sd * math.log(n) / math.sqrt(2.0) if laplace else sd * math.sqrt(2.0 * math.log(n))


# ---------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ODRelease:
    """A released O/D tree: per tree level the non-zero released pairs.  Everything is public.

    ``origins[t]``, ``destinations[t]``, ``values[t]``: area indices (at the level's origin and
    destination depths) and released counts, sorted by (origin, destination); zeros omitted.
    """

    origin_h: Hierarchy
    destination_h: Hierarchy
    plan: ODPlan
    origins: tuple[np.ndarray, ...]
    destinations: tuple[np.ndarray, ...]
    values: tuple[np.ndarray, ...]
    public_total: int | None
    details: dict[str, Any] = field(default_factory=dict)
    release_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))

    @property
    def mechanism(self) -> ODMechanismInfo:
        return get(self.plan.mechanism)

    @property
    def depth(self) -> int:
        return len(self.values) - 1

    def level_plan(self, t: int) -> ODLevelPlan:
        return self.plan.levels[t]

    def frame(self, t: int, *, names: bool = False) -> pd.DataFrame:
        """Level ``t`` as a table: origin, destination (export labels), noisy_count."""
        lp = self.plan.levels[t]
        lab_o = (self.origin_h.display_names if names else self.origin_h.labels)(lp.origin_depth)
        lab_d = (self.destination_h.display_names if names else self.destination_h.labels)(lp.destination_depth)
        return pd.DataFrame({
            "origin": lab_o[self.origins[t]],
            "destination": lab_d[self.destinations[t]],
            "noisy_count": self.values[t],
        })

    def to_frame(self) -> pd.DataFrame:
        """Every level below the total: level, origin, destination, noisy_count (non-zero only)."""
        parts = []
        for t in range(1, self.depth + 1):
            f = self.frame(t)
            f.insert(0, "level", self.plan.levels[t].name)
            parts.append(f)
        return pd.concat(parts, ignore_index=True)

    def matrix(self, t: int) -> np.ndarray:
        """Dense origin × destination matrix of level ``t`` (small levels only)."""
        lp = self.plan.levels[t]
        no, nd = self.origin_h.sizes[lp.origin_depth], self.destination_h.sizes[lp.destination_depth]
        if no * nd > 4_000_000:
            raise ParameterError(f"Level '{lp.name}' has {no * nd:,} possible pairs; too many for a matrix view.")
        mtx = np.zeros((no, nd), dtype=np.int64)
        mtx[self.origins[t], self.destinations[t]] = self.values[t]
        return mtx

    def total(self, t: int = 0) -> int:
        return int(self.values[t].sum())

    @property
    def consistent(self) -> bool:
        """Every level sums (per parent) to the level above; checked exactly on integers."""
        lv = [(p.origin_depth, p.destination_depth) for p in self.plan.levels]
        for t in range(1, self.depth + 1):
            (po, pd_), (o, _) = lv[t - 1], lv[t]
            if o > po:
                par_o = self.origin_h.parents[po][self.origins[t]]
                par_d = self.destinations[t]
            else:
                par_o = self.origins[t]
                par_d = self.destination_h.parents[pd_][self.destinations[t]]
            n_d = self.destination_h.sizes[pd_]
            key = par_o * n_d + par_d
            uk, s = _group_sum(key, self.values[t])
            pk = self.origins[t - 1] * n_d + self.destinations[t - 1]
            if not (np.array_equal(uk, pk) and np.array_equal(s, self.values[t - 1])):
                return False
        return True


def _draw(noise: NoiseSource, kind: str, scale: Any, n: int) -> np.ndarray:
    if kind == "discrete_laplace":
        return noise.discrete_laplace(scale, n)
    return noise.discrete_gaussian(scale, n)


def _expand(h: Hierarchy, depth: int, parent_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Children of every parent (contiguous per parent): (child index, parent position, counts)."""
    off = h.child_offsets(depth)
    lo, hi = off[parent_idx], off[parent_idx + 1]
    cnt = hi - lo
    pos = np.repeat(np.arange(parent_idx.size, dtype=np.int64), cnt)
    starts = np.cumsum(cnt) - cnt
    child = lo[pos] + (np.arange(pos.size, dtype=np.int64) - starts[pos])
    return child, pos, cnt


def _sort_level(o: np.ndarray, d: np.ndarray, v: np.ndarray, n_d: int) -> tuple[np.ndarray, ...]:
    order = np.argsort(o * n_d + d, kind="stable")
    return o[order], d[order], v[order]


def release(
    counts: ODCounts,
    mechanism: str,
    cost: PrivacyCost | None,
    noise: NoiseSource,
    *,
    neighbour: Neighbour = "bounded",
    orientation: Orientation = "destination",
    split: str = "uniform",
    weights: Sequence[float] | None = None,
    order: str = "ascending",
    tiebreak: str = "random",
    approx: tuple[float, float] | None = None,
    progress: Any = None,
) -> ODRelease:
    """Release ``counts`` (the caller has charged the ledger; use :func:`dpcore.core.pipeline.release_od`).

    ``progress(fraction, message)`` is called once per tree level.
    """
    oh, dh = counts.origin_h, counts.destination_h
    p = plan(oh, dh, mechanism, cost, neighbour=neighbour, max_trips=counts.max_trips,
             distinct=counts.distinct, orientation=orientation, split=split, weights=weights,
             order=order, tiebreak=tiebreak, approx=approx)
    T = p.depth
    lv = [(x.origin_depth, x.destination_depth) for x in p.levels]
    details: dict[str, Any] = {}

    def tick(t: int, msg: str) -> None:
        if progress is not None:
            progress(t / max(T, 1), msg)

    if p.mechanism == "vanilla_gauss":
        return _vanilla(counts, p, noise, lv, tick)
    if p.mechanism == "sh":
        return _sh(counts, p, noise, lv, tick)

    n = counts.total
    if p.levels[0].measured:
        root = max(n + int(_draw(noise, p.levels[0].noise, p.scales[0], 1)[0]), 0)
        public_total = None
    else:
        root, public_total = n, n
    cur_o = np.zeros(1 if root > 0 else 0, dtype=np.int64)
    cur_d = np.zeros_like(cur_o)
    cur_v = np.array([root] if root > 0 else [], dtype=np.int64)
    outs_o, outs_d, outs_v = [cur_o], [cur_d], [cur_v]
    noised = 0
    for t in range(1, T + 1):
        tick(t - 1, f"level {t} of {T}: {p.levels[t].name} ({cur_v.size:,} parents)")
        (po, pd_), (o, d) = lv[t - 1], lv[t]
        if cur_v.size == 0:
            e = np.zeros(0, dtype=np.int64)
            outs_o.append(e), outs_d.append(e), outs_v.append(e)
            continue
        if o > po:
            child, pos, cnt = _expand(oh, po, cur_o)
            co, cd = child, cur_d[pos]
        else:
            child, pos, cnt = _expand(dh, pd_, cur_d)
            co, cd = cur_o[pos], child
        if not p.levels[t].measured:  # copy level: every node has one child, nothing to measure
            y = cur_v[pos]
        else:
            x = counts.lookup(o, d, co, cd) + _draw(noise, p.levels[t].noise, p.scales[t], co.size)
            noised += int(co.size)
            offsets = np.r_[0, np.cumsum(cnt)]
            tb = noise.random_uint64(co.size) if p.tiebreak == "random" else None
            if p.mechanism == "inftda":
                y = topdown_opt.intopt_segments(x, offsets, cur_v, order=p.order, tiebreak=tb)
            elif p.mechanism == "tda_linf_milp":
                y = _linf_milp_segments(x, offsets, cur_v, p.levels[t].name)
            else:
                y = topdown_opt.l2_round_segments(x, offsets, cur_v, tiebreak=tb)
        keep = y > 0
        cur_o, cur_d, cur_v = _sort_level(co[keep], cd[keep], np.asarray(y[keep], np.int64), dh.sizes[d])
        outs_o.append(cur_o), outs_d.append(cur_d), outs_v.append(cur_v)
    tick(T, "done")
    details.update(noised_cells=noised)
    return ODRelease(oh, dh, p, tuple(outs_o), tuple(outs_d), tuple(outs_v), public_total, details)


def _linf_milp_segments(x: np.ndarray, offsets: np.ndarray, totals: np.ndarray, level: str) -> np.ndarray:
    """The per-node L∞ projection by scipy's MILP (HiGHS), one call per segment (baseline only).

    ``min α  s.t.  y_i − α ≤ x_i,  y_i + α ≥ x_i,  Σ y = c,  y ∈ ℕ, α ≥ 0`` (spec §8.3).  The
    solver returns whichever optimal vertex it finds first — the point of the baseline.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    m = totals.size
    if m > MILP_MAX_SUBPROBLEMS:
        raise ParameterError(
            f"The MILP baseline would make {m:,} solver calls at level '{level}' (limit "
            f"{MILP_MAX_SUBPROBLEMS:,}). Use InfTDA, which solves the same problem exactly in closed form."
        )
    y = np.empty(x.size, dtype=np.int64)
    for i in range(m):
        a, b_ = int(offsets[i]), int(offsets[i + 1])
        xi = x[a:b_].astype(float)
        b = xi.size
        c = int(totals[i])
        if b == 1 or c == 0:
            y[a:b_] = c if b == 1 else 0
            continue
        eye = np.eye(b)
        A = np.block([[eye, -np.ones((b, 1))], [eye, np.ones((b, 1))], [np.ones((1, b)), np.zeros((1, 1))]])
        lo = np.concatenate([np.full(b, -np.inf), xi, [c]])
        hi = np.concatenate([xi, np.full(b, np.inf), [c]])
        cost = np.zeros(b + 1)
        cost[-1] = 1.0
        res = milp(cost, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(b + 1),
                   bounds=Bounds(np.zeros(b + 1), np.full(b + 1, np.inf)))
        if not res.success:  # pragma: no cover - the problem is always feasible (y = c·e_1)
            raise ParameterError(f"The MILP solver failed at level '{level}': {res.message}")
        yi = np.round(res.x[:b]).astype(np.int64)
        # the solver works in floating point: restore the exact sum on the largest entry
        yi[np.argmax(yi)] += c - int(yi.sum())
        y[a:b_] = yi
    return y


def _aggregate_sparse(o: np.ndarray, d: np.ndarray, v: np.ndarray, anc_o: np.ndarray, anc_d: np.ndarray,
                      n_d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    key = anc_o[o] * n_d + anc_d[d]
    uk, s = _group_sum(key, v)
    return uk // n_d, uk % n_d, s


def _vanilla(counts: ODCounts, p: ODPlan, noise: NoiseSource, lv: list[tuple[int, int]], tick: Any) -> ODRelease:
    oh, dh = counts.origin_h, counts.destination_h
    no, nd = oh.n_leaves, dh.n_leaves  # plan() has checked no·nd ≤ VANILLA_MAX_CELLS
    T = p.depth
    tick(0, f"noising {no * nd:,} finest pairs")
    leaf = _draw(noise, p.levels[T].noise, p.scales[T], no * nd).astype(np.int64)
    leaf[counts.origin * nd + counts.destination] += counts.count
    nz = np.flatnonzero(leaf)
    lo, ld, lvv = nz // nd, nz % nd, leaf[nz]
    del leaf
    anc_o, anc_d = _ancestors(oh), _ancestors(dh)
    outs = []
    for t in range(T + 1):
        o, d = lv[t]
        outs.append(_aggregate_sparse(lo, ld, lvv, anc_o[o], anc_d[d], dh.sizes[d]))
        tick(t, f"summing level {t}")
    return ODRelease(oh, dh, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs),
                     tuple(x[2] for x in outs), None, {"noised_cells": int(no * nd)})


def _sh(counts: ODCounts, p: ODPlan, noise: NoiseSource, lv: list[tuple[int, int]], tick: Any) -> ODRelease:
    oh, dh = counts.origin_h, counts.destination_h
    T = p.depth
    noisy = counts.count + _draw(noise, "discrete_laplace", p.scales[T], counts.n_pairs)
    keep = noisy >= p.sh_threshold
    lo, ld, lvv = counts.origin[keep], counts.destination[keep], noisy[keep].astype(np.int64)
    anc_o, anc_d = _ancestors(oh), _ancestors(dh)
    outs = [_aggregate_sparse(lo, ld, lvv, anc_o[o], anc_d[d], dh.sizes[d]) for o, d in lv]
    tick(T, "done")
    # no "noised_cells" here: SH noises the observed pairs only, and their number is confidential
    return ODRelease(oh, dh, p, tuple(x[0] for x in outs), tuple(x[1] for x in outs),
                     tuple(x[2] for x in outs), None, {})


# ---------------------------------------------------------------------------------------------
# curator-only diagnostics
# ---------------------------------------------------------------------------------------------


def empirical_errors(rel: ODRelease, counts: ODCounts) -> list[dict[str, Any]]:
    """Curator-only: error of the release against the truth per tree level.  **Not for publication.**

    Over the union of pairs positive in the truth or the release (spec §5.4; a missing pair is
    0): maximum and mean absolute error; MAE over *all possible* pairs (the paper's
    normalisation); false positives (released > 0, true 0) and the false-discovery rate; false
    negatives (true > 0, released 0) and their rate; median and 95th percentile relative error
    ``|x̂ − x| / max(x, 1)`` over true-positive pairs.
    """
    if counts.origin_h.fingerprint() != rel.origin_h.fingerprint() or \
            counts.destination_h.fingerprint() != rel.destination_h.fingerprint():
        raise InputError("The release was made on another hierarchy than these counts.")
    out = []
    for t, lp in enumerate(rel.plan.levels):
        keys, tc = counts.level(lp.origin_depth, lp.destination_depth)
        n_d = rel.destination_h.sizes[lp.destination_depth]
        rk = rel.origins[t] * n_d + rel.destinations[t]
        rv = rel.values[t]
        allk = np.union1d(keys, rk)
        tv = np.zeros(allk.size, dtype=np.int64)
        ev = np.zeros(allk.size, dtype=np.int64)
        tv[np.searchsorted(allk, keys)] = tc
        ev[np.searchsorted(allk, rk)] = rv
        err = np.abs(ev - tv).astype(float)
        released = int((ev > 0).sum())
        true_pos = int((tv > 0).sum())
        fp = int(((ev > 0) & (tv == 0)).sum())
        fn = int(((tv > 0) & (ev <= 0)).sum())
        rel_err = err[tv > 0] / np.maximum(tv[tv > 0], 1)
        out.append({
            "level": lp.name,
            "tree_level": t,
            "possible_pairs": lp.pairs,
            "true_pairs": true_pos,
            "released_pairs": released,
            "max_abs_error": float(err.max()) if err.size else 0.0,
            "mean_abs_error": float(err.mean()) if err.size else 0.0,
            "mae_all_pairs": float(err.sum() / lp.pairs),
            "rmse_all_pairs": float(math.sqrt(float(np.sum(err * err)) / lp.pairs)),
            "false_positives": fp,
            "fdr_percent": (100.0 * fp / released) if released else math.nan,
            "false_negatives": fn,
            "fnr_percent": (100.0 * fn / true_pos) if true_pos else math.nan,
            "median_relative_error": float(np.median(rel_err)) if rel_err.size else math.nan,
            "p95_relative_error": float(np.quantile(rel_err, 0.95)) if rel_err.size else math.nan,
            "expected_max_abs": lp.max_abs,
            "expected_rmse": lp.sd,
        })
    return out
