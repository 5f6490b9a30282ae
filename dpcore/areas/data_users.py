"""The data users' files of a hierarchy release (issue 25): measurements, design, GLS estimates.

The consistent tree mechanisms (exact, topdown_l2, topdown_linf, hay, bottom_up) and the
independent baseline keep their noisy level counts before post-processing
(:attr:`~dpcore.areas.tree_plans.HierarchyRelease.measurements`).  From them and the public plan
this module makes ``measurements.csv`` (one row per measured area), ``design.json`` (the finest
areas, the finest areas under every area, the tree edges, the public total as an invariant) and
``estimates.csv``: the generalised least-squares estimate of every area with its exact variance
(two passes over the tree, :mod:`dpcore.estimate.gls`), beside the released value.  Nothing here
is a true count: the values are the mechanism's noisy measurements, the total only when the
release publishes it as an invariant (replace-one neighbours).

Not written (the record then has no ``data_users`` section, as for O/D domains over
:data:`dpcore.flows.data_users.OD_MAX_CELLS`): hierarchies of more than :data:`MAX_AREAS` areas in
all.  ``design.json`` lists the finest areas under every area (areas × depth numbers), which at
8 million census blocks took more memory and time than the release itself (issue 28:
benchmarks/results/blocks.md); release the tracts or block groups for the data users' files.

Nor for a hierarchy whose design codes repeat (two areas would share a code in design.json): its
record's section then lists no file and says why, with ``measurements_offered`` false.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from dpcore.areas.tree_plans import HierarchyRelease
from dpcore.estimate.data_users import (
    DATA_USER_FILES,
    DataUserPack,
    MeasuredLevel,
    estimates_csv,
    node_estimates,
    not_offered,
    pack_files,
    replicate_files,
    section,
)
from dpcore.estimate.design_nodes import NodeCells, NodeEdges, distinct_codes, repeated_codes_why

__all__ = ["DATA_USER_FILES", "MAX_AREAS", "data_users_section", "hierarchy_data_user_files", "hierarchy_pack"]



#: The most areas (all levels) whose data users' files are written.
MAX_AREAS = 1_000_000


def _measured(rel: HierarchyRelease) -> bool:
    """The release exposes its measurements (plain counts of a tree mechanism) and is small enough."""
    return bool(rel.measurements) and rel.plan.statistic == "count" and int(sum(rel.hierarchy.sizes)) <= MAX_AREAS


def _offers(rel: HierarchyRelease) -> bool:
    """:func:`_measured`, and every area has a design code of its own (:func:`_node_keys`); otherwise its
    files are not offered, as the O/D writers do (the files are made after the charge, so a refusal
    would come too late)."""
    return _measured(rel) and _node_keys(rel) is not None


#: The labels and design keys of a release, made once (the record, the file list and the files each ask).
_KEYS: weakref.WeakKeyDictionary[HierarchyRelease, tuple[list[np.ndarray], list[np.ndarray], bool]] = (
    weakref.WeakKeyDictionary())


def _design_keys(rel: HierarchyRelease) -> tuple[list[np.ndarray], list[np.ndarray], bool]:
    """Every area's export label per depth, its design key per depth (the label, or ``level:label`` for
    the coarser levels when labels repeat across levels: the finest keep their codes, they are the
    cells) and whether the keys are distinct, made once per release."""
    if rel not in _KEYS:
        h = rel.hierarchy
        labels = [np.asarray(h.labels(d)).astype(str) for d in range(h.depth + 1)]
        if distinct_codes(np.concatenate(labels).tolist()):
            _KEYS[rel] = labels, labels, True
        else:
            keys = _level_keys(rel, labels)
            _KEYS[rel] = labels, keys, distinct_codes(np.concatenate(keys).tolist())
    return _KEYS[rel]


def _node_keys(rel: HierarchyRelease) -> list[np.ndarray] | None:
    """The design's node key of every area per depth (:func:`_design_keys`).  None when two areas would
    still share a key (a finest area coded like a coarser area's ``level:label`` key, or a repeated
    finest code): design.json would name two nodes alike, which
    :class:`~dpcore.estimate.design_nodes.NodeCells` refuses."""
    _, keys, distinct = _design_keys(rel)
    return keys if distinct else None


def _level_keys(rel: HierarchyRelease, labels: list[np.ndarray]) -> list[np.ndarray]:
    """``level:label`` for the coarser levels, the finest areas' labels as they are."""
    h = rel.hierarchy
    return [np.char.add(f"{h.level_names[d]}:", lab) if d < h.depth else lab for d, lab in enumerate(labels)]


#: the fix the record states when two areas share a design code
_UNIQUE_CODES = ("give every area a code of its own (make the codes unique; a finest area must not be coded like "
                 "a coarser area's 'level:code' key) and release again to get the data users' files.")


def _why_not_offered(rel: HierarchyRelease) -> str | None:
    """Why the data users' files of a release that exposes its measurements are not offered: two areas
    share a design code (:func:`_node_keys`, :func:`~dpcore.estimate.design_nodes.repeated_codes_why`);
    None otherwise."""
    if not _measured(rel):
        return None
    _, keys, distinct = _design_keys(rel)
    return None if distinct else repeated_codes_why(np.concatenate(keys).tolist(), "areas", _UNIQUE_CODES)


def hierarchy_pack(rel: HierarchyRelease) -> DataUserPack | None:
    """The measurements and design of ``rel`` (None when not offered: :func:`_offers`)."""
    if not _offers(rel):
        return None
    h, p = rel.hierarchy, rel.plan
    keys = _node_keys(rel)
    assert keys is not None  # _offers
    anc = [np.arange(h.n_leaves)]
    for d in range(h.depth - 1, -1, -1):
        anc.insert(0, np.asarray(h.parents[d])[anc[0]])
    # every area (coarse levels first) with the finest areas under it, as arrays (NodeCells: no
    # array per area), and each area below the root joined to its parent by node position
    start = np.concatenate([[0], np.cumsum(h.sizes)])  # the first node position of each depth
    ptr, cells = [np.zeros(1, np.int64)], []
    for d in range(h.depth + 1):
        cells.append(np.argsort(anc[d], kind="stable"))  # the finest areas grouped by their area at d
        ptr.append(ptr[-1][-1] + np.cumsum(np.bincount(anc[d], minlength=h.sizes[d])))
    codes = np.concatenate(keys).tolist()
    nodes = NodeCells(codes, np.concatenate(ptr), np.concatenate(cells))
    edges = NodeEdges(nodes, np.concatenate([start[d] + np.asarray(h.parents[d]) for d in range(h.depth)]),
                      np.arange(start[1], start[-1]))
    levels, row_level, node, value = [], [], [], []
    for d, y in enumerate(rel.measurements):
        if y is None:
            continue
        lv = p.levels[d]
        row_level.append(np.full(len(y), len(levels), dtype=np.int64))
        levels.append(MeasuredLevel(h.level_names[d], lv.noise, float(p.scales[d]), lv.share))
        node += keys[d].tolist()
        value.append(np.asarray(y))
    invariants = ([{"node": str(keys[0][0]), "value": int(rel.public_total),
                    "why": "the total is public under replace-one neighbours"}]
                  if rel.public_total is not None else [])
    return DataUserPack("hierarchy", levels, np.concatenate(row_level), node, np.concatenate(value),
                        keys[h.depth].tolist(), nodes, edges, invariants)


def hierarchy_data_user_files(rel: HierarchyRelease, parquet_above: int | None = None) -> dict[str, bytes]:
    """``measurements.csv`` (Parquet above ``parquet_above`` rows: :func:`dpcore.estimate.data_users.pack_files`),
    ``design.json`` and ``estimates.csv`` of ``rel`` (empty when it does not expose measurements:
    group-size histograms, the matrix mechanisms)."""
    pack = hierarchy_pack(rel)
    if pack is None:
        return {}
    files, m = pack_files(pack, parquet_above)
    files.update(replicate_files(m))  # replicates.csv, where small enough (issue 25 item 5)
    est, var = node_estimates(m)  # in design node order: depth by depth, as the pack lists them
    h = rel.hierarchy
    level = np.repeat(np.asarray(h.level_names, dtype=object), h.sizes)
    code = np.concatenate(_design_keys(rel)[0])  # the export labels
    published = np.concatenate([np.asarray(v) for v in rel.values])
    files["estimates.csv"] = estimates_csv(level, code, est, var, published)
    return files


def data_users_section(rel: HierarchyRelease) -> dict[str, Any] | None:
    """The record's ``data_users`` section: the files and which value the map shows; for a release whose
    design codes repeat, no file and why (:func:`_why_not_offered`); None when no files are offered
    otherwise (module docstring)."""
    if not _offers(rel):
        why = _why_not_offered(rel)
        return None if why is None else not_offered(
            "The map, release.csv and the GeoJSON show the published (post-processed) values; no data users' "
            "files are written (see why).", why)
    return section("The map, release.csv and the GeoJSON show the published (post-processed) values; "
                 "estimates.csv holds the unbiased generalised least-squares estimate of every area and "
                 "its exact variance, computed from measurements.csv (the noisy counts before "
                 "post-processing) and design.json. 'python -m dpcore interval' gives the estimate and "
                 "interval of any union of finest areas.", n_cells=int(rel.hierarchy.sizes[-1]))
