"""The data-free O/D plan (ODMechanism.plan_tree): level names and sizes, the budget split, the noise
per level against the accounting tables of Boninsegna & Silvestri (PoPETs 2025, Sec. 5 and App. B;
classic Lemma 3 conversion), copy levels, pure ε, and the refusals of bad options.  Printed table
values are oracles from outside the code: a computed value must round to them."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pandas as pd
import pytest
from od_testing import (
    LN_INV_DELTA,
    Recorder,
    check_estimates,
    check_tree_release,
    classic_rho,
    make_states,
    tree_h,
)

from dpcore import catalog
from dpcore.data.hierarchy import Hierarchy
from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms import vanilla_gauss
from dpcore.flows.tree import hierarchy_from_prefixes, level_name
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def states() -> Hierarchy:
    """3 states with 2, 3 and 1 counties (prefix codes)."""
    return make_states()


def test_plan_levels_names_kinds_and_domain_sizes(states: Hierarchy) -> None:
    p = catalog.get("od", "inftda").plan_tree(states, states, budget.zcdp(1.0))
    assert [lv.name for lv in p.levels] == ["total", "total>state", "state", "state>county", "county"]
    assert [lv.kind for lv in p.levels] == ["total", "cross", "intra", "cross", "intra"]
    assert [lv.pairs for lv in p.levels] == [1, 3, 9, 18, 36]
    assert [(lv.origin_level, lv.destination_level) for lv in p.levels] == [
        ("total", "total"), ("total", "state"), ("state", "state"), ("state", "county"), ("county", "county")]
    assert [lv.branching for lv in p.levels] == [1.0, 3.0, 3.0, 2.0, 2.0]
    po = catalog.get("od", "inftda").plan_tree(states, None, budget.zcdp(1.0), orientation="origin")
    assert [lv.name for lv in po.levels] == ["total", "state>total", "state", "county>state", "county"]
    assert [lv.pairs for lv in po.levels] == [1, 3, 9, 18, 36]
    # different origin and destination hierarchies: intra levels name both
    other = tree_h([2, 2], "B")
    px = catalog.get("od", "inftda").plan_tree(states, other, budget.zcdp(1.0))
    assert px.levels[2].name == "state>lv1" and px.levels[4].name == "county>lv2"
    assert [lv.pairs for lv in px.levels] == [1, 2, 6, 12, 24]
    assert level_name(states, states, 1, 2) == "state>county"
    assert level_name(states, states, 2, 2) == "county"
    with pytest.raises(ParameterError, match="same number of levels"):
        catalog.get("od", "inftda").plan_tree(states, tree_h([2]), budget.zcdp(1.0))


# ε → (ρ total, σ at T = 6, 8, 16, VanillaGauss σ per leaf), spec §5.3 table
# (printed values: a computed value must round to them, i.e. lie within half a unit of the last digit)
TABLE_53 = {
    0.1: (1.3535e-4, ("210.5", "243", "344"), "86.0"),
    1.0: (1.32154e-2, ("21.3", "24.6", "34.8"), "8.70"),
    10.0: (1.07988, ("2.36", "2.72", "3.85"), "0.962"),
}


def matches_printed(value: float, printed: str) -> bool:
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(value - float(printed)) <= 0.5 * 10.0 ** -decimals


@pytest.mark.parametrize("eps", sorted(TABLE_53))
def test_sigma_per_node_matches_the_accounting_table(eps: float) -> None:
    rho_tab, sigmas, vanilla = TABLE_53[eps]
    rho = classic_rho(eps)
    assert rho == pytest.approx(rho_tab, rel=5e-5)
    assert budget.approx_dp_to_zcdp_classic(eps, 1e-8) == pytest.approx(rho, rel=1e-12)
    # inverse check (spec §5.3): ρ + 2√(ρ ln(1/δ)) = ε
    assert rho + 2 * math.sqrt(rho * LN_INV_DELTA) == pytest.approx(eps, rel=1e-12)
    for g, sig_tab in zip((3, 4, 8), sigmas, strict=True):
        h = tree_h([2] * g)  # binary: no copy level
        T = 2 * g
        p = catalog.get("od", "inftda").plan_tree(h, h, budget.zcdp(rho))
        assert p.depth == T and not p.levels[0].measured and p.total_public
        scales = [lv.scale for lv in p.levels[1:]]
        assert all(lv.measured for lv in p.levels[1:])
        assert all(lv.noise == "discrete_gaussian" for lv in p.levels[1:])
        # σ = √(T/ρ) for bounded m = 1 with a uniform split (§2.2 line 3); never below it
        for s in scales:
            assert s == pytest.approx(math.sqrt(T / rho), rel=1e-12)
            assert Fraction(s) ** 2 >= Fraction(2) * T / 2 / Fraction(rho) * (1 - Fraction(1, 10**12))
        assert matches_printed(scales[0], sig_tab), (scales[0], sig_tab)
        # composition: Σ GS₂,ℓ²/(2σ_ℓ²) ≤ ρ exactly, and within 1e-9 relative
        spent = sum(Fraction(lv.l2_sensitivity) ** 2 / (2 * Fraction(lv.scale) ** 2) for lv in p.levels[1:])
        assert spent <= Fraction(rho)
        assert float(spent) >= rho * (1 - 1e-9)
        assert math.fsum(lv.share for lv in p.levels) <= rho
        pv = catalog.get("od", "vanilla_gauss").plan_tree(h, h, budget.zcdp(rho))
        assert matches_printed(pv.levels[-1].scale, vanilla), (pv.levels[-1].scale, vanilla)
        assert [lv.measured for lv in pv.levels] == [False] * T + [True]


# Italy-shaped hierarchy (20 regions, 110 provinces, 8,092 municipalities; spec §1.4, §6.3):
# ε → guaranteed bound B_ℓ(0.05) at L1…L6 and the VanillaGauss SD at L0…L6, as printed in §6.3
TABLE_63 = {
    0.1: (("1540", "3536", "5721", "8067", "10741", "13703"),
          ("695548", "155529", "34777", "14829", "6323", "737", "86")),
    1.0: (("156", "358", "579", "816", "1087", "1387"),
          ("70391", "15740", "3520", "1501", "640", "75", "9")),
    10.0: (("17", "40", "64", "90", "120", "153"),
           ("7787", "1741", "389", "166", "71", "8", "1")),
}


@pytest.fixture(scope="module")
def italy() -> Hierarchy:
    return tree_h([20, [5] * 10 + [6] * 10, [74] * 62 + [73] * 48])


@pytest.mark.parametrize("eps", sorted(TABLE_63))
def test_bound_and_vanilla_sd_match_the_italy_calibration_table(italy: Hierarchy, eps: float,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """B_ℓ(β) = 2 Σ_{κ≤ℓ} σ_κ √(2 ln(2ℓN_κ/β)) (spec §3.2) and VanillaGauss SD σ_leaf·√(N_T/N_ℓ)
    (§6.2 item 6) against the numbers printed in §6.3 (T = 6, uniform, bounded, δ = 1e-8).
    VanillaGauss cannot release Italy (65 M cells), but its plan is what the table describes."""
    monkeypatch.setattr(vanilla_gauss, "VANILLA_MAX_CELLS", 10**9)
    assert italy.sizes == [1, 20, 110, 8092]
    bounds, vanilla = TABLE_63[eps]
    rho = classic_rho(eps)
    p = catalog.get("od", "inftda").plan_tree(italy, italy, budget.zcdp(rho))
    assert [lv.pairs for lv in p.levels] == [1, 20, 400, 2200, 12100, 890_120, 65_480_464]
    assert p.levels[0].bound == 0.0
    for lv, printed in zip(p.levels[1:], bounds, strict=True):
        assert matches_printed(lv.bound, printed), (lv.level, lv.bound, printed)
    pv = catalog.get("od", "vanilla_gauss").plan_tree(italy, italy, budget.zcdp(rho))
    for lv, printed in zip(pv.levels, vanilla, strict=True):
        assert matches_printed(lv.sd, printed), (lv.level, lv.sd, printed)
        assert math.isnan(lv.bound)
    # the L2 variant has no proven bound (NaN), the same noise
    p2 = catalog.get("od", "tda_l2").plan_tree(italy, italy, budget.zcdp(rho))
    assert all(math.isnan(lv.bound) for lv in p2.levels[1:])
    assert [lv.scale for lv in p2.levels] == [lv.scale for lv in p.levels]


def test_unbounded_m1_costs_like_the_paper_appendix_b() -> None:
    """App. B: σ² = T/ρ' everywhere (root too) costs (1/T + 1)·ρ'/2 for m = 1 unbounded; our plan
    takes the target total ρ and spreads it over T + 1 measurements of sensitivity 1."""
    h = tree_h([2, 3])
    rho = 0.3
    p = catalog.get("od", "inftda").plan_tree(h, h, budget.zcdp(rho), neighbour="add_remove")
    T = p.depth
    assert all(lv.measured for lv in p.levels)
    for lv in p.levels:
        assert lv.l2_sensitivity == 1.0
        assert lv.scale == pytest.approx(math.sqrt((T + 1) / (2 * rho)), rel=1e-12)


def test_copy_levels_get_no_share_and_no_noise() -> None:
    """A single-state hierarchy: levels 1 and 2 only copy the total (spec §2.10, review note 2)."""
    h = hierarchy_from_prefixes(["1001", "1002", "1003"], [2, 4], ["state", "county"])
    rho = 0.2
    for orient in ("destination", "origin"):
        p = catalog.get("od", "inftda").plan_tree(h, h, budget.zcdp(rho), orientation=orient)
        assert [lv.measured for lv in p.levels] == [False, False, False, True, True]
        assert [lv.share for lv in p.levels[:3]] == [0.0, 0.0, 0.0]
        assert [lv.branching for lv in p.levels] == [1.0, 1.0, 1.0, 3.0, 3.0]
        assert p.levels[3].share == pytest.approx(rho / 2, rel=1e-12)
        assert p.levels[3].scale == pytest.approx(math.sqrt(2 / rho), rel=1e-12)  # σ² = 2/(2·ρ/2)
        assert p.levels[1].sd == 0.0 and p.levels[2].sd == 0.0
        check_estimates(p, laplace=False)
        df = pd.DataFrame({"o": ["1001"] * 5 + ["1003"] * 2, "d": ["1002"] * 4 + ["1001"] * 3})
        c = ODCounts.from_frame(df, h, origin="o", destination="d")
        src = Recorder(3)
        rel = catalog.get("od", "inftda").release_counts(c, budget.zcdp(rho), src, orientation=orient)
        check_tree_release(rel, 7)
        assert rel.values[1].tolist() == [7] and rel.values[2].tolist() == [7]
        assert [k for k, _, _ in src.calls] == ["discrete_gaussian"] * 2  # levels 3 and 4 only
        assert src.calls[0][2] == 3  # the three counties of the one state
        assert src.calls[1][2] == 3 * rel.values[3].size
        assert rel.details["noised_cells"] == src.calls[0][2] + src.calls[1][2]
    # a level where only some nodes have one child is measured
    mixed = hierarchy_from_prefixes(["1001", "2001", "2002"], [2, 4])
    p = catalog.get("od", "inftda").plan_tree(mixed, mixed, budget.zcdp(rho))
    assert all(lv.measured for lv in p.levels[1:])


def test_nothing_to_measure_is_explained() -> None:
    """Every tree level a copy level and the total public: nothing can be measured, and the plan
    says so in terms of the hierarchy (not budget's generic 'parts' message)."""
    h = hierarchy_from_prefixes(["0101"], [2, 4], ["state", "county"])
    with pytest.raises(ParameterError, match="Nothing to measure") as err:
        catalog.get("od", "inftda").plan_tree(h, h, budget.zcdp(0.5))
    assert "parts" not in str(err.value)


def test_custom_split_shares_the_budget_in_proportion_to_the_weights(states: Hierarchy) -> None:
    rho = 0.4
    w = [1.0, 2.0, 3.0, 4.0]
    p = catalog.get("od", "inftda").plan_tree(states, states, budget.zcdp(rho), split="custom", weights=w)
    shares = [lv.share for lv in p.levels[1:]]
    assert shares == pytest.approx([rho * x / 10 for x in w], rel=1e-12)
    assert sum(Fraction(s) for s in shares) <= Fraction(rho)
    assert p.split_weights == tuple(w)
    for lv in p.levels[1:]:
        assert lv.scale == pytest.approx(lv.l2_sensitivity / math.sqrt(2 * lv.share), rel=1e-12)
    with pytest.raises(ParameterError, match="4 weights"):
        catalog.get("od", "inftda").plan_tree(
            states, states, budget.zcdp(rho), split="custom", weights=[1, 1, 1])
    with pytest.raises(ParameterError):
        catalog.get("od", "inftda").plan_tree(states, states, budget.zcdp(rho), split="custom")
    # unbounded measures the root too: 5 weights, top first
    pu = catalog.get("od", "inftda").plan_tree(
        states, states, budget.zcdp(rho), neighbour="add_remove", split="custom",
        weights=[4, 1, 1, 1, 1])
    assert pu.levels[0].share == pytest.approx(rho / 2, rel=1e-12)
    with pytest.raises(ParameterError, match="5 weights"):
        catalog.get("od", "inftda").plan_tree(
            states, states, budget.zcdp(rho), neighbour="add_remove", split="custom", weights=w)
    for bad in ([1, -1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1]):  # negative, all zero, a zero share
        with pytest.raises(ParameterError):
            catalog.get("od", "inftda").plan_tree(
                states, states, budget.zcdp(rho), split="custom", weights=bad)
    with pytest.raises(ParameterError, match="split"):
        catalog.get("od", "inftda").plan_tree(states, states, budget.zcdp(rho), split="sideways")
    pg = catalog.get("od", "inftda").plan_tree(states, states, budget.zcdp(rho), split="geometric")
    g = [lv.share for lv in pg.levels[1:]]
    assert all(a < b for a, b in itertools.pairwise(g)) and math.fsum(g) <= rho


@pytest.mark.parametrize("neighbour", ["replace", "add_remove"])
@pytest.mark.parametrize("m", [1, 2])
def test_pure_epsilon_uses_discrete_laplace_with_l1_scales(states: Hierarchy, neighbour: str, m: int) -> None:
    eps = 0.9
    p = catalog.get("od", "inftda").plan_tree(
        states, states, budget.pure(eps), neighbour=neighbour, max_trips=m)
    measured = [lv for lv in p.levels if lv.measured]
    assert len(measured) == 4 + (not (neighbour == "replace" and m == 1))
    total = Fraction(0)
    for lv, sc in zip(p.levels, p.scales, strict=True):
        if not lv.measured:
            assert sc is None
            continue
        assert lv.noise == "discrete_laplace"
        assert isinstance(sc, Fraction) and sc == Fraction(lv.l1_sensitivity) / Fraction(lv.share)
        assert lv.l1_sensitivity == (m if lv.level == 0 else (2 * m if neighbour == "replace" else m))
        total += Fraction(lv.l1_sensitivity) / sc  # ε_ℓ = GS₁/scale
    assert total <= Fraction(eps)
    assert float(total) == pytest.approx(eps, rel=1e-12)
    check_estimates(p, laplace=True)
    # a pure release draws discrete Laplace noise with exactly these scales
    df = pd.DataFrame({"o": ["0101", "0201", "0301"] * 4, "d": ["0102", "0203", "0101"] * 4,
                       "u": list(range(12))})
    c = ODCounts.from_frame(df, states, origin="o", destination="d",
                               user="u" if m > 1 else None, max_trips=m, noise=NoiseSource(0))
    src = Recorder(5)
    rel = catalog.get("od", "inftda").release_counts(c, budget.pure(eps), src, neighbour=neighbour)
    assert {k for k, _, _ in src.calls} == {"discrete_laplace"}
    used = [s for _, s, _ in src.calls]
    assert all(s in set(p.scales) for s in used)
    check_tree_release(rel, 12 if p.total_public else None)


def test_plan_refuses_bad_options_and_unknown_mechanisms(states: Hierarchy) -> None:
    z = budget.zcdp(0.5)
    for kw in ({"neighbour": "sideways"}, {"order": "up"}, {"tiebreak": "coin"}, {"max_trips": 0},
               {"orientation": "both"}):
        with pytest.raises(ParameterError):
            catalog.get("od", "inftda").plan_tree(states, states, z, **kw)
    with pytest.raises(ParameterError, match="Unknown od mechanism 'bogus'"):
        catalog.get("od", "bogus").plan_tree(states, states, z)
    with pytest.raises(ParameterError):
        catalog.get("od", "inftda").plan_tree(states, states, None)
    with pytest.raises(ParameterError):
        catalog.get("od", "inftda").plan_tree(states, states, z, approx=(1.0, 1e-6))
    with pytest.raises(ParameterError):
        catalog.get("od", "sh").plan_tree(states, states, z)
    with pytest.raises(ParameterError):
        catalog.get("od", "sh").plan_tree(states, states, None, approx=(1.0, 1e-6), max_trips=2)
    with pytest.raises(ParameterError):
        catalog.get("od", "sh").plan_tree(states, states, None, approx=(1.0, 1.0))
    assert catalog.get("od", "TDA-L2").name == "tda_l2"
