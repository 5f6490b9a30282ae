"""Privelet: differentially private releases through wavelet transforms.

Xiao, Wang & Gehrke, "Differential Privacy via Wavelet Transforms", ICDE 2010
(TKDE 2011).  This module follows the project's corrected spec
(Xiao, Wang & Gehrke, ICDE 2010, with the paper's typos corrected).

Pipeline (Xiao, Wang & Gehrke 2010, Sec. III–VI, a single linear code path for Basic, Privelet and Privelet+)
    1. Transform the frequency matrix ``x`` along every axis: the Haar wavelet
       transform on a transformed *ordinal* axis (zero-padded at the high end to
       a power of two), the hierarchy-based nominal wavelet transform on a
       transformed *nominal* axis, and the identity on an axis with
       ``transform=False`` (Privelet+'s ``S_A``).  This is the standard
       (tensor-product) decomposition.
    2. Add Laplace noise of magnitude ``λ / W(c)`` to every coefficient ``c``,
       ``W`` the product of the per-axis weights.
    3. Invert (nominal axes run the mandatory sibling-group mean subtraction
       first) and crop the padding.  ``noisy`` is real-valued and unbiased.

Unit of privacy
    ``sensitivity`` Δ is the largest L1 change of ``x`` between neighbours, as
    everywhere in ``dpcore`` (``Aggregate.sensitivity``): 1 for add/remove one
    record, ``k`` with a cap of ``k`` records per person.  The paper's
    replace-one-record model (its factor 2, Xiao, Wang & Gehrke 2010, Sec. II) is
    ``sensitivity=2``.  With generalised sensitivity ρ (Xiao, Wang & Gehrke 2010, Sec. III, Def. 3), changing
    cells by δ_j (Σ|δ_j| <= Δ) moves the weighted coefficients by
    ``Σ_c W(c)|Δc| <= Δ ρ``.

Noise without floating-point leaks, and its privacy accounting
    Noise comes only from :meth:`dpcore.privacy.noise.NoiseSource.laplace_on_grid`
    (exact discrete Laplace on a power-of-two grid; never ``numpy.random``).
    Coefficients are grouped by their exact (rational) weight ``W``; group
    ``c`` gets scale ``t_c = λ / W_c`` and its own grid ``g_c = 2^{k_c}`` with::

        k_c = floor(log2(η ρ / (N_S W_c))),   η = 2^-10 (ROUNDING_SHARE)

    where ``N_S`` is the largest number of coefficients one cell influences
    (product over axes of ``1 + l`` for Haar, ``1 + Σ`` sibling-group sizes
    along a leaf's path for nominal, 1 for identity).  Rounding to the grid can
    move a changed coefficient by one more step, so ``laplace_on_grid`` costs
    ``(|Δc| + g_c) / t_c = W_c (|Δc| + g_c) / λ`` on each changed coefficient
    (``dpcore.privacy.noise.real_noise_epsilon``).  At most Δ cells change, each
    touching at most ``N_S`` coefficients with ``g_c W_c <= η ρ / N_S``, so the
    whole release costs at most::

        ε_total <= (Δ ρ + Δ η ρ) / λ.

    We therefore set ``λ = Δ ρ (1 + η) / ε`` (exact rational arithmetic), so the
    total, grid rounding included, is at most ``ε``.  The price is a noise
    magnitude 0.1 % above the continuous-Laplace mechanism's.  Coefficients of
    weight ``+inf`` (nominal nodes without siblings, always exactly 0) get no
    noise.

Exactness of the reported variances
    :func:`query_variance` is ``2 λ^2 Π_i V_i(S_i)`` (ours), the variance of
    the continuous Laplace mechanism with this λ.  The discrete Laplace of
    scale ``t`` on a grid ``g`` has variance ``2q g^2 / (1-q)^2`` with
    ``q = e^{-g/t}``, below ``2t^2`` by a relative ``(g/t)^2 / 12`` (here
    ``g/t <= 2^-10 / N_S``, i.e. below 1e-7); the grid rounding of the exact
    coefficients is deterministic and below ``g_c / 2`` each.

Transforms are vectorised: every 1-D transform acts on the first axis of a
``(len, rest)`` view; Haar costs O(m) per axis with reshapes, nominal uses
``np.add.reduceat`` group sums per level.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Literal

import numpy as np

from dpcore.errors import ParameterError
from dpcore.estimate.privelet_exact import exact_grid_units
from dpcore.privacy.noise import NoiseSource

__all__ = [
    "Axis",
    "PriveletRelease",
    "ROUNDING_SHARE",
    "forward",
    "inverse",
    "coefficient_weights",
    "generalized_sensitivity",
    "noise_magnitude",
    "release",
    "query_variance",
    "basic_query_variance",
    "level_variances",
    "node_variances",
    "worst_case_bound",
]

#: η: share of the noise magnitude reserved for the grid-rounding term (see module doc).
ROUNDING_SHARE = Fraction(1, 1024)


# ---------------------------------------------------------------------------------------------
# axes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Axis:
    """One attribute of the frequency matrix.

    ``groups`` (nominal only): ``groups[j][leaf]`` is the id (0..m_j-1) of the
    leaf's ancestor at hierarchy level ``j`` (``j = 0`` just below the implicit
    root, the last just above the leaves).  Levels must nest.  ``()`` means the
    root sits directly above the leaves (e.g. Gender, ``h = 2``).
    ``transform=False`` leaves the axis untransformed (Privelet+ identity, weight 1).
    """

    name: str
    kind: Literal["ordinal", "nominal"]
    size: int
    groups: tuple[np.ndarray, ...] = ()
    transform: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("ordinal", "nominal"):
            raise ParameterError(f"Axis '{self.name}': kind must be 'ordinal' or 'nominal' (got {self.kind!r}).")
        if isinstance(self.size, bool) or not isinstance(self.size, numbers.Integral) or self.size < 1:
            raise ParameterError(f"Axis '{self.name}': size must be a whole number >= 1 (got {self.size!r}).")
        object.__setattr__(self, "size", int(self.size))
        object.__setattr__(self, "transform", bool(self.transform))
        groups = tuple(self.groups or ())
        if groups and self.kind != "nominal":
            raise ParameterError(f"Axis '{self.name}': only nominal axes have a hierarchy (groups).")
        arrays = []
        for j, g in enumerate(groups):
            a = np.asarray(g)
            if a.ndim != 1 or a.size != self.size:
                raise ParameterError(
                    f"Axis '{self.name}': groups[{j}] must list one ancestor id per leaf "
                    f"({self.size} values, got shape {a.shape})."
                )
            if a.size and not np.issubdtype(a.dtype, np.integer):
                if not np.all(np.mod(a, 1) == 0):
                    raise ParameterError(f"Axis '{self.name}': groups[{j}] must hold whole-number ids.")
            a = a.astype(np.int64)
            if a.min() < 0 or np.any(np.bincount(a) == 0):
                raise ParameterError(
                    f"Axis '{self.name}': the ids of groups[{j}] must be exactly 0..m-1 "
                    "(every id used, none negative)."
                )
            if j > 0:
                parent = np.empty(int(a.max()) + 1, dtype=np.int64)
                parent[a] = arrays[-1]
                if not np.array_equal(parent[a], arrays[-1]):
                    raise ParameterError(
                        f"Axis '{self.name}': groups[{j}] does not nest inside groups[{j - 1}]: "
                        "some group's leaves have different ancestors one level up."
                    )
            a.setflags(write=False)
            arrays.append(a)
        object.__setattr__(self, "groups", tuple(arrays))

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def ordinal(cls, name: str, size: int, transform: bool = True) -> Axis:
        """An ordered attribute (Haar wavelet when transformed)."""
        return cls(name, "ordinal", size, (), transform)

    @classmethod
    def nominal(
        cls, name: str, groups: Sequence[Sequence[int]], transform: bool = True, size: int | None = None
    ) -> Axis:
        """A nominal attribute with a public hierarchy (see the class doc for ``groups``).

        ``size`` is ``len(groups[-1])`` when ``groups`` is given, else required.
        """
        groups = tuple(groups or ())
        if groups:
            n = len(groups[-1])
            if size is not None and int(size) != n:
                raise ParameterError(f"Axis '{name}': size {size} differs from len(groups[-1]) = {n}.")
            size = n
        elif size is None:
            raise ParameterError(f"Axis '{name}': a nominal axis without groups needs its size.")
        return cls(name, "nominal", size, groups, transform)

    # -- identity ---------------------------------------------------------------------------
    def _key(self) -> tuple:
        return (self.name, self.kind, self.size, self.transform, tuple(g.tobytes() for g in self.groups))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axis) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # -- the 1-D transform --------------------------------------------------------------------
    @cached_property
    def _tf(self) -> _Transform:
        if not self.transform:
            return _Identity(self.size)
        if self.kind == "ordinal":
            return _Haar(self.size)
        return _Nominal(self.size, self.groups)

    @property
    def height(self) -> int:
        """Number of hierarchy levels of a nominal axis, root and leaves included."""
        return len(self.groups) + 2

    @property
    def n_coefficients(self) -> int:
        return self._tf.n_coeffs


class _Transform:
    """A 1-D linear transform acting on the first axis of a (len, rest) array."""

    size: int
    n_coeffs: int
    rho: int  # generalised sensitivity (max weighted column L1 norm)
    support: int  # max number of coefficients with a nonzero entry in one column

    def forward(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def inverse(self, c: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def forward_int(self, z: np.ndarray) -> tuple[np.ndarray, int]:
        """``(M·forward(z), M)`` in exact integers (``z`` integer, int64 or object)."""
        return z.copy(), 1

    def weights(self) -> np.ndarray:
        raise NotImplementedError

    def weight_classes(self) -> tuple[np.ndarray, list[Fraction | None]]:
        """Class id of every coefficient and the exact weight of each class (None = +inf)."""
        raise NotImplementedError

    def variance_factor(self, q: np.ndarray) -> float:
        """V(q) = Σ_c (a_c / W_c)^2 with a the adjoint of the reconstruction applied to q."""
        raise NotImplementedError


class _Identity(_Transform):
    def __init__(self, size: int) -> None:
        self.size = self.n_coeffs = size
        self.rho = self.support = 1

    def forward(self, x):
        return np.array(x, dtype=np.float64)

    def inverse(self, c):
        return np.array(c, dtype=np.float64)

    def weights(self):
        return np.ones(self.size)

    def weight_classes(self):
        return np.zeros(self.size, dtype=np.int64), [Fraction(1)]

    def variance_factor(self, q):
        return float(np.sum(np.square(q)))


class _Haar(_Transform):
    """Haar wavelet on ``2^l`` padded cells; storage ``[c0 | level 1 | ... | level l]``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.l = (size - 1).bit_length()  # ceil(log2 size); 0 for size 1
        self.n_coeffs = self.padded = 1 << self.l
        self.rho = self.support = 1 + self.l

    def forward(self, x):
        n = x.shape[0]
        if n < self.padded:
            a = np.zeros((self.padded,) + x.shape[1:], dtype=np.float64)
            a[:n] = x
        else:
            a = np.asarray(x, dtype=np.float64)
        blocks = []
        while a.shape[0] > 1:
            pairs = a.reshape((a.shape[0] // 2, 2) + a.shape[1:])
            left, right = pairs[:, 0], pairs[:, 1]
            blocks.append((left - right) * 0.5)
            a = (left + right) * 0.5
        return np.concatenate([a] + blocks[::-1], axis=0)

    def forward_int(self, z):
        # unnormalised sums: the stage-m difference is 2^m times its coefficient
        a = np.zeros((self.padded,) + z.shape[1:], dtype=z.dtype)
        a[: z.shape[0]] = z
        blocks, m = [], 0
        while a.shape[0] > 1:
            m += 1
            pairs = a.reshape((a.shape[0] // 2, 2) + a.shape[1:])
            blocks.append((pairs[:, 0] - pairs[:, 1]) * (1 << (self.l - m)))
            a = pairs[:, 0] + pairs[:, 1]
        return np.concatenate([a] + blocks[::-1], axis=0), 1 << self.l

    def inverse(self, c):
        a = c[0:1]
        pos = 1
        for i in range(1, self.l + 1):
            half = 1 << (i - 1)
            d = c[pos : pos + half]
            pos += half
            out = np.empty((2 * half,) + c.shape[1:], dtype=np.float64)
            out[0::2] = a + d
            out[1::2] = a - d
            a = out
        return a[: self.size]

    def _exponents(self) -> np.ndarray:
        """log2 of every weight: base l, level i gets l - i + 1."""
        e = np.empty(self.padded, dtype=np.int64)
        e[0] = self.l
        for i in range(1, self.l + 1):
            e[1 << (i - 1) : 1 << i] = self.l - i + 1
        return e

    def weights(self):
        return np.ldexp(1.0, self._exponents())

    def weight_classes(self):
        return self._exponents(), [Fraction(2) ** e for e in range(self.l + 1)]

    def variance_factor(self, q):
        # reconstruction columns are orthogonal with squared norms W_c, so V = ||F q||^2
        return float(np.sum(np.square(self.forward(np.asarray(q, dtype=np.float64)))))


class _Nominal(_Transform):
    """Hierarchy-based nominal wavelet (Xiao, Wang & Gehrke 2010, Sec. V); levels 0 (root) .. h-1 (leaves)."""

    def __init__(self, size: int, groups: tuple[np.ndarray, ...]) -> None:
        self.size = size
        h = self.h = len(groups) + 2
        self.n = [1] + [int(g.max()) + 1 for g in groups] + [size]
        self.parent: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        for k in range(1, h):
            if k == 1:
                p = np.zeros(self.n[1], dtype=np.int64)
            elif k == h - 1:
                p = groups[-1]
            else:
                p = np.empty(self.n[k], dtype=np.int64)
                p[groups[k - 1]] = groups[k - 2]
            self.parent.append(np.asarray(p, dtype=np.int64))
        self.fan = [np.zeros(0, dtype=np.int64)]  # fan[k][i]: number of children of node i of level k-1
        self.order: list[np.ndarray | None] = [None]
        self.starts = [np.zeros(0, dtype=np.int64)]
        self.f_node = [np.ones(1, dtype=np.int64)]  # fanout of each node's parent
        for k in range(1, h):
            p = self.parent[k]
            fan = np.bincount(p, minlength=self.n[k - 1])
            self.fan.append(fan)
            self.order.append(None if np.all(p[1:] >= p[:-1]) else np.argsort(p, kind="stable"))
            self.starts.append(np.concatenate(([0], np.cumsum(fan)[:-1])).astype(np.int64))
            self.f_node.append(fan[p])
        self.offsets = np.concatenate(([0], np.cumsum(self.n))).astype(np.int64)
        self.n_coeffs = int(self.offsets[-1])
        # exact rho (Xiao, Wang & Gehrke 2010, Sec. V) and the support of one cell's column, by walking up from each leaf
        anc = np.arange(size)
        rho = np.ones(size, dtype=np.int64)
        sup = np.ones(size, dtype=np.int64)
        for k in range(h - 1, 0, -1):
            f = self.f_node[k][anc]
            rho += f >= 2
            sup += np.where(f >= 2, f, 0)
            anc = self.parent[k][anc]
        self.rho = int(rho.max())
        self.support = int(sup.max())

    def groupsum(self, k: int, x: np.ndarray) -> np.ndarray:
        """Sum the level-k rows of ``x`` into their level-(k-1) parents."""
        order = self.order[k]
        xs = x if order is None else x[order]
        return np.add.reduceat(xs, self.starts[k], axis=0)

    def _col(self, k: int, v: np.ndarray, ndim: int) -> np.ndarray:
        return v.reshape((-1,) + (1,) * (ndim - 1))

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        ls: list[np.ndarray] = [x] * self.h
        for k in range(self.h - 1, 0, -1):
            ls[k - 1] = self.groupsum(k, ls[k])
        out = [ls[0]]
        for k in range(1, self.h):
            mean = ls[k - 1] / self._col(k, self.fan[k], x.ndim)
            out.append(ls[k] - mean[self.parent[k]])
        return np.concatenate(out, axis=0)

    def forward_int(self, z):
        L = math.lcm(*(int(f) for fan in self.fan[1:] for f in np.unique(fan).tolist() if f > 0))
        if L >= 2**62:  # many distinct fan-outs (US counties: their lcm has over 100 digits): Python ints
            z = np.asarray(z).astype(object)
        ls: list[np.ndarray] = [z] * self.h
        for k in range(self.h - 1, 0, -1):
            ls[k - 1] = self.groupsum(k, ls[k])
        out = [ls[0] * L]
        for k in range(1, self.h):
            per = np.array([L // int(f) if f > 0 else 0 for f in self.fan[k].tolist()],
                           dtype=object if z.dtype == object else np.int64)
            out.append(ls[k] * L - (ls[k - 1] * self._col(k, per, z.ndim))[self.parent[k]])
        return np.concatenate(out, axis=0), L

    def _split(self, c: np.ndarray) -> list[np.ndarray]:
        return [c[self.offsets[k] : self.offsets[k + 1]] for k in range(self.h)]

    def mean_subtract(self, k: int, ck: np.ndarray) -> np.ndarray:
        gmean = self.groupsum(k, ck) / self._col(k, self.fan[k], ck.ndim)
        return ck - gmean[self.parent[k]]

    def inverse(self, c):
        parts = self._split(np.asarray(c, dtype=np.float64))
        ls = parts[0]
        for k in range(1, self.h):
            ck = self.mean_subtract(k, parts[k])  # the mandatory refinement (spec D10)
            ls = ck + (ls / self._col(k, self.fan[k], c.ndim))[self.parent[k]]
        return ls

    def weights(self):
        w = [np.ones(1)]
        for k in range(1, self.h):
            f = self.f_node[k].astype(np.float64)
            with np.errstate(divide="ignore"):
                w.append(np.where(f >= 2, f / (2 * f - 2), np.inf))
        return np.concatenate(w)

    def weight_classes(self):
        f_all = np.concatenate([np.ones(1, dtype=np.int64)] + self.f_node[1:])
        f_all[0] = 0  # the root: weight 1 (class of its own)
        uniq, cls = np.unique(f_all, return_inverse=True)
        fr: list[Fraction | None] = []
        for f in uniq.tolist():
            fr.append(Fraction(1) if f == 0 else (Fraction(f, 2 * f - 2) if f >= 2 else None))
        return cls.astype(np.int64), fr

    def adjoint(self, q: np.ndarray) -> list[np.ndarray]:
        """Mean-subtracted adjoint of the reconstruction: our a_c, per level."""
        g = np.asarray(q, dtype=np.float64)
        parts: list[np.ndarray] = [g] * self.h
        for k in range(self.h - 1, 0, -1):
            parts[k] = g
            g = self.groupsum(k, g) / self.fan[k]
        parts[0] = g
        return [parts[0]] + [self.mean_subtract(k, parts[k]) for k in range(1, self.h)]

    def variance_factor(self, q):
        a = self.adjoint(q)
        total = float(a[0][0] ** 2)
        for k in range(1, self.h):
            f = self.f_node[k].astype(np.float64)
            inv_w = np.where(f >= 2, (2 * f - 2) / np.maximum(f, 1), 0.0)
            total += float(np.sum(np.square(a[k] * inv_w)))
        return total

    def node_variances(self) -> list[np.ndarray]:
        """V of every node-total query, level by level (our recursion)."""
        out = [np.ones(1)]
        for k in range(1, self.h):
            f = self.f_node[k].astype(np.float64)
            vp = out[-1][self.parent[k]]
            out.append(np.where(f >= 2, 4 * (1 - 1 / f) ** 3 + vp / f**2, vp))
        return out


# ---------------------------------------------------------------------------------------------
# multi-dimensional transform
# ---------------------------------------------------------------------------------------------


def _axes(axes: Sequence[Axis]) -> tuple[Axis, ...]:
    axes = tuple(axes)
    if not axes or not all(isinstance(a, Axis) for a in axes):
        raise ParameterError("axes must be a non-empty sequence of privelet.Axis objects.")
    return axes


def _along(x: np.ndarray, axis: int, fn) -> np.ndarray:
    """Apply ``fn`` (acting on the first axis of a 2-D array) along ``axis`` of ``x``."""
    moved = np.moveaxis(x, axis, 0)
    rest = moved.shape[1:]
    y = fn(moved.reshape(moved.shape[0], -1))
    return np.moveaxis(y.reshape((y.shape[0],) + rest), 0, axis)


def forward(x: np.ndarray, axes: Sequence[Axis]) -> np.ndarray:
    """HN transform coefficients of ``x`` (ordinal axes zero-padded to a power of two)."""
    axes = _axes(axes)
    x = np.asarray(x, dtype=np.float64)
    expected = tuple(a.size for a in axes)
    if x.shape != expected:
        raise ParameterError(f"x has shape {x.shape}, but the axes describe {expected}.")
    c = x
    for i, ax in enumerate(axes):
        c = _along(c, i, ax._tf.forward)
    return np.ascontiguousarray(c)


def inverse(c: np.ndarray, axes: Sequence[Axis]) -> np.ndarray:
    """Back to x's shape: nominal axes run mean subtraction first; padding is cropped."""
    axes = _axes(axes)
    c = np.asarray(c, dtype=np.float64)
    expected = tuple(a.n_coefficients for a in axes)
    if c.shape != expected:
        raise ParameterError(f"coefficients have shape {c.shape}, but the axes describe {expected}.")
    for i in range(len(axes) - 1, -1, -1):
        c = _along(c, i, axes[i]._tf.inverse)
    return np.ascontiguousarray(c)


def _outer(vectors: Sequence[np.ndarray]) -> np.ndarray:
    d = len(vectors)
    out = np.ones((1,) * d)
    for i, v in enumerate(vectors):
        shape = [1] * d
        shape[i] = v.size
        out = out * v.reshape(shape)
    return out


def coefficient_weights(axes: Sequence[Axis]) -> np.ndarray:
    """Product weights W(c), shape of :func:`forward`'s output (``inf`` = no noise)."""
    axes = _axes(axes)
    return _outer([a._tf.weights() for a in axes])


def _rho(axes: tuple[Axis, ...]) -> int:
    return math.prod(a._tf.rho for a in axes)


def generalized_sensitivity(axes: Sequence[Axis]) -> float:
    """ρ (Xiao, Wang & Gehrke 2010, Sec. III, Def. 3, Theorem 2): product of ``1 + l`` (Haar), the exact nominal ρ (<= h)
    and 1 (untransformed axes); equals the largest weighted column L1 norm."""
    return float(_rho(_axes(axes)))


def _check_sensitivity(sensitivity) -> int:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Integral) or sensitivity < 1:
        raise ParameterError(f"sensitivity must be a whole number >= 1 (got {sensitivity!r}).")
    return int(sensitivity)


def _check_epsilon(epsilon) -> Fraction:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterError(f"The privacy budget ε must be a number (got {epsilon!r}).")
    eps = float(epsilon)
    if not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"The privacy budget ε must be a positive number (got {epsilon!r}).")
    return Fraction(epsilon) if isinstance(epsilon, Fraction) else Fraction(eps)


def _lam_exact(axes: tuple[Axis, ...], epsilon, sensitivity) -> Fraction:
    eps = _check_epsilon(epsilon)
    delta = _check_sensitivity(sensitivity)
    return Fraction(delta * _rho(axes)) * (1 + ROUNDING_SHARE) / eps


def noise_magnitude(axes: Sequence[Axis], epsilon: float, *, sensitivity: int = 1) -> float:
    """λ = Δ ρ (1 + η) / ε: coefficient c gets Laplace(λ / W(c))."""
    return float(_lam_exact(_axes(axes), epsilon, sensitivity))


def _floor_log2(x: Fraction) -> int:
    k = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** k > x:
        k -= 1
    while Fraction(2) ** (k + 1) <= x:
        k += 1
    return k


@dataclass(frozen=True)
class _ClassPlan:
    """The ε-free part of the noise plan: public, depends on the axes only (arrays read only)."""

    classes: np.ndarray  # class id of every coefficient (shape of forward's output)
    weights: list[Fraction | None]  # exact weight of each class; None = +inf (no noise)
    exponents: list[int | None]  # grid exponent k of each class
    order: np.ndarray  # coefficients grouped by class: class j at order[bounds[j]:bounds[j + 1]]
    bounds: np.ndarray


def _build_class_plan(axes: tuple[Axis, ...]) -> _ClassPlan:
    per_axis = [a._tf.weight_classes() for a in axes]
    rho = _rho(axes)
    n_s = math.prod(a._tf.support for a in axes)
    combo_shape = tuple(len(fr) for _, fr in per_axis)
    combo_class = np.empty(combo_shape, dtype=np.int64)
    index: dict[Fraction | None, int] = {}
    for combo in itertools.product(*(range(n) for n in combo_shape)):
        ws = [per_axis[i][1][j] for i, j in enumerate(combo)]
        w = None if any(v is None for v in ws) else math.prod(ws, start=Fraction(1))
        combo_class[combo] = index.setdefault(w, len(index))
    weights = list(index)
    # cached process-wide: the smallest dtypes that hold the ids (8 B -> 1 B and 4 B a cell at 4,096²)
    cls_dtype = np.min_scalar_type(max(len(weights) - 1, 0))
    classes = combo_class.astype(cls_dtype)[np.ix_(*(cls for cls, _ in per_axis))]
    exps = [None if w is None else _floor_log2(ROUNDING_SHARE * rho / (n_s * w)) for w in weights]
    cls = classes.reshape(-1)
    order = np.argsort(cls, kind="stable")
    order = order.astype(np.int32 if cls.size <= np.iinfo(np.int32).max else np.int64)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(cls, minlength=len(weights)))))
    for a in (classes, order, bounds):
        a.setflags(write=False)
    return _ClassPlan(classes, weights, exps, order, bounds)


@functools.lru_cache(maxsize=2)  # a 4,096² plan holds ~84 MB (classes 1 B + order 4 B a cell)
def _class_plan(axes: tuple[Axis, ...]) -> _ClassPlan:
    """The weight classes, their grids and the coefficients of each class (:func:`_build_class_plan`):
    public inputs only and free of ε, made once per grid (read only)."""
    return _build_class_plan(axes)


# ---------------------------------------------------------------------------------------------
# release
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriveletRelease:
    """A Privelet release: the real-valued noisy matrix and its public parameters.

    ``lam`` is the Laplace magnitude λ (coefficient c got scale λ / W(c));
    ``granularity_exp`` is the finest grid exponent used (each weight class has
    its own grid, see the module doc); ``sensitivity`` is Δ.
    """

    noisy: np.ndarray
    epsilon: float
    sensitivity: int
    lam: float
    granularity_exp: int
    axes: tuple[Axis, ...]


def release(
    x: np.ndarray, axes: Sequence[Axis], epsilon: float, noise: NoiseSource, *, sensitivity: int = 1
) -> PriveletRelease:
    """ε-DP Privelet / Privelet+ release of the count matrix ``x`` (Xiao, Wang & Gehrke 2010, Sec. III–VI).

    The total privacy cost, grid rounding included, is at most ``epsilon`` for
    neighbours whose matrices differ by at most ``sensitivity`` in L1 (module doc).
    """
    axes = _axes(axes)
    if not isinstance(noise, NoiseSource):
        raise ParameterError("noise must be a dpcore.privacy.noise.NoiseSource (use secure_source()).")
    arr = np.asarray(x)
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ParameterError("x must be a numeric array of counts.")
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ParameterError("x must hold whole-number counts.")
    lam = _lam_exact(axes, epsilon, sensitivity)  # checked on every call, before the (cached) plan
    plan = _class_plan(axes)
    coeffs = forward(arr, axes)
    flat = coeffs.reshape(-1)
    # the grid values come from the exact coefficients (float ones can be off by more than a step)
    units = exact_grid_units(arr, [a._tf for a in axes], plan.classes, plan.exponents).reshape(-1)
    for j, (w, k) in enumerate(zip(plan.weights, plan.exponents, strict=True)):
        if w is None:
            continue  # weight +inf: the coefficient is always exactly 0 and gets no noise
        idx = plan.order[plan.bounds[j] : plan.bounds[j + 1]]
        u = units[idx]
        if u.dtype != object and (u.size == 0 or int(np.abs(u).max()) < 2**53):
            # exact in float64: laplace_on_grid's rounding gives back exactly these units
            flat[idx] = noise.laplace_on_grid(np.ldexp(u.astype(np.float64), k), lam / w, k)
        else:
            drawn = noise.discrete_laplace(lam / w / Fraction(2) ** k, idx.size)
            flat[idx] = np.ldexp((u.astype(object) + drawn.astype(object)).astype(np.float64), k)
    noisy = inverse(coeffs, axes)
    finite = [k for k in plan.exponents if k is not None]
    return PriveletRelease(
        noisy=noisy,
        epsilon=float(epsilon),
        sensitivity=int(sensitivity),
        lam=float(lam),
        granularity_exp=min(finite) if finite else 0,
        axes=axes,
    )


# ---------------------------------------------------------------------------------------------
# exact, data-free variances (ours)
# ---------------------------------------------------------------------------------------------


def _query_vector(axis: Axis, spec) -> np.ndarray:
    if isinstance(spec, tuple) and len(spec) == 2 and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in spec
    ):
        lo, hi = int(spec[0]), int(spec[1])
        if not 0 <= lo <= hi <= axis.size:
            raise ParameterError(
                f"Axis '{axis.name}': range ({lo}, {hi}) must satisfy 0 <= lo <= hi <= {axis.size}."
            )
        q = np.zeros(axis.size)
        q[lo:hi] = 1.0
        return q
    m = np.asarray(spec)
    if m.dtype != bool or m.shape != (axis.size,):
        raise ParameterError(
            f"Axis '{axis.name}': a query is a half-open range (lo, hi) or a boolean mask of "
            f"{axis.size} leaves."
        )
    return m.astype(np.float64)


def _factors(axes: tuple[Axis, ...], query) -> list[float]:
    query = list(query)
    if len(query) != len(axes):
        raise ParameterError(f"The query has {len(query)} parts but there are {len(axes)} axes.")
    return [a._tf.variance_factor(_query_vector(a, s)) for a, s in zip(axes, query, strict=True)]


def query_variance(
    axes: Sequence[Axis], epsilon: float, query: Sequence, *, sensitivity: int = 1
) -> float:
    """Exact noise variance ``2 λ^2 Π_i V_i(S_i)`` of a box query (no data needed).

    Per axis: a half-open index range ``(lo, hi)`` or a boolean mask over its leaves.
    """
    axes = _axes(axes)
    lam = float(_lam_exact(axes, epsilon, sensitivity))
    return 2.0 * lam * lam * math.prod(_factors(axes, query))


def basic_query_variance(axes: Sequence[Axis], epsilon: float, query: Sequence, *, sensitivity: int = 1) -> float:
    """Basic / Identity baseline: ``2 (Δ/ε)^2`` times the number of cells covered."""
    axes = _axes(axes)
    eps = float(_check_epsilon(epsilon))
    delta = _check_sensitivity(sensitivity)
    cells = math.prod(float(np.sum(_query_vector(a, s))) for a, s in zip(axes, list(query), strict=True))
    return 2.0 * (delta / eps) ** 2 * cells


def node_variances(
    axis: Axis, epsilon: float, other_axes: Sequence[Axis] = (), *, sensitivity: int = 1
) -> list[np.ndarray]:
    """Variance of every area total of a nominal axis, per level (root, level 0, ..., leaves),
    summed over all values of ``other_axes`` (their full real domains)."""
    if not isinstance(axis, Axis) or axis.kind != "nominal":
        raise ParameterError("node_variances needs a nominal Axis.")
    others = tuple(other_axes)
    all_axes = _axes((axis,) + others)
    lam = float(_lam_exact(all_axes, epsilon, sensitivity))
    rest = math.prod(a._tf.variance_factor(np.ones(a.size)) for a in others)
    if axis.transform:
        per_node = axis._tf.node_variances()
    else:  # identity: a node's total sums its leaves' independent noise
        per_node = [np.array([float(axis.size)])]
        for g in axis.groups:
            per_node.append(np.bincount(g).astype(np.float64))
        per_node.append(np.ones(axis.size))
    return [2.0 * lam * lam * rest * v for v in per_node]


def level_variances(
    axis: Axis, epsilon: float, other_axes: Sequence[Axis] = (), *, sensitivity: int = 1
) -> list[float]:
    """Variance of one area's total at each level (root, level 0, ..., leaves) of a nominal
    axis, summed over all values of the other axes; the mean over the level's areas
    (areas of one level differ only through their ancestors' fanouts)."""
    return [float(np.mean(v)) for v in node_variances(axis, epsilon, other_axes, sensitivity=sensitivity)]


def worst_case_bound(axes: Sequence[Axis], epsilon: float, *, sensitivity: int = 1) -> float:
    """The paper's worst-case variance bound (Theorem 3 / Eq. 7) with this module's λ:
    ``2 λ^2 Π H_i``, ``H = (2 + l)/2`` (Haar), 4 (nominal), the domain size (identity)."""
    axes = _axes(axes)
    lam = float(_lam_exact(axes, epsilon, sensitivity))
    h = 1.0
    for a in axes:
        tf = a._tf
        if isinstance(tf, _Identity):
            h *= a.size
        elif isinstance(tf, _Haar):
            h *= (2 + tf.l) / 2
        else:
            h *= 4.0
    return 2.0 * lam * lam * h
