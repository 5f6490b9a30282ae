"""Private shape features of point data: what ``auto`` reads before it chooses (issue 27, item 1).

Pythia (Kotsogiannis, Machanavajjhala, Hay & Miklau, "Pythia: Data Dependent Differentially
Private Algorithm Selection", SIGMOD 2017, Sec. 4–5) spends a small share of ε on noisy features
of the data (its scale and how far it is from uniform) and chooses the algorithm with a rule
learned on public training data.  The features here are that idea for a 2-D grid:

* ``noisy_total``: the number of points, discrete Laplace at half of the feature budget
  (sensitivity k, one unit adds or removes at most k points); with a PUBLIC number of points there
  is no count: the public number stands in and the whole feature budget goes to the histogram;
* a COARSE histogram (at most :data:`COARSE` × :data:`COARSE` blocks of the public grid), discrete
  Laplace at the other half (the blocks are disjoint: L1 sensitivity k), from which, by
  post-processing only:

  - ``concentration``: the share of the (clipped at 0) noisy mass in the top 10 % of the blocks
    (about 0.1 for uniform data, near 1 for a few tight clusters);
  - ``sparsity``: the share of blocks whose noisy count is below a tenth of the mean block count
    ``noisy_total / blocks`` (empty country around towns and roads);
  - ``top_entropy``: the entropy of the top 10 % of blocks' shares over its maximum ``log m``
    (1: the top blocks hold alike; near 0: one block dominates).

Privacy
    The two noisy releases compose sequentially: ``ε_f/2 + ε_f/2 = ε_f`` (the split is
    :func:`~dpcore.privacy.calibration.split_custom`'s: the parts never add up to more); with a
    public n the histogram alone spends ``ε_f``.  Noise
    only from :class:`~dpcore.privacy.noise.NoiseSource` (through
    :func:`~dpcore.points.mechanisms.base.noisy_counts`); every feature after it is a function of
    the two noisy outputs and public inputs (the grid, ε_f, k).

>>> import numpy as np
>>> from dpcore.privacy.noise import NoiseSource
>>> from dpcore.data.domain import Bounds, Grid, Aggregate
>>> counts = np.zeros((32, 32), dtype=np.int64); counts[3, 4] = 5_000
>>> agg = Aggregate(Grid(Bounds(0, 0, 1, 1), 32, 32), counts, 0, 0, 1, None)
>>> f = private_features(agg, 2.0, NoiseSource(1))
>>> f.coarse_rows, f.coarse_cols, f.concentration > 0.9, abs(f.noisy_total - 5_000) < 50
(16, 16, True, True)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpcore.data.domain import Aggregate, block_edges
from dpcore.points.mechanisms.base import noisy_counts
from dpcore.privacy.budget import pure
from dpcore.privacy.calibration import split_custom
from dpcore.privacy.noise import NoiseSource

__all__ = ["COARSE", "TOP_SHARE", "ShapeFeatures", "coarse_blocks", "coarse_counts", "feature_budgets",
           "features_from_noisy", "private_features"]

#: At most this many blocks a side in the coarse histogram.
COARSE = 16
#: The "top cells": this share of the blocks (at least one).
TOP_SHARE = 0.1


@dataclass(frozen=True)
class ShapeFeatures:
    """The noisy features (all public once released) and how they were bought."""

    noisy_total: float
    concentration: float
    sparsity: float
    top_entropy: float
    coarse_rows: int
    coarse_cols: int
    epsilon: float
    sensitivity: int

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def coarse_blocks(rows: int, cols: int, side: int = COARSE) -> tuple[int, int]:
    """Blocks a side of the coarse histogram of a ``rows`` × ``cols`` grid (public).

    >>> coarse_blocks(512, 8)
    (16, 8)
    """
    return min(side, int(rows)), min(side, int(cols))


def feature_budgets(epsilon: float, *, count: bool = True) -> tuple[float, float]:
    """(ε of the count, ε of the coarse histogram): half and half, adding up to at most ``epsilon``;
    without a count (a public n) the histogram gets all of it.

    >>> feature_budgets(0.1), feature_budgets(0.1, count=False)
    ((0.05, 0.05), (0.0, 0.1))
    """
    if not count:
        return 0.0, float(epsilon)
    e_total, e_hist = split_custom(float(epsilon), [0.5, 0.5])
    return e_total, e_hist


def coarse_counts(counts: np.ndarray, side: int = COARSE) -> np.ndarray:
    """Block sums of ``counts`` on at most ``side`` × ``side`` near-equal blocks (public edges).

    >>> coarse_counts(np.ones((4, 6), dtype=np.int64), 2).tolist()
    [[6, 6], [6, 6]]
    """
    r, c = counts.shape
    br, bc = coarse_blocks(r, c, side)
    rows, cols = block_edges(r, br)[:-1], block_edges(c, bc)[:-1]
    return np.add.reduceat(np.add.reduceat(np.asarray(counts, dtype=np.int64), rows, axis=0), cols, axis=1)


def features_from_noisy(noisy_total: float, noisy_hist: np.ndarray, *, epsilon: float = 0.0,
                        sensitivity: int = 1) -> ShapeFeatures:
    """The shape features from the noisy count and the noisy coarse histogram (post-processing).

    >>> h = np.array([[90, 0], [5, 5]])
    >>> f = features_from_noisy(100.0, h)
    >>> round(f.concentration, 2), f.sparsity, f.top_entropy
    (0.9, 0.25, 0.0)
    """
    h = np.asarray(noisy_hist, dtype=np.float64)
    blocks = h.size
    pos = np.clip(h, 0.0, None).ravel()
    m = max(int(math.ceil(TOP_SHARE * blocks)), 1)
    top = np.sort(pos)[::-1][:m]
    mass = float(pos.sum())
    concentration = float(top.sum() / mass) if mass > 0 else TOP_SHARE
    mean_block = max(float(noisy_total), 0.0) / blocks
    sparsity = float(np.mean(h < 0.1 * mean_block)) if mean_block > 0 else 1.0
    if m > 1 and top.sum() > 0:
        p = top[top > 0] / top.sum()
        top_entropy = float(-(p * np.log(p)).sum() / math.log(m))
    else:
        top_entropy = 0.0
    return ShapeFeatures(float(noisy_total), concentration, sparsity, top_entropy,
                         int(h.shape[0]), int(h.shape[1]) if h.ndim > 1 else 1, float(epsilon), int(sensitivity))


def private_features(aggregate: Aggregate, epsilon: float, noise: NoiseSource, *,
                     public_n: int | None = None) -> ShapeFeatures:
    """Buy the features with ``epsilon`` (pure ε-DP; half on the count, half on the coarse
    histogram) from the confidential ``aggregate``; the only data access of ``auto``'s choice.
    With a ``public_n`` (already public, so free) nothing is spent on the count: it stands in for
    the noisy total and the histogram gets the whole ``epsilon``."""
    k = int(aggregate.sensitivity)
    e_total, e_hist = feature_budgets(epsilon, count=public_n is None)
    if public_n is None:
        total = float(noisy_counts(np.array([aggregate.total]), pure(e_total), k, noise)[0])
    else:
        total = float(public_n)
    hist = noisy_counts(coarse_counts(aggregate.counts), pure(e_hist), k, noise)
    return features_from_noisy(total, hist, epsilon=float(epsilon), sensitivity=k)
