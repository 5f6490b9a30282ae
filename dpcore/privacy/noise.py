"""Exact, secure noise for differentially private releases.

This module is the **only** place where randomness for a release is drawn.
It implements

* the *discrete Laplace* distribution (two-sided geometric),
  :math:`P(X = k) \\propto e^{-|k|/t}` for :math:`k \\in \\mathbb{Z}`;
* the *discrete Gaussian* distribution,
  :math:`P(X = k) \\propto e^{-k^2 / (2\\sigma^2)}`, with the rejection sampler of
  Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy",
  NeurIPS 2020 (CKS20, Algorithm 3);
* noise for real values on a power-of-two grid (OpenDP's approach; a cousin of
  Mironov's snapping mechanism): round each value to the nearest multiple of
  :math:`g = 2^k` and add :math:`g` times integer noise;
* exact distribution facts (pmf, variance, confidence half-width) used by the
  analytic error formulas elsewhere in :mod:`dpcore`: checked here, computed and
  kept (one bounded cache per fact) in :mod:`dpcore.privacy.noise_facts`.

Why not ``numpy.random.laplace``?
    Mironov ("On Significance of the Least Significant Bits for Differential
    Privacy", CCS 2012) showed that textbook floating-point Laplace samplers
    produce a porous, input-dependent set of outputs, so a handful of releases
    can distinguish neighbouring datasets; Jin et al. (S&P 2022) extended the
    attack to the Gaussian mechanism.  Every sampler here outputs integers whose
    distribution is *exactly* the stated one (up to the quality of the random
    bits): no floating-point rounding ever decides an output.

How exactness is obtained while staying vectorised
    A uniform real :math:`U \\in [0, 1)` is represented by its first ``b`` random
    bits ``u`` (``b`` = 16, 31 or 53: few bytes a draw): :math:`U \\in [u 2^{-b}, (u + 1) 2^{-b})`;
    further bits are drawn lazily when needed.  Each decision (a geometric inversion
    :math:`G = \\lfloor -t \\ln U \\rfloor`, or a Bernoulli
    :math:`[U < e^{-\\gamma}]`) is first attempted in float64 with a certified
    error margin far larger than the floating-point error; it is accepted only
    when *every* point of the interval, margin included, gives the same answer.
    The rare undecided elements (about :math:`t \\cdot 10^{-8}` per geometric,
    :math:`2^{-16}` per Gaussian coin) go to an exact per-element slow path that
    compares :math:`U` with :math:`e^{-\\gamma}` (:math:`\\gamma` an exact
    :class:`fractions.Fraction`) by interval refinement: :mod:`decimal` bounds on
    :math:`e^{-\\gamma}` at increasing precision, more random bits for :math:`U`,
    until the two intervals separate.  Since :math:`e^{-\\gamma}` is irrational
    for rational :math:`\\gamma \\neq 0` this terminates with probability one.

Randomness source
    :class:`NoiseSource` with ``seed=None`` (the default and the only setting
    for real releases, see :func:`secure_source`) reads all bits from
    :func:`os.urandom`, the operating system's CSPRNG, in one bulk call per
    batch (rounds of at most 2^18 proposals).  An integer seed selects numpy's PCG64, which is *not*
    cryptographically secure and exists only so tests are reproducible.  The
    source is never seeded from the clock and numpy's global RNG is never used.

Residual timing side channel
    The discrete Gaussian is a rejection sampler, and the rare exact slow path
    runs longer for some uniforms than for others, so the running time depends
    weakly on the noise drawn (Jin et al. 2022 exploit exactly this in
    *interactive* systems).  ``dpcore`` produces non-interactive batch releases
    in which an adversary sees only the final table, not per-cell timings, so
    this residual risk is accepted and documented rather than mitigated.
"""

from __future__ import annotations

import decimal
import math
import numbers
import os
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpcore.errors import ParameterError
from dpcore.privacy import noise_facts as _nf
from dpcore.privacy import noise_tables as _nt

__all__ = [
    "NoiseSource",
    "secure_source",
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "discrete_laplace_interval",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_gaussian_interval",
    "real_noise_epsilon",
]

#: Tests set this to ``True`` (e.g. with ``monkeypatch``) to send every element
#: through the exact slow path, so its distribution can be checked too.
_FORCE_EXACT = False

#: Largest accepted scale / sigma: keeps every output far inside int64.
_MAX_SCALE = Fraction(10**15)
_MAX_SCALE_FLOAT = float(_MAX_SCALE)  # exactly 10^15

#: Largest geometric scale t drawn from 31-bit uniform prefixes (above, 53-bit ones): a 31-bit
#: prefix leaves the float decision undecided with probability about t * 22 * 2^-31 (1e-5 at
#: 2^10), each then settled exactly on the slow path.
_SHORT_PREFIX_MAX_SCALE = Fraction(2**10)
_START_PREC = 30  # decimal digits for the first exact bound on e^{-gamma}
_PREC_STEP = 20
_LOG2E_LOWER = Fraction(144, 100)  # < log2(e) = 1.4427...


# ---------------------------------------------------------------------------
# parameter validation
# ---------------------------------------------------------------------------


def _as_positive_fraction(value, name: str) -> Fraction:
    """Convert a scale-like parameter to an exact positive :class:`Fraction`."""
    if type(value) is Fraction and 0 < value <= _MAX_SCALE:  # already exact and in range (most calls)
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(
            f"{name} must be a positive number (int, float or Fraction), got {value!r}; "
            f"pass a positive finite {name}."
        )
    try:
        frac = Fraction(value)
    except (OverflowError, ValueError):
        raise ParameterError(
            f"{name} must be finite, got {value!r}; pass a positive finite {name}."
        ) from None
    if frac <= 0:
        raise ParameterError(
            f"{name} must be > 0, got {value!r}; use a positive {name} "
            f"(larger means more noise and more privacy)."
        )
    if frac > _MAX_SCALE:
        raise ParameterError(
            f"{name} = {value!r} is too large (limit {float(_MAX_SCALE):g}): the noise would "
            f"overflow 64-bit integers; use a smaller {name} or a coarser grid."
        )
    return frac


def _as_size(size) -> tuple[int, ...]:
    """Validate ``size`` (non-negative int or tuple of them) and return a shape."""
    if type(size) is int and size >= 0:  # most calls (the samplers' own): no ABC checks
        return (size,)
    dims = size if isinstance(size, tuple) else (size,)
    shape = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or int(d) < 0:
            raise ParameterError(
                f"size must be a non-negative integer or a tuple of them, got {size!r}; "
                f"pass e.g. size=100 or size=(10, 10)."
            )
        shape.append(int(d))
    return tuple(shape)


def _as_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, numbers.Real):
        raise ParameterError(f"level must be a number in (0, 1), got {level!r}; use e.g. 0.95.")
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ParameterError(f"level must be strictly between 0 and 1, got {level!r}; use e.g. 0.95.")
    return level


def _as_granularity(granularity_exp) -> int:
    if isinstance(granularity_exp, bool) or not isinstance(granularity_exp, numbers.Integral):
        raise ParameterError(
            f"granularity_exp must be an integer k (grid step 2^k), got {granularity_exp!r}; "
            f"use e.g. -10 for a step of 2^-10."
        )
    k = int(granularity_exp)
    if not -1000 <= k <= 1000:
        raise ParameterError(
            f"granularity_exp = {k} is outside [-1000, 1000]; choose a grid step 2^k that "
            f"float64 can represent, e.g. between 2^-30 and 2^10."
        )
    return k


# ---------------------------------------------------------------------------
# exact slow path: interval refinement
# ---------------------------------------------------------------------------


class _LazyUniform:
    """A uniform real ``U`` in [0, 1) known through its first ``bits`` bits.

    ``U`` lies in ``[num / 2**bits, (num + 1) / 2**bits)``; :meth:`refine`
    appends 64 fresh random bits (the interval shrinks by ``2**-64``).
    """

    __slots__ = ("num", "bits")

    def __init__(self, num: int, bits: int) -> None:
        self.num = num
        self.bits = bits

    def refine(self, source: NoiseSource) -> None:
        self.num = (self.num << 64) | int(source.random_uint64(1)[0])
        self.bits += 64


@lru_cache(maxsize=8192)
def _exp_neg_bounds(gamma: Fraction, prec: int) -> tuple[Fraction, Fraction]:
    """Rigorous bounds ``lo < exp(-gamma) < hi`` as exact Fractions.

    ``-gamma`` is bracketed by decimal divisions rounded toward -inf / +inf at
    ``prec`` digits; :meth:`decimal.Decimal.exp` is correctly rounded (error at
    most half an ulp), so stepping one ulp outward with ``next_minus`` /
    ``next_plus`` gives certain bounds, and ``Fraction(Decimal)`` is exact.
    """
    emax, emin = decimal.MAX_EMAX, decimal.MIN_EMIN
    floor_ctx = decimal.Context(prec=prec, rounding=decimal.ROUND_FLOOR, Emax=emax, Emin=emin)
    ceil_ctx = decimal.Context(prec=prec, rounding=decimal.ROUND_CEILING, Emax=emax, Emin=emin)
    num = decimal.Decimal(-gamma.numerator)
    den = decimal.Decimal(gamma.denominator)
    a_lo = floor_ctx.divide(num, den)  # a_lo <= -gamma
    a_hi = ceil_ctx.divide(num, den)  # a_hi >= -gamma
    ctx = decimal.Context(prec=prec, Emax=emax, Emin=emin)
    lo = ctx.next_minus(ctx.exp(a_lo))
    hi = ctx.next_plus(ctx.exp(a_hi))
    return Fraction(lo), Fraction(hi)


def _uniform_below_exp(source: NoiseSource, unif: _LazyUniform, gamma: Fraction) -> bool:
    """Decide exactly whether ``U < exp(-gamma)`` (``gamma`` an exact Fraction).

    Whichever interval is wider, the uniform's prefix interval or the decimal
    bracket on ``exp(-gamma)``, is narrowed until they are disjoint.
    """
    if gamma <= 0:
        return True  # exp(-gamma) >= 1 > U
    prec = _START_PREC
    while True:
        # Cheap certain "no" for large gamma, which also keeps Decimal.exp away
        # from huge arguments (it slows down sharply there):
        # U >= num/2^bits >= 2^-(bits - bitlen(num) + 1), and
        # exp(-gamma) < 2^(-1.44 gamma) since log2(e) > 1.44.
        if unif.num and (unif.bits - unif.num.bit_length() + 1) < _LOG2E_LOWER * gamma:
            return False
        e_lo, e_hi = _exp_neg_bounds(gamma, prec)
        scale = 1 << unif.bits
        u_lo = Fraction(unif.num, scale)
        u_hi = Fraction(unif.num + 1, scale)
        if u_hi <= e_lo:
            return True
        if u_lo >= e_hi:
            return False
        if (e_hi - e_lo) >= (u_hi - u_lo):
            prec += _PREC_STEP
        else:
            unif.refine(source)


def _geometric_exact(
    source: NoiseSource, unif: _LazyUniform, t: Fraction, lo_hint: int, hi_hint: int | None
) -> int:
    """Exact ``G = max{k >= 0 : U < exp(-k/t)}`` (``P(G = k) = (1-q) q^k``, ``q = e^{-1/t}``).

    ``lo_hint`` / ``hi_hint`` come from floating point and only speed up the
    search: the answer is established by exact comparisons alone
    (``U < q^a`` and ``U >= q^b`` with ``b = a + 1``), found by galloping and
    bisection.
    """

    def below(k: int) -> bool:
        return k <= 0 or _uniform_below_exp(source, unif, Fraction(k) / t)

    a = max(int(lo_hint), 0)
    if not below(a):
        b, step = a, 1  # invariant: below(b) is False
        while True:
            a = max(b - step, 0)
            if below(a):
                break
            b, step = a, step * 2
    else:
        b = max(int(hi_hint) + 1, a + 1) if hi_hint is not None else a + 1
        step = 1
        while below(b):
            a, b, step = b, b + step, step * 2
    while b - a > 1:  # below(a) is True, below(b) is False
        mid = (a + b) // 2
        if below(mid):
            a = mid
        else:
            b = mid
    return a


# ---------------------------------------------------------------------------
# the source
# ---------------------------------------------------------------------------


class NoiseSource:
    """Source of exact discrete noise.

    Parameters
    ----------
    seed : int or None
        ``None`` (default, required for real releases): every random bit comes
        from :func:`os.urandom`, the operating system's CSPRNG.  An ``int``
        selects numpy's PCG64 seeded with it; this is reproducible but not
        secure and is meant for tests only.

    Notes
    -----
    All samplers are exact: the output distribution is exactly the stated
    pmf, assuming ideal random bits.
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            self._bitgen = None
        else:
            if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
                raise ParameterError(
                    f"seed must be None (secure randomness) or a non-negative int, got {seed!r}; "
                    f"use seed=None for real releases."
                )
            self._bitgen = np.random.PCG64(int(seed))

    @property
    def seeded(self) -> bool:
        """``True`` when this source is a seeded (non-secure, test-only) PRNG."""
        return self._bitgen is not None

    def __repr__(self) -> str:
        return f"NoiseSource({'seeded PCG64' if self.seeded else 'os.urandom'})"

    # -- raw bits -----------------------------------------------------------

    def random_uint64(self, size: int) -> np.ndarray:
        """``size`` independent uniform 64-bit words as a ``uint64`` array.

        Secure sources make one :func:`os.urandom` call per array.
        """
        (n,) = _as_size(size)
        if self._bitgen is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()
        return self._bitgen.random_raw(n).astype(np.uint64, copy=False)

    def _prefixes(self, n: int, bits: int) -> np.ndarray:
        """``n`` uniform ``bits``-bit integers (``bits`` = 16: four per 64-bit word; 32: two; 53: one)."""
        if bits == 16:
            return self.random_uint64((n + 3) // 4).view(np.uint16)[:n]
        if bits == 32:
            return self.random_uint64((n + 1) // 2).view(np.uint32)[:n]
        return self.random_uint64(n) >> np.uint64(64 - bits)

    # -- geometric / discrete Laplace ----------------------------------------

    def _geometric(self, t: Fraction, u: np.ndarray, bits: int, exact_only: bool,
                   tf: float | None = None) -> np.ndarray:
        """Draws of ``G`` with ``P(G = k) = (1 - q) q^k``, ``q = exp(-1/t)``, one per prefix in ``u``.

        Inversion: ``G = floor(-t ln U)`` for ``U`` uniform, known through its ``bits``-bit prefix
        ``u`` (``U`` in ``[u 2^-b, (u+1) 2^-b)``).  One logarithm gives ``z = -t ln(u 2^-b)``,
        the largest value of ``-t ln U`` on the interval; the smallest is above ``z - t/u``
        (since ``ln(1 + 1/u) <= 1/u``).  ``G`` is decided in float when both ends, widened by a
        certified margin, floor to the same integer; otherwise exactly by :func:`_geometric_exact`
        (which draws more bits of the same ``U``).  ``tf`` is ``float(t)`` when the caller has it.
        """
        n = u.size
        tf = float(t) if tf is None else tf
        z = u.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            width = np.divide(tf * (1.0 + _nt.REL_MARGIN), z)  # >= t ln(1 + 1/u); +inf where u == 0
            z *= 2.0**-bits
            np.log(z, out=z)
            z *= -tf  # +inf where u == 0
            if bits <= 32:  # |z| <= b t ln 2 where u >= 1: one absolute margin covers z's float error
                margin: float | np.ndarray = (tf * bits * 0.6931471805599453 + 1.0) * _nt.REL_MARGIN + _nt.ABS_MARGIN
            else:
                margin = z * _nt.REL_MARGIN + _nt.ABS_MARGIN
            k_hi = np.add(z, margin)
            np.floor(k_hi, out=k_hi)
            z -= width
            z -= margin
            k_lo = np.floor(z, out=z)  # nan where u == 0 (inf - inf): undecided
        same = k_lo == k_hi
        if exact_only:
            undecided = np.arange(n)
        elif same.all():  # every draw decided in float (almost always): no index of the undecided
            return k_hi.astype(np.int64)
        else:
            undecided = np.flatnonzero(~same)
        out = np.where(same, k_hi, 0.0).astype(np.int64)
        for i in undecided:
            lo_hint = int(k_lo[i]) if math.isfinite(k_lo[i]) and k_lo[i] > 0 else 0
            hi_hint = int(k_hi[i]) if math.isfinite(k_hi[i]) else None
            out[i] = _geometric_exact(self, _LazyUniform(int(u[i]), bits), t, lo_hint, hi_hint)
        return out

    def _laplace_proposals(self, t: Fraction, m: int, exact_only: bool, tf: float | None = None,
                           short: bool | None = None) -> np.ndarray:
        """``m`` proposals ``(1 - 2B) V`` (geometric ``V``, fair sign ``B``, one random word each),
        :data:`~dpcore.privacy.noise_tables.REJECT` where ``B = 1, V = 0``.

        ``t <= 2^10``: a 32-bit word gives ``B`` (top bit) and a 31-bit prefix of ``V``'s uniform;
        above, a 64-bit word gives ``B`` (lowest bit) and a 53-bit prefix.  Large batches read most
        proposals from :func:`~dpcore.privacy.noise_tables.laplace_table` (by ``B`` and the prefix's top 16 bits), the rest by
        :meth:`_geometric`.  ``tf`` (``float(t)``) and ``short`` (``t <= 2^10``) when the caller has them.
        """
        if short is None:
            short = t <= _SHORT_PREFIX_MAX_SCALE
        if short:
            w = self._prefixes(m, 32)
            u, bits, sign = w & np.uint32(0x7FFFFFFF), 31, w >> np.uint32(31)
        else:
            w = self.random_uint64(m)
            u, bits, sign = w >> np.uint64(11), 53, w & np.uint64(1)
        if exact_only or m < _nt.TABLE_MIN_BATCH:  # every proposal by _geometric: no table, no index
            v = self._geometric(t, u, bits, exact_only, tf)
            return np.where(sign.astype(bool), np.where(v == 0, _nt.REJECT, -v), v)
        if short:
            index = w >> np.uint32(15)  # B then the top 16 bits of the prefix
        else:
            index = (w >> np.uint64(48)) | (sign << np.uint64(16))
        y = _nt.laplace_table(t).take(index.astype(np.intp))
        rest = np.flatnonzero(y == _nt.UNDECIDED)
        if rest.size:
            v = self._geometric(t, u[rest], bits, exact_only, tf)
            negative = sign[rest].astype(bool)
            y[rest] = np.where(negative, np.where(v == 0, _nt.REJECT, -v), v)
        return y

    def _discrete_laplace(self, t: Fraction, n: int, exact_only: bool = False) -> np.ndarray:
        """``n`` discrete Laplace draws with exact scale ``t``, by sign and magnitude.

        A geometric ``V`` (:meth:`_geometric`) and a fair sign ``B`` give ``(1 - 2B) V``, except
        that ``B = 1, V = 0`` (a second way to make 0) is rejected: the sign step of CKS20
        Algorithm 2, so ``P(Y = y)`` is proportional to ``q^|y|``.  One geometric per accepted
        draw with probability ``(1 + q)/2`` (instead of two for ``G1 - G2``).  Batched like
        :meth:`_discrete_gaussian`: each round proposes enough for the missing draws at the
        acceptance rate ``(1 + q)/2`` and keeps the first accepted ones, in order.
        """
        tf, short = float(t), t <= _SHORT_PREFIX_MAX_SCALE
        rate = (1.0 + math.exp(-1.0 / tf)) / 2.0
        out, filled = None, 0
        while filled < n:
            need = n - filled
            m = min(int(need / rate + 4.0 * math.sqrt(need * (1.0 - rate)) / rate) + 16, _nt.ROUND_MAX)
            y = self._laplace_proposals(t, m, exact_only, tf, short)
            good = y[y != _nt.REJECT][:need]
            if out is None:
                if good.size == n:  # one round (almost always): its accepted draws are the output
                    return good
                out = np.empty(n, dtype=np.int64)
            out[filled:filled + good.size] = good
            filled += good.size
        return np.empty(n, dtype=np.int64) if out is None else out

    def discrete_laplace(self, scale, size: int | tuple) -> np.ndarray:
        """Draw exact discrete Laplace noise.

        .. math:: P(X = k) = \\frac{1 - q}{1 + q} q^{|k|}, \\quad q = e^{-1/t},
                  \\quad k \\in \\mathbb{Z}

        sampled as a fair sign times a geometric :math:`V`, :math:`P(V = k) = (1 - q) q^k`,
        rejecting the negative zero (Canonne, Kamath & Steinke 2020, Algorithm 2's sign
        step).  Adding it to an integer query of L1 sensitivity :math:`\\Delta` gives
        :math:`\\varepsilon = \\Delta / t`.

        Parameters
        ----------
        scale : int, float or Fraction
            :math:`t > 0`, converted exactly with ``Fraction(scale)``.
        size : int or tuple of int
            Output shape.

        Returns
        -------
        numpy.ndarray of int64
        """
        t = _as_positive_fraction(scale, "scale")
        shape = _as_size(size)
        n = math.prod(shape)
        return self._discrete_laplace(t, n, _FORCE_EXACT).reshape(shape)

    # -- discrete Gaussian --------------------------------------------------

    def _discrete_gaussian(self, sigma: Fraction, n: int, exact_only: bool = False) -> np.ndarray:
        """CKS20 Algorithm 3, vectorised and batched.

        Each round makes enough discrete Laplace proposals (:meth:`_laplace_proposals`, whose
        negative zeros are rejected here with the Gaussian's coin) for the missing outputs at the
        expected acceptance rate, and the first accepted ones fill them in order (accepted
        proposals are i.i.d. draws of the target, so which are kept may depend on their count,
        never on their values).  The coin ``U < exp(-gamma)``,
        ``gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2)``, reads a 16-bit prefix of ``U``: decided
        against certified float bounds (:mod:`dpcore.privacy.noise_tables`) except
        when ``exp(-gamma)`` falls in the prefix's interval (about 1 in 65,536), then exactly
        (:func:`_uniform_below_exp`, more bits of the same ``U``).
        """
        s2 = sigma * sigma
        t = Fraction(math.floor(sigma) + 1)
        shift = s2 / t  # exact sigma^2 / t
        inv_2s2 = 1.0 / (2.0 * float(s2))
        shift_f = float(shift)
        out, filled, proposed, accepted = None, 0, 0, 0
        tf, short = float(t), t <= _SHORT_PREFIX_MAX_SCALE
        expected = _nt.dgauss_acceptance(sigma) * (1.0 + math.exp(-1.0 / tf)) / 2.0
        while filled < n:
            need = n - filled
            # proposals for the expected acceptance rate (then the rate seen so far), with room
            # for its spread: one round almost always (rounds of at most _nt.ROUND_MAX)
            rate = expected if accepted == 0 else accepted / proposed
            m = min(int(need / rate + 4.0 * math.sqrt(need * (1.0 - rate)) / rate) + 16, _nt.ROUND_MAX)
            y = self._laplace_proposals(t, m, exact_only, tf, short)
            v = self._prefixes(m, _nt.COIN_BITS)
            proposal = y != _nt.REJECT
            a = np.abs(y)
            a[~proposal] = 0  # rejected anyway; keeps the table small
            if exact_only:
                accept, undecided = np.zeros(m, dtype=bool), np.flatnonzero(proposal)
            elif m >= _nt.TABLE_MIN_BATCH and (top := int(a.max())) < 4 * m:
                accept, undecided = _nt.coins_by_table(a, v, top, shift_f, inv_2s2)
            else:
                accept, undecided = _nt.coins_by_log(a, v, shift_f, inv_2s2)
            accept &= proposal
            for i in undecided:
                if proposal[i]:
                    exact_gamma = (abs(int(y[i])) - shift) ** 2 / (2 * s2)
                    accept[i] = _uniform_below_exp(self, _LazyUniform(int(v[i]), _nt.COIN_BITS), exact_gamma)
            good = y[accept][:need]
            if out is None:
                if good.size == n:  # one round (almost always): its accepted draws are the output
                    return good
                out = np.empty(n, dtype=np.int64)
            out[filled:filled + good.size] = good
            filled += good.size
            proposed += m
            accepted += int(np.count_nonzero(accept))
        return np.empty(n, dtype=np.int64) if out is None else out

    def discrete_gaussian(self, sigma, size: int | tuple) -> np.ndarray:
        """Draw exact discrete Gaussian noise.

        .. math:: P(X = k) = \\frac{e^{-k^2 / (2\\sigma^2)}}
                  {\\sum_{j \\in \\mathbb{Z}} e^{-j^2 / (2\\sigma^2)}}

        Canonne–Kamath–Steinke (2020) Algorithm 3: with
        :math:`t = \\lfloor \\sigma \\rfloor + 1`, draw :math:`Y` discrete
        Laplace(:math:`t`) and accept with probability
        :math:`\\exp(-(|Y| - \\sigma^2/t)^2 / (2\\sigma^2))`, else repeat.
        :math:`\\sigma^2` is the exact Fraction ``Fraction(sigma)**2``.  Adding
        it to an integer query of L2 sensitivity :math:`\\Delta` satisfies
        :math:`\\rho`-zCDP with :math:`\\rho = \\Delta^2 / (2\\sigma^2)`.

        Parameters
        ----------
        sigma : int, float or Fraction
            :math:`\\sigma > 0`.
        size : int or tuple of int
            Output shape.

        Returns
        -------
        numpy.ndarray of int64
        """
        s = _as_positive_fraction(sigma, "sigma")
        shape = _as_size(size)
        n = math.prod(shape)
        return self._discrete_gaussian(s, n, _FORCE_EXACT).reshape(shape)

    def discrete(self, family: str, scale, size: int | tuple) -> np.ndarray:
        """Integer noise of the exact family a plan names (the first item of
        :func:`dpcore.privacy.calibration.noise_for_cost`): :meth:`discrete_laplace` of scale ``t``
        for ``"discrete_laplace"``, :meth:`discrete_gaussian` with ``σ = scale`` for
        ``"discrete_gaussian"``; shape ``size``.  Any other name is refused: a typo must never draw the
        other distribution."""
        if family == "discrete_laplace":
            return self.discrete_laplace(scale, size)
        if family == "discrete_gaussian":
            return self.discrete_gaussian(scale, size)
        raise ParameterError(f"Unknown noise family {family!r}: use 'discrete_laplace' or 'discrete_gaussian'.")

    # -- real values on a 2^k grid ------------------------------------------

    def _on_grid(self, values, param, granularity_exp, name: str, sampler) -> np.ndarray:
        k = _as_granularity(granularity_exp)
        p = _as_positive_fraction(param, name)
        try:
            x = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError(
                "values must be numbers (an array-like of floats); convert or drop "
                "non-numeric entries first."
            ) from None
        if not np.all(np.isfinite(x)):
            raise ParameterError(
                "values contain NaN or infinity; clamp or drop them before adding noise."
            )
        units = np.rint(np.ldexp(x, -k))  # x / 2^k is exact (power-of-two scaling)
        if units.size and np.max(np.abs(units)) >= 2.0**62:
            raise ParameterError(
                f"values are too large for the grid 2^{k}: they need more than 62 bits; "
                f"use a larger granularity_exp (coarser grid)."
            )
        grid_param = p / (Fraction(2) ** k)  # exact param / 2^k
        if grid_param > _MAX_SCALE:
            raise ParameterError(
                f"{name} / 2^{k} is too large for 64-bit noise; use a larger granularity_exp "
                f"(coarser grid)."
            )
        noise = sampler(grid_param, units.size, _FORCE_EXACT).reshape(units.shape)
        noisy_units = units.astype(np.int64) + noise  # exact integer release
        # Converting the integer release to float is post-processing.
        return np.ldexp(noisy_units.astype(np.float64), k)

    def laplace_on_grid(self, values, scale, granularity_exp: int) -> np.ndarray:
        """Add Laplace-type noise to real values without floating-point leaks.

        Each value is rounded to the nearest multiple of :math:`g = 2^k`, and
        :math:`g \\cdot X` is added with :math:`X` discrete Laplace of exact
        scale :math:`t / g`, so the output is :math:`g (\\mathrm{round}(x/g) + X)`,
        always a multiple of :math:`g`.  Privacy: see :func:`real_noise_epsilon`,
        :math:`\\varepsilon = (\\Delta + g) / t`.

        Parameters
        ----------
        values : array-like of float
            Finite values (NaN/inf raise :class:`~dpcore.errors.ParameterError`).
        scale : int, float or Fraction
            Laplace scale :math:`t > 0` in the units of ``values``.
        granularity_exp : int
            :math:`k`; the grid step is :math:`2^k`.

        Returns
        -------
        numpy.ndarray of float64, same shape as ``values``.
        """
        return self._on_grid(values, scale, granularity_exp, "scale", self._discrete_laplace)

    def gaussian_on_grid(self, values, sigma, granularity_exp: int) -> np.ndarray:
        """Add Gaussian-type noise to real values on the grid :math:`2^k`.

        Output :math:`g (\\mathrm{round}(x/g) + X)` with :math:`X` discrete
        Gaussian of exact parameter :math:`\\sigma / g`.  Rounding can move each
        changed value by one more grid step, so with :math:`m` values changed by
        a neighbour use :math:`\\Delta_2 + \\sqrt{m}\\,g` as the L2 sensitivity:
        :math:`\\rho = (\\Delta_2 + \\sqrt{m}\\,g)^2 / (2\\sigma^2)`.

        Returns
        -------
        numpy.ndarray of float64, same shape as ``values``.
        """
        return self._on_grid(values, sigma, granularity_exp, "sigma", self._discrete_gaussian)


def secret_key(n_bytes: int = 32) -> bytes:
    """``n_bytes`` secret random bytes from :func:`os.urandom` (never seeded).

    The per-install secret that keys the budget database's population keys
    (:mod:`dpcore.privacy.ledger_store`) comes from here, so that every random bit the
    library draws has one source.
    """
    return os.urandom(int(n_bytes))


def secure_source() -> NoiseSource:
    """The production noise source: ``NoiseSource(None)``, backed by :func:`os.urandom`."""
    return NoiseSource(None)



# ---------------------------------------------------------------------------
# exact distribution facts (no randomness)
# ---------------------------------------------------------------------------


def discrete_laplace_pmf(k, scale) -> np.ndarray:
    """Discrete Laplace pmf :math:`\\tanh(1/(2t)) e^{-|k|/t} = \\frac{1-q}{1+q} q^{|k|}`.

    Parameters
    ----------
    k : array-like of int
    scale : int, float or Fraction
        :math:`t > 0`.

    Returns
    -------
    numpy.ndarray of float
    """
    t = float(_as_positive_fraction(scale, "scale"))
    k = np.abs(np.asarray(k, dtype=np.float64))
    return math.tanh(0.5 / t) * np.exp(-k / t)


def _parameter(value, name: str) -> Fraction | float:
    """A checked scale or sigma as the key of :mod:`dpcore.privacy.noise_facts`' caches: a float in
    range as it is (it equals, and hashes as, its exact Fraction: no conversion on a cache hit), else
    :func:`_as_positive_fraction`."""
    if type(value) is float and 0.0 < value <= _MAX_SCALE_FLOAT:
        return value
    return _as_positive_fraction(value, name)


def discrete_laplace_variance(scale) -> float:
    """Variance :math:`2q / (1 - q)^2` with :math:`q = e^{-1/t}` (always below :math:`2t^2`)."""
    return _nf.dlap_variance(_parameter(scale, "scale"))


def discrete_laplace_interval(scale, level: float = 0.95) -> int:
    """Smallest integer :math:`h \\ge 0` with :math:`P(|X| \\le h) \\ge` ``level``.

    Uses :math:`P(|X| > h) = 2 q^{h+1} / (1 + q)`, so
    :math:`h = \\lceil -t \\ln((1 - \\mathrm{level})(1 + q)/2) \\rceil - 1`
    (then checked against the definition and adjusted by one if rounding
    demands).
    """
    t = _parameter(scale, "scale")
    return _nf.dlap_interval(t, _as_level(level))


def discrete_gaussian_pmf(k, sigma) -> np.ndarray:
    """Discrete Gaussian pmf :math:`e^{-k^2/(2\\sigma^2)} / Z`, :math:`Z = \\sum_j e^{-j^2/(2\\sigma^2)}`."""
    s = _as_positive_fraction(sigma, "sigma")
    k = np.asarray(k, dtype=np.float64)
    return np.exp(-(k * k) / (2.0 * float(s * s))) / _nf.dgauss_normaliser(s)


def discrete_gaussian_variance(sigma) -> float:
    """Variance :math:`\\sum_k k^2 p(k)`, slightly below :math:`\\sigma^2`.

    Summed from the pmf for :math:`\\sigma \\le 10^4`; above, Poisson summation
    shows the difference from :math:`\\sigma^2` is below
    :math:`4\\pi^2\\sigma^4 e^{-2\\pi^2\\sigma^2}` (far below float precision),
    so :math:`\\sigma^2` is returned.
    """
    return _nf.dgauss_variance(_parameter(sigma, "sigma"))


def discrete_gaussian_interval(sigma, level: float = 0.95) -> int:
    """Smallest integer :math:`h \\ge 0` with :math:`P(|X| \\le h) \\ge` ``level``.

    :math:`P(|X| \\le h) = (w_0 + 2\\sum_{k=1}^{h} w_k)/Z` summed from the pmf
    for :math:`\\sigma \\le 10^4`.  Above, the midpoint (continuity-corrected)
    form :math:`\\operatorname{erf}((h + 1/2)/(\\sigma\\sqrt2))` is used; its
    error (order :math:`1/\\sigma^2`) is far below the step between
    consecutive :math:`h` (order :math:`1/\\sigma`).
    """
    s = _parameter(sigma, "sigma")
    return _nf.dgauss_interval(s, _as_level(level))


def real_noise_epsilon(sensitivity: float, scale, granularity_exp: int) -> float:
    """Privacy of :meth:`NoiseSource.laplace_on_grid`: :math:`\\varepsilon = (\\Delta + 2^k)/t`.

    Rounding to the :math:`2^k` grid can move two neighbouring values apart by
    up to one more grid step, so the integer query has sensitivity
    :math:`(\\Delta + 2^k)/2^k` grid units, and the noise scale is :math:`t/2^k`.

    This is for neighbours that differ in **one** released value.  If a
    neighbour can change :math:`m` values of a vector (L1 sensitivity
    :math:`\\Delta`), pass ``sensitivity`` such that the bound still holds,
    i.e. use :math:`\\varepsilon = (\\Delta + m 2^k)/t` (call with
    ``sensitivity = Delta + (m - 1) * 2**k``).
    """
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real):
        raise ParameterError(f"sensitivity must be a number >= 0, got {sensitivity!r}.")
    if not math.isfinite(sensitivity) or sensitivity < 0:
        raise ParameterError(
            f"sensitivity must be finite and >= 0, got {sensitivity!r}; check the clamping bounds."
        )
    t = _as_positive_fraction(scale, "scale")
    k = _as_granularity(granularity_exp)
    return float((Fraction(sensitivity) + Fraction(2) ** k) / t)
