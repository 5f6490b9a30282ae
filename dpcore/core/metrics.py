"""Error metrics of a release against the truth (curator-only diagnostics).

None of these numbers may be published: they are computed from true counts.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

#: Smoothing of the relative error, absolute: RE = |c - ĉ| / max(c, 20) (htf.md §1.5).
DEFAULT_SMOOTHING = 20.0


def relative_errors(true: ArrayLike, est: ArrayLike, smoothing: float = DEFAULT_SMOOTHING) -> np.ndarray:
    """``100 · |c − ĉ| / max(c, s)`` per query, in percent."""
    t = np.asarray(true, dtype=np.float64)
    e = np.asarray(est, dtype=np.float64)
    return 100.0 * np.abs(t - e) / np.maximum(t, float(smoothing))


def mre(true: ArrayLike, est: ArrayLike, smoothing: float = DEFAULT_SMOOTHING) -> float:
    """Mean relative error in percent with the sanity bound ``smoothing`` (HTF Eq. 3 + §5)."""
    return float(np.mean(relative_errors(true, est, smoothing)))


def mae(true: ArrayLike, est: ArrayLike) -> float:
    return float(np.mean(np.abs(np.asarray(true, float) - np.asarray(est, float))))


def rmse(true: ArrayLike, est: ArrayLike) -> float:
    d = np.asarray(true, float) - np.asarray(est, float)
    return float(np.sqrt(np.mean(d * d)))


def max_abs(true: ArrayLike, est: ArrayLike) -> float:
    return float(np.max(np.abs(np.asarray(true, float) - np.asarray(est, float))))


def summary(true: ArrayLike, est: ArrayLike, smoothing: float = DEFAULT_SMOOTHING) -> dict[str, float]:
    return {
        "mre_percent": mre(true, est, smoothing),
        "mae": mae(true, est),
        "rmse": rmse(true, est),
        "max_abs_error": max_abs(true, est),
    }
