"""Error metrics of a release against the truth (curator-only diagnostics).

None of these numbers may be published: they are computed from true counts.  Every kind's
``empirical_errors`` (points: :func:`dpcore.points.diagnostics.empirical_errors` and
:mod:`dpcore.points.evaluate`; areas: :func:`dpcore.areas.tree_plans.empirical_errors`; flows:
:func:`dpcore.flows.diagnostics.empirical_errors`) computes its errors here, so each definition
lives in one place.

The relative error uses a *sanity bound* ``s``: ``RE = |c − ĉ| / max(c, s)``, so that queries
with tiny true answers do not dominate the mean (Shaham, Ghinita, Ahuja, Krumm & Shahabi, HTF,
SIGSPATIAL 2021, Eq. 3 and §5, with ``s = 20``; the same convention as Qardaji, Yang & Li, ICDE
2013 and Cormode et al., ICDE 2012).  O/D releases use ``s = 1`` over the true positive pairs
(Boninsegna & Silvestri, PoPETs 2025, Sec. 5).

>>> summary([0, 10, 100], [3, 10, 90])
{'mre_percent': 8.333333333333334, 'mae': 4.333333333333333, 'rmse': 6.027713773341708, 'max_abs_error': 10.0}
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["DEFAULT_SMOOTHING", "mae", "max_abs", "mre", "relative_errors", "rmse", "summary"]

#: Smoothing of the relative error, absolute: RE = |c - ĉ| / max(c, 20) (Shaham et al. 2021, Sec. 5.1).
DEFAULT_SMOOTHING = 20.0


def relative_errors(true: ArrayLike, est: ArrayLike, smoothing: float = DEFAULT_SMOOTHING, *,
                    percent: bool = True) -> np.ndarray:
    """Relative error of every query with a sanity bound (HTF, SIGSPATIAL 2021, Eq. 3).

    Parameters
    ----------
    true, est : array of float
        True and released answers, one per query.
    smoothing : float
        The sanity bound ``s`` of ``|c − ĉ| / max(c, s)`` (20 for MRE, 1 for O/D pairs).
    percent : bool
        ``100 · |c − ĉ| / max(c, s)`` (default) or the plain ratio.

    >>> relative_errors([0, 10, 100], [3, 10, 90]).tolist()
    [15.0, 0.0, 10.0]
    >>> relative_errors([0, 10, 100], [3, 10, 90], 1, percent=False).tolist()
    [3.0, 0.0, 0.1]
    """
    t = np.asarray(true, dtype=np.float64)
    e = np.asarray(est, dtype=np.float64)
    if percent:
        return 100.0 * np.abs(t - e) / np.maximum(t, float(smoothing))
    return np.abs(t - e) / np.maximum(t, float(smoothing))


def mre(true: ArrayLike, est: ArrayLike, smoothing: float = DEFAULT_SMOOTHING) -> float:
    """Mean relative error in percent with the sanity bound ``smoothing`` (HTF Eq. 3 + §5).

    >>> mre([0, 10, 100], [3, 10, 90])
    8.333333333333334
    """
    return float(np.mean(relative_errors(true, est, smoothing)))


def mae(true: ArrayLike, est: ArrayLike, *, over: int | None = None) -> float:
    """Mean absolute error ``Σ|c − ĉ| / n``.

    ``over``: the number of cells ``n`` the mean runs over when the arrays list only some of
    them and the others have no error (an O/D table's pairs absent from both truth and release);
    by default the length of the arrays.

    >>> mae([0, 10, 100], [3, 10, 90]), mae([0, 10, 100], [3, 10, 90], over=13)
    (4.333333333333333, 1.0)
    """
    err = np.abs(np.asarray(true, float) - np.asarray(est, float))
    return float(np.mean(err)) if over is None else float(np.sum(err) / over)


def rmse(true: ArrayLike, est: ArrayLike, *, over: int | None = None) -> float:
    """Root mean squared error ``√(Σ(c − ĉ)² / n)`` (``over`` as in :func:`mae`).

    >>> rmse([0, 10, 100], [3, 10, 90], over=109)
    1.0
    """
    d = np.asarray(true, float) - np.asarray(est, float)
    return float(np.sqrt(np.mean(d * d))) if over is None else float(np.sqrt(np.sum(d * d) / over))


def max_abs(true: ArrayLike, est: ArrayLike) -> float:
    """Largest absolute error ``max |c − ĉ|`` (0 with no cells).

    >>> max_abs([0, 10, 100], [3, 10, 90]), max_abs([], [])
    (10.0, 0.0)
    """
    err = np.abs(np.asarray(true, float) - np.asarray(est, float))
    return float(err.max()) if err.size else 0.0


def summary(true: ArrayLike, est: ArrayLike, smoothing: float = DEFAULT_SMOOTHING) -> dict[str, float]:
    """MRE (percent, sanity bound ``smoothing``), MAE, RMSE and the largest absolute error."""
    return {
        "mre_percent": mre(true, est, smoothing),
        "mae": mae(true, est),
        "rmse": rmse(true, est),
        "max_abs_error": max_abs(true, est),
    }
