"""The stability histogram: noise on the observed finest pairs, a threshold hides the rare ones (a baseline).

Boninsegna & Silvestri, PoPETs 2025, Sec. 2.1 and 5 (``SH``), after Bun, Nissim & Stemmer,
"Simultaneous private learning of multiple concepts", JMLR 2019 (the stability-based histogram).

Parameters
    Those of the TopDown walk (:mod:`.base`), listed alike; none applies (the budget goes to the
    finest pairs).

Privacy
    (ε, δ)-DP, one trip per person: discrete Laplace noise of scale ``t = Δ₁/ε`` (Δ₁ = 2 replace,
    1 add/remove) on the *observed* finest pairs only, and a threshold ``τ = 1 + t·ln(k/δ)``
    (``k`` = 2 replace, 1 add/remove pairs that one person changes): a pair of one person survives
    with probability ``P(Z ≥ τ − 1) ≤ exp(−(τ − 1)/t)``, so ``k`` such pairs with at most δ.
    Its cost cannot be added to a pure-ε or zCDP ledger: :meth:`StabilityHistogram.cost` refuses
    it, so it is for comparisons (benchmarks, the library) only, never charged.

Plan
    The finest level's noise and threshold; no expected error (suppressed flows are lost from
    every sum: biased, data-dependent).

Release
    Noise on the observed pairs, those below τ suppressed, every tree level summed up
    (:func:`.common.sum_up`).  No false positives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpcore.errors import ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.mechanisms.base import ORDER, ORIENTATION, SPLIT, TIEBREAK, WEIGHTS, ODMechanism
from dpcore.flows.mechanisms.common import ODOptions, ODPlan, ODRelease, ODTree, sum_up
from dpcore.privacy import calibration
from dpcore.privacy import noise as _noise
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.noise import NoiseSource

__all__ = ["StabilityHistogram"]


class StabilityHistogram(ODMechanism):
    """The stability histogram, (ε, δ)-DP (Bun, Nissim & Stemmer; Boninsegna & Silvestri 2025)."""

    name = "sh"
    title = "Stability histogram (baseline, (ε, δ)-DP)"
    summary = ("Noise on the observed finest pairs only; pairs below a threshold are suppressed. No "
               "spurious flows, but every suppressed flow is lost from the totals.")
    when_to_use = "Comparisons only: its (ε, δ) cost cannot be added to a pure-ε or zCDP budget ledger."
    reference = "Bun, Nissim & Stemmer; Boninsegna & Silvestri, PoPETs 2025, Sec. 2.1"
    params = (ORIENTATION, SPLIT, WEIGHTS, ORDER, TIEBREAK)
    definitions = ()
    consistent = nonnegative = True
    finest_only = True
    no_interval_reason = ("publishes only the pairs whose noisy count passes a threshold: no valid 95 % interval "
                          "is known for these values.")

    def cost(self, budget: PrivacyCost | float, params: Mapping[str, Any] | None = None) -> PrivacyCost:
        """Refused: an (ε, δ) cost cannot be added to a pure-ε or zCDP budget."""
        raise ParameterError(
            f"{self.title} is (ε, δ)-DP; its cost cannot be added to a pure-ε or zCDP budget, so it cannot "
            "be released here. Use InfTDA (or compare with SH in the benchmarks)."
        )

    def plan_levels(self, tree: ODTree, cost: PrivacyCost | None, approx: tuple[float, float] | None,
                    o: ODOptions) -> ODPlan:
        """The noise scale and threshold of the finest level, from ``approx=(ε, δ)``."""
        if cost is not None or approx is None:
            raise ParameterError("The stability histogram is (ε, δ)-DP: give approx=(ε, δ), not a pure/zCDP cost.")
        eps, delta = float(approx[0]), float(approx[1])
        if not (eps > 0 and math.isfinite(eps)) or not (0 < delta < 1):
            raise ParameterError("The stability histogram needs ε > 0 and 0 < δ < 1.")
        if o.max_trips != 1:
            raise ParameterError("The stability histogram baseline supports one trip per person only.")
        T = tree.depth
        l1 = 2.0 if o.neighbour == "replace" else 1.0
        k_cells = 2 if o.neighbour == "replace" else 1
        scale = calibration.laplace_scale_for_epsilon(eps, l1)
        # a pair of one person survives with P(Z ≥ τ − 1) ≤ exp(−(τ − 1)/t); k such pairs ≤ δ
        tau = 1.0 + float(scale) * math.log(k_cells / delta)
        sd = math.sqrt(_noise.discrete_laplace_variance(scale))
        levels = [tree.level(t, measured=(t == T), share=eps if t == T else 0.0,
                             noise="discrete_laplace" if t == T else None, scale=float(scale) if t == T else 0.0,
                             l1_sensitivity=l1 if t == T else 0.0, l2_sensitivity=0.0,
                             noise_sd=sd if t == T else 0.0, sd=math.nan, mean_abs=math.nan, max_abs=math.nan,
                             bound=math.nan, unreliable_below=tau,
                             basis="data-dependent: suppressed flows are lost from every sum (biased)")
                  for t in range(T + 1)]
        return ODPlan(self.name, None, (eps, delta), o.neighbour, o.max_trips, True, o.orientation, "finest only", (),
                      o.order, o.tiebreak, tuple(levels), tuple([None] * T + [scale]), tau, made_by=self)

    def release_tree(self, counts: ODCounts, p: ODPlan, noise: NoiseSource, *, progress: Any = None) -> ODRelease:
        """Noise the observed finest pairs, suppress those below the threshold, sum up the tree."""
        self.check_own(p)
        T = p.depth
        noisy = counts.count + noise.discrete_laplace(p.scales[T], counts.n_pairs)
        keep = noisy >= p.sh_threshold
        rel = sum_up(counts, p, counts.origin[keep], counts.destination[keep], noisy[keep].astype("int64"), {})
        if progress is not None:
            progress(T / max(T, 1), "done")
        # no "noised_cells" here: SH noises the observed pairs only, and their number is confidential
        return rel
