"""Counts over a public hierarchy of areas: the confidential aggregate of the areas kind.

:class:`HierarchyCounts` maps the curator's rows (one per area with a count column, one per person,
or group-size histograms) onto the public :class:`~dpcore.data.hierarchy.Hierarchy`, and refuses
rows whose area is not in the public list (DESIGN.md privacy rule 1).  It holds true values:
nothing downstream of a mechanism reads it, and it is never shown or exported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from dpcore.data.hierarchy import Hierarchy, plural, row_list
from dpcore.errors import InputError, ParameterError, curator_only
from dpcore.privacy import near_match

__all__ = ["HierarchyCounts"]

@dataclass(frozen=True, eq=False)
class HierarchyCounts:
    """Confidential counts per finest area, on a public :class:`Hierarchy`.

    ``leaf`` has shape ``(n_leaves,)`` for plain counts (people per area) or
    ``(n_leaves, k)`` for group-size histograms (number of groups of size 1..k per area, the
    last bucket top-coded "k or more").  It holds **true** values: never show or export it.
    """

    hierarchy: Hierarchy
    leaf: np.ndarray
    statistic: Literal["count", "group_sizes"] = "count"
    n_rows: int = 0
    count_columns: tuple[str, ...] = ()
    size_labels: tuple[str, ...] = ()

    @property
    def k(self) -> int:
        return 1 if self.leaf.ndim == 1 else int(self.leaf.shape[1])

    @property
    def n_groups(self) -> int:
        """Number of groups N (public invariant of the group-size release)."""
        return int(self.leaf.sum())

    def levels(self) -> list[np.ndarray]:
        """True values at every depth 0..L (confidential)."""
        return self.hierarchy.aggregate(self.leaf)

    def profile(self) -> near_match.Profile:
        """What near-identical tables are recognised by (issue 26 item 14; curator-side, stored only as
        keyed buckets): the levels, the statistic, the total and the areas with people."""
        return near_match.counts_profile("areas", [*self.hierarchy.levels, self.statistic], self.leaf)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        hierarchy: Hierarchy,
        levels: Sequence[str],
        count: str | Sequence[str] | None = None,
        *,
        group: str | None = None,
        max_size: int = 7,
        leaf: np.ndarray | None = None,
    ) -> HierarchyCounts:
        """Map a confidential table onto the public hierarchy.

        * ``count`` is one column name: one row per area (or several rows per area, summed)
          with whole non-negative counts; ``None``: one row per person (each counts 1).
        * ``count`` is several columns: a group-size histogram per area, columns in size order
          (sizes 1, 2, …, the last one "k or more").
        * ``group`` (with ``count=None``): one row per person with a group id (household,
          taxi); groups are counted by size, top-coded at ``max_size``.  A group must lie in one
          area.
        * ``leaf``: each row's finest area when already known (:meth:`Hierarchy.frame_rows` of the
          frame the hierarchy was built from, which ``df`` must then be); else mapped here
          (:meth:`Hierarchy.leaf_index`).
        """
        if not isinstance(df, pd.DataFrame):
            raise InputError("The data must be a table (pandas DataFrame).")
        if df.empty:
            raise InputError("The table has no rows. Upload a file with a header and at least one data row.")
        cols = [count] if isinstance(count, str) else list(count or [])
        roles = list(levels) + cols + ([group] if group else [])
        dup = sorted({c for c in roles if roles.count(c) > 1})
        if dup:
            raise ParameterError(
                f"Column {', '.join(map(repr, dup))} is used twice (as a level, count or group id). "
                "Give each column one role."
            )
        missing = [c for c in cols + ([group] if group else []) if c not in df.columns]
        if missing:
            raise InputError(f"The table has no column {', '.join(map(repr, missing))}. Choose the columns again.")
        if leaf is not None and len(leaf) != len(df):
            raise ParameterError("The rows' finest areas (leaf) must have one value per row of the table.")
        leaf_idx = hierarchy.leaf_index(df, levels) if leaf is None else np.asarray(leaf, dtype=np.int64)
        n = hierarchy.n_leaves
        if group is not None:
            if cols:
                raise ParameterError("Give either count columns or a group id column, not both.")
            k = int(max_size)
            if k < 1:
                raise ParameterError("The largest group size must be at least 1.")
            g = df[group].astype("string").str.strip()
            bad = (g.isna() | (g == "")).to_numpy()
            if bad.any():
                raise InputError(
                    curator_only(f"The group id column '{group}' has {plural(int(bad.sum()), 'missing value')} "
                    f"({row_list(bad)}). Every person needs a group id: fill them in or drop those rows.")
                )
            gcode, _ = pd.factorize(g)
            frame = pd.DataFrame({"g": gcode, "leaf": leaf_idx})
            per = frame.groupby("g", sort=False)["leaf"].agg(["nunique", "first", "size"])
            split = per["nunique"] > 1
            if split.any():
                raise InputError(
                    curator_only(f"{plural(int(split.sum()), 'group')} have members in two or more areas; a group "
                    "(a household, a taxi) must lie in one finest area. Fix the group ids or the area codes.")
                )
            size = np.minimum(per["size"].to_numpy(), k) - 1
            leaf = np.zeros((n, k), dtype=np.int64)
            np.add.at(leaf, (per["first"].to_numpy(), size), 1)
            labels = tuple(str(s) for s in range(1, k)) + (f"{k}+",)
            return cls(hierarchy, leaf, "group_sizes", len(df), (), labels)
        if not cols:
            leaf = np.bincount(leaf_idx, minlength=n).astype(np.int64)
            return cls(hierarchy, leaf, "count", len(df), ())
        vals = np.column_stack([whole_counts(df[c], c) for c in cols])
        leaf = np.zeros((n, len(cols)), dtype=np.int64)
        np.add.at(leaf, leaf_idx, vals)
        if len(cols) == 1:
            return cls(hierarchy, leaf[:, 0].copy(), "count", len(df), tuple(cols))
        return cls(hierarchy, leaf, "group_sizes", len(df), tuple(cols), tuple(cols))


def whole_counts(s: pd.Series, col: str) -> np.ndarray:
    """The count column ``col`` as int64, refused with the rows when a value is missing, not a whole
    number, negative or too large to count exactly (2**53 or more)."""
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
    missing = np.isnan(values)
    if missing.any():
        raise InputError(
            curator_only(f"The count column '{col}' has {plural(int(missing.sum()), 'value')} that are missing or "
            f"not numbers ({row_list(missing)}). Fill in whole numbers, or choose the right count column.")
        )
    bad = ~np.isfinite(values) | (values != np.round(values))
    if bad.any():
        raise InputError(
            curator_only(f"The count column '{col}' has {plural(int(bad.sum()), 'value')} that are not whole numbers "
            f"({row_list(bad)}). Counts of people must be whole numbers: fix or round them.")
        )
    neg = values < 0
    if neg.any():
        raise InputError(
            curator_only(f"The count column '{col}' has {plural(int(neg.sum()), 'negative value')} ({row_list(neg)}). "
            "Counts must be 0 or more: fix those rows.")
        )
    big = values >= 2**53
    if big.any():
        raise InputError(curator_only(f"The count column '{col}' has values of {2**53:,} or more ({row_list(big)}), too large to be "
                         "counted exactly; no real count is that large. Check those rows."))
    return values.astype(np.int64)
