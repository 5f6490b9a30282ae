"""VanillaGauss: noise on every possible finest O/D pair, coarser tables as sums (a baseline).

Boninsegna & Silvestri, PoPETs 2025, Sec. 5 (``VanillaGauss``): the whole budget on every cell
of the full finest O/D domain, zeros included; every coarser level is the sum of its finest
pairs.  Unbiased, but negative values are kept and the error grows as one zooms out.

Parameters
    Those of the TopDown walk (:mod:`.base`), listed alike; only ``split`` and ``weights`` reach
    the one measured level (a custom split needs one weight).

Privacy
    One histogram, the finest level, with its sensitivity (:func:`.common.sensitivity`, leaf
    level); the sums are post-processing.  ρ-zCDP (discrete Gaussian) or pure ε (discrete Laplace).

Plan
    The finest level's noise; above it the SD of a sum of finest-pair noise, from the public
    area sizes (:func:`dpcore.flows.accuracy.vanilla_errors`).  The full domain must fit in
    memory: above :data:`VANILLA_MAX_CELLS` pairs the plan is refused.

Release
    Noise on all origin × destination finest pairs, the true trips added, exact zeros dropped,
    every tree level summed up (:func:`.common.sum_up`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dpcore.errors import ParameterError
from dpcore.flows.accuracy import vanilla_errors
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.base import ORDER, ORIENTATION, SPLIT, TIEBREAK, WEIGHTS, ODMechanism
from dpcore.flows.mechanisms.common import (
    Calibration,
    ODLevelPlan,
    ODOptions,
    ODPlan,
    ODRelease,
    ODTree,
    noise_fields,
    sum_up,
)
from dpcore.privacy.noise import NoiseSource

__all__ = ["VANILLA_MAX_CELLS", "VanillaGauss"]

#: Largest full finest O/D domain (origin areas × destination areas) VanillaGauss will noise: the
#: US county × county domain (10.4 M) peaks at about 1.7 GB, so 12 M keeps a release near 2 GB.
VANILLA_MAX_CELLS = 12_000_000


class VanillaGauss(ODMechanism):
    """Noise on every finest pair, sums above (Boninsegna & Silvestri 2025, Sec. 5)."""

    name = "vanilla_gauss"
    title = "Gaussian on every finest pair (baseline)"
    summary = ("The whole budget on every possible finest O/D pair (zeros included); coarser tables are "
               "sums. Unbiased but negative values are kept, and the error grows as one zooms out.")
    when_to_use = "Small domains where only the finest pairs matter."
    reference = "Boninsegna & Silvestri, PoPETs 2025, Sec. 5 (VanillaGauss)"
    params = (ORIENTATION, SPLIT, WEIGHTS, ORDER, TIEBREAK)
    definitions = ("pure", "zcdp")
    consistent, nonnegative = True, False
    finest_only = True
    #: unbiased sums of noise, but ``noise_sd`` is the level's average error
    no_interval_reason = (
        "gives each flow the sum of the noise of its finest pairs: noise_sd is the table's average error, while a "
        "flow's own error depends on the sizes of its two areas, so noisy_count ± 1.96 × noise_sd is not a valid "
        "95 % interval for every flow.")

    def measured_levels(self, tree: ODTree, o: ODOptions) -> list[bool]:
        """The finest level only; refused when the full finest domain is too large to noise."""
        origin, destination = tree.origin, tree.destination
        cells = origin.n_leaves * destination.n_leaves
        if cells > VANILLA_MAX_CELLS:
            raise ParameterError(
                f"VanillaGauss noises every possible finest pair: {origin.n_leaves:,} × {destination.n_leaves:,} = "
                f"{cells:,} cells, more than {VANILLA_MAX_CELLS:,}. Use InfTDA (its work follows the released "
                "flows), or a coarser finest level."
            )
        return [t == tree.depth for t in range(tree.depth + 1)]

    def level_plans(self, tree: ODTree, c: Calibration, *, laplace: bool, beta: float) -> list[ODLevelPlan]:
        """Sums of finest-pair noise: SD from the public area sizes (normal above the finest level)."""
        T = tree.depth
        under_o, under_d = tree.origin.leaves_under(), tree.destination.leaves_under()
        levels = []
        for t in range(T + 1):
            o, d = tree.lv[t]
            sd, mean_abs, max_abs = vanilla_errors(c.var[T], tree.pairs[T], tree.pairs[t], under_o[o], under_d[d],
                                                   laplace and t == T)
            levels.append(tree.level(t, **noise_fields(c, t), sd=sd, mean_abs=mean_abs, max_abs=max_abs,
                                     bound=math.nan, unreliable_below=2.0 * sd,
                                     basis="sum of finest-pair noise (normal above the finest level, SD from the "
                                           "public area sizes); unbiased, may be negative"))
        return levels

    def release_tree(self, counts: ODCounts, p: ODPlan, noise: NoiseSource, *, progress: Any = None) -> ODRelease:
        """Noise every finest pair (:meth:`plan_tree` has checked their number), sum up the tree."""
        self.check_own(p)
        nd = counts.destination_h.n_leaves
        cells = counts.origin_h.n_leaves * nd
        T = p.depth
        if progress is not None:
            progress(0.0, f"noising {cells:,} finest pairs")
        leaf = noise.discrete(p.levels[T].noise, p.scales[T], cells).astype(np.int64)
        leaf[counts.origin * nd + counts.destination] += counts.count
        nz = np.flatnonzero(leaf)
        o, d, v = nz // nd, nz % nd, leaf[nz]
        rel = sum_up(counts, p, o, d, v, {"noised_cells": int(cells)}, progress=progress)
        # the noisy finest pairs of the full domain (row-major), before the zeros are dropped
        return dataclasses.replace(rel, measurements=tuple([None] * T + [(None, None, leaf)]))
