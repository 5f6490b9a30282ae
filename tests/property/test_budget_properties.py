"""Hypothesis invariants of dpcore.privacy.budget and .calibration: splits, the Ledger and the zCDP conversion."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpcore.errors import BudgetError
from dpcore.privacy.budget import (
    CAP_TOLERANCE,
    PrivacyCost,
    approx_dp_to_zcdp,
    zcdp_to_approx_dp,
)
from dpcore.privacy.calibration import split, split_custom, split_geometric, split_uniform
from dpcore.privacy.ledger import Ledger

totals = st.floats(min_value=1e-9, max_value=1e6, allow_nan=False, allow_infinity=False)
ks = st.integers(min_value=1, max_value=200)
ratios = st.floats(min_value=0.05, max_value=20.0)
weight = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=1000),
)
weight_lists = st.lists(weight, min_size=1, max_size=60).filter(lambda w: any(x > 0 for x in w))


def check_parts(parts: list[float], total: float, k: int) -> None:
    assert len(parts) == k
    assert all(p >= 0 and math.isfinite(p) for p in parts)
    s = math.fsum(parts)
    assert s <= total
    assert s >= total * (1 - 1e-12)


# ---------------------------------------------------------------------------------------------
# splits
# ---------------------------------------------------------------------------------------------


@given(total=totals, k=ks)
def test_uniform_split(total: float, k: int) -> None:
    parts = split_uniform(total, k)
    check_parts(parts, total, k)
    assert split(total, k, "uniform") == parts


@given(total=totals, k=ks, ratio=ratios)
def test_geometric_split(total: float, k: int, ratio: float) -> None:
    parts = split_geometric(total, k, ratio)
    check_parts(parts, total, k)
    # part i proportional to ratio**i: compare against the normalised closed form,
    # absolute error relative to the total (the last part also absorbs rounding)
    top = k - 1 if ratio >= 1 else 0
    w = [ratio ** (i - top) for i in range(k)]
    w_sum = math.fsum(w)
    for p, wi in zip(parts, w, strict=True):
        assert abs(p - total * wi / w_sum) <= 1e-12 * total


@given(total=totals, weights=weight_lists)
def test_custom_split_is_proportional(total: float, weights: list[float]) -> None:
    parts = split_custom(total, weights)
    check_parts(parts, total, len(weights))
    w_sum = math.fsum(float(w) for w in weights)
    for p, w in zip(parts, weights, strict=True):
        assert abs(p - total * (w / w_sum)) <= 1e-12 * total
        if w == 0:
            assert p == 0
    assert split(total, len(weights), "custom", weights=weights) == parts


# ---------------------------------------------------------------------------------------------
# ledger
# ---------------------------------------------------------------------------------------------

caps = st.one_of(
    st.builds(PrivacyCost, st.just("pure"), st.floats(min_value=0.01, max_value=10.0)),
    st.builds(PrivacyCost, st.just("zcdp"), st.floats(min_value=0.001, max_value=5.0)),
)


@st.composite
def requests(draw: st.DrawFn, cap: PrivacyCost) -> list[PrivacyCost]:
    """Spend requests: random amounts, exact fractions of the cap and repeats of them."""
    n = draw(st.integers(min_value=1, max_value=30))
    out = []
    for _ in range(n):
        kind = draw(st.sampled_from(["random", "fraction", "pure_in_any"]))
        if kind == "fraction":
            parts = draw(st.integers(min_value=1, max_value=12))
            out.append(PrivacyCost(cap.definition, cap.value / parts))
        elif kind == "pure_in_any":
            out.append(PrivacyCost("pure", draw(st.floats(min_value=1e-4, max_value=3.0))))
        else:
            out.append(
                PrivacyCost(
                    cap.definition, draw(st.floats(min_value=1e-6, max_value=cap.value * 0.6))
                )
            )
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cap=caps)
def test_ledger_never_overspends(data: st.DataObject, cap: PrivacyCost) -> None:
    ledger = Ledger(cap)
    limit = Fraction(cap.value) * (1 + CAP_TOLERANCE)
    model = Fraction(0)  # independent model of the exact spent total
    accepted: list[float] = []
    for cost in data.draw(requests(cap)):
        before = (ledger.spent, ledger.remaining, ledger.entries, ledger.to_dict()["entries"])
        try:
            charge = ledger.charge_of(cost)
        except BudgetError:
            # zCDP cost on a pure cap: never chargeable
            assert cap.definition == "pure" and cost.definition == "zcdp"
            continue
        should_accept = model + Fraction(charge) <= limit
        assert ledger.can_spend(cost) == should_accept
        try:
            entry = ledger.spend(cost, "r")
        except BudgetError:
            assert not should_accept
            after = (ledger.spent, ledger.remaining, ledger.entries, ledger.to_dict()["entries"])
            assert after == before
            continue
        assert should_accept
        assert entry.charged == charge
        model += Fraction(charge)
        accepted.append(charge)
        assert Fraction(ledger.spent) <= limit
    assert ledger.spent == float(sum(map(Fraction, accepted), Fraction(0)))
    assert [e.charged for e in ledger.entries] == accepted
    assert ledger.spent <= cap.value * (1 + 1e-9)
    assert ledger.remaining >= 0


@settings(max_examples=60, deadline=None)
@given(cap=st.floats(min_value=0.01, max_value=50.0), n=st.integers(min_value=1, max_value=40))
def test_equal_shares_fill_the_cap_exactly(cap: float, n: int) -> None:
    """n spends of cap/n (rounded to float) are all allowed; nothing noticeable fits after."""
    ledger = Ledger(PrivacyCost("pure", cap))
    share = cap / n
    for _ in range(n):
        ledger.spend(PrivacyCost("pure", share), "share")
    assert not ledger.can_spend(PrivacyCost("pure", cap * 1e-8))


# ---------------------------------------------------------------------------------------------
# zCDP -> (eps, delta)
# ---------------------------------------------------------------------------------------------

rhos = st.floats(min_value=1e-6, max_value=1e3)
deltas = st.floats(min_value=1e-12, max_value=0.5)
# The infimum is found numerically; two minimisations can differ by float rounding only.
REL = 1e-12


@given(r1=rhos, r2=rhos, delta=deltas)
def test_conversion_increasing_in_rho(r1: float, r2: float, delta: float) -> None:
    lo, hi = sorted((r1, r2))
    assume(lo < hi)
    e_lo, e_hi = zcdp_to_approx_dp(lo, delta), zcdp_to_approx_dp(hi, delta)
    assert e_lo <= e_hi * (1 + REL) + 1e-15
    if e_lo > 0:
        # strictly increasing wherever it is positive (d eps / d rho = alpha* > 1)
        assert e_hi >= e_lo + (hi - lo) * (1 - 1e-9) - REL * e_hi


@given(rho=rhos, d1=deltas, d2=deltas)
def test_conversion_decreasing_in_delta(rho: float, d1: float, d2: float) -> None:
    small, big = sorted((d1, d2))
    assert zcdp_to_approx_dp(rho, small) * (1 + REL) + 1e-15 >= zcdp_to_approx_dp(rho, big)


@given(rho=rhos, delta=deltas)
def test_conversion_never_above_classic(rho: float, delta: float) -> None:
    eps = zcdp_to_approx_dp(rho, delta)
    assert 0 <= eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))


@settings(max_examples=30, deadline=None)
@given(eps=st.floats(min_value=0.01, max_value=20.0), delta=st.sampled_from([1e-5, 1e-6, 1e-9]))
def test_inverse_conversion(eps: float, delta: float) -> None:
    rho = approx_dp_to_zcdp(eps, delta)
    back = zcdp_to_approx_dp(rho, delta)
    assert back <= eps
    assert back >= eps - 1e-9
