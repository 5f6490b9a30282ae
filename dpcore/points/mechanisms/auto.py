"""``auto``: the recommended point mechanism, chosen from public inputs only (issue 19, item 5).

No single mechanism wins across data shape, scale and ε (Hay et al., "Principled Evaluation of
Differentially Private Algorithms using DPBench", SIGMOD 2016), and choosing by the error on the
curator's own data is not private.  ``auto`` chooses by the rule of :mod:`dpcore.points.recommend`
(a table derived from ``benchmarks/spatial.py``; how, and its validation, are documented there and
in ``benchmarks/results/auto.md``) from:

* the grid and ε (per unit of privacy: ε/k for a cap of k records per person),
* the query sizes (``query_sizes``, default 2 %, 6 %, 10 % of the area),
* the number of points: a PUBLIC number (``public_n``, e.g. published elsewhere; then choosing
  costs nothing), or else a noisy count bought with ``count_share`` of ε (5 % by default, the
  discrete Laplace count of AG and UG, Qardaji, Yang & Li, ICDE 2013, sensitivity k).

Privacy cost
    The whole budget ε: ``count_share·ε`` on the count (when there is no public n) plus the rest
    for the chosen mechanism (sequential composition; the split is ``split_custom``'s, so the parts
    never add up to more than ε).  The choice is a function of public inputs and the noisy count
    only (post-processing), so the chosen mechanism's own guarantee is unchanged.  The mechanisms
    that size themselves from n (AG, UG, HTF) receive the public or noisy n as ``public_n`` and
    spend nothing more on it.  Pure ε-DP only: the table was measured under pure ε-DP, and
    PrivTree and DAWA are defined for it.

Plan (before release)
    With a public n the plan IS the chosen mechanism's.  Without one, the plan shows the count's
    level and the plan of the mechanism the rule would choose for the curator's guess of n
    (``n_estimate``, used for the preview only); the release may choose another if the noisy
    count lands in another row of the table, and says so.

Refusals before the charge
    The choice is made after the budget is charged (from the noisy count), so the data checks of
    *every* mechanism the table can name (HTF's and DAWA's limits on the number of points, ...)
    run before it (:meth:`Auto.check_aggregate`).

Release record
    ``mechanism`` is ``auto``; ``released_values.auto`` names the choice, its parameters, the
    reason in one sentence, the n used and whether it was public or the noisy count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpcore.data.domain import Aggregate, Grid
from dpcore.errors import ParameterError
from dpcore.points import recommend as rule
from dpcore.points.mechanisms.base import Param, PointsMechanism, count_level, noisy_counts, part
from dpcore.points.release import DEFAULT_QUERY_SIZES, LevelPlan, PartitionRelease
from dpcore.privacy.budget import PrivacyCost
from dpcore.privacy.calibration import split_custom
from dpcore.privacy.noise import NoiseSource


class Auto(PointsMechanism):
    name = "auto"
    title = "Auto (recommended from public inputs)"
    summary = ("Picks the mechanism that did best in the benchmark for your number of points, ε and query "
               "sizes, without looking at the data (a public n, or a noisy count from 5 % of ε).")
    when_to_use = ("When you do not know which mechanism suits your data: the rule was measured on 8 data "
                   "shapes from 1,000 to 10 million points (benchmarks/results/auto.md).")
    reference = ("Rule derived from a DPBench-style head-to-head (Hay et al., SIGMOD 2016); the count as in "
                 "Qardaji, Yang & Li, ICDE 2013")
    definitions = ("pure",)
    #: the preview of the choice needs a guess of n (the release counts privately without a public n)
    needs_n_guess = True
    params = (
        Param("public_n", "Public number of points (0 = count privately)", int, 0,
              "Only if the number of points is already public; then choosing costs nothing.", minimum=0),
        Param("count_share", "Share of ε for counting the points", float, 0.05,
              "Part of the budget spent on a noisy number of points, which chooses the mechanism. "
              "Not used when a public number of points is given.", minimum=0.001, maximum=0.5, advanced=True),
        Param("query_sizes", "Query sizes (area fractions)", tuple, DEFAULT_QUERY_SIZES,
              "The sizes of the range queries you care about, e.g. 0.02, 0.06, 0.1.", item=float),
    )

    # -- parameters and budget ----------------------------------------------------------------
    def resolve_params(self, raw: dict[str, Any] | None = None) -> dict[str, Any]:
        p = super().resolve_params(raw)
        sizes = tuple(float(s) for s in p["query_sizes"]) or DEFAULT_QUERY_SIZES
        for s in sizes:
            rule.size_class_of(s)  # checks the range
        p["query_sizes"] = sizes
        return p

    def budgets(self, cost: PrivacyCost, params: dict[str, Any]) -> tuple[PrivacyCost | None, PrivacyCost]:
        """Budget of the count (None with a public n) and of the chosen mechanism; they add up to ε."""
        if params["public_n"] > 0:
            return None, cost
        v_n, v_m = split_custom(cost.value, [params["count_share"], 1 - params["count_share"]])
        return part(cost, v_n), part(cost, v_m)

    def choose(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], n: float, sensitivity: int
               ) -> rule.Recommendation:
        """The rule's choice for ``n`` points (public, guessed or noisy): public inputs only.  Looked up
        at the whole ε, as the benchmark's mechanisms also spent their count shares inside it."""
        return rule.recommend(grid, cost.value, n_guess=max(float(n), 0.0), query_sizes=params["query_sizes"],
                              sensitivity=sensitivity)

    def __init__(self, candidates: Mapping[str, PointsMechanism]) -> None:
        #: the mechanisms the rule may name (the points kind's list without ``auto``; given, not
        #: imported, as the kind module imports this one)
        self.candidates = dict(candidates)

    def mechanism(self, name: str) -> PointsMechanism:
        if name not in self.candidates:
            raise ParameterError(f"The recommendation names '{name}', which is not a registered mechanism.")
        return self.candidates[name]

    def chosen_params(self, rec: rule.Recommendation, params: dict[str, Any], n: float) -> dict[str, Any]:
        mech = self.mechanism(rec.mechanism)
        raw = dict(rec.params)
        if any(p.name == "public_n" for p in mech.params):
            raw["public_n"] = max(int(round(n)), 1)
        return mech.resolve_params(raw)

    def _count_level(self, grid: Grid, e_n: PrivacyCost, sensitivity: int, level: int) -> LevelPlan:
        return count_level(level, "Number of points (chooses the mechanism)", e_n, sensitivity, 1,
                           float(grid.n_cells), False,
                           note="Published with the release; chooses the mechanism, not used to answer queries.")

    # -- plan --------------------------------------------------------------------------------
    def plan_levels(self, grid: Grid, cost: PrivacyCost, params: dict[str, Any], *, sensitivity: int,
              n_estimate: float | None) -> tuple[LevelPlan, ...]:
        e_n, e_m = self.budgets(cost, params)
        n = params["public_n"] if params["public_n"] > 0 else n_estimate
        if n is None:
            raise ParameterError(
                "Auto chooses the mechanism from the number of points. Give a rough public guess of the "
                "number of points to preview its choice (without a public number it counts them privately).")
        rec = self.choose(grid, cost, params, float(n), sensitivity)
        inner = self.mechanism(rec.mechanism)
        chosen = self.chosen_params(rec, params, float(n))
        inner.check_public(grid, e_m, chosen)
        levels = inner.plan_levels(grid, e_m, chosen, sensitivity=sensitivity, n_estimate=float(n))
        note = (f"Auto chose {rule.NAMES.get(rec.mechanism, rec.mechanism)}. {rec.reason}"
                if e_n is None else
                f"For the guess of {float(n):,.0f} points auto would choose "
                f"{rule.NAMES.get(rec.mechanism, rec.mechanism)}; the release chooses from its noisy count. "
                f"{rec.reason}")
        levels = tuple(dataclasses.replace(lv, extra={**lv.extra, "auto_choice": rec.mechanism}) for lv in levels)
        first = dataclasses.replace(levels[0], note=(levels[0].note + " " if levels[0].note else "") + note)
        levels = (first, *levels[1:])
        if e_n is None:
            return levels
        return (*levels, self._count_level(grid, e_n, sensitivity, max(lv.level for lv in levels) + 1))

    # -- release -----------------------------------------------------------------------------
    def choosable(self) -> tuple[str, ...]:
        """Every mechanism the rule can name (the table's entries), in the points kind's order."""
        named = {entry[0] for entry in rule.TABLE.values()}
        return tuple(name for name in self.candidates if name in named) + tuple(
            sorted(named - set(self.candidates)))

    def check_aggregate(self, aggregate: Aggregate) -> None:
        """Every mechanism the rule can choose accepts the data (HTF's and DAWA's limits on the
        number of points, ...): the choice comes from the noisy count, after the charge, so each
        candidate's own check runs here, before it."""
        for name in self.choosable():
            inner = self.mechanism(name)
            try:
                inner.check_aggregate(aggregate)
            except ParameterError as e:
                raise ParameterError(
                    f"Auto may choose {rule.NAMES.get(name, name)} for these data, which refuses them: {e}") from e

    def _release(self, aggregate: Aggregate, cost: PrivacyCost, params: dict[str, Any], noise: NoiseSource
                 ) -> PartitionRelease:
        grid, k = aggregate.grid, int(aggregate.sensitivity)
        e_n, e_m = self.budgets(cost, params)
        if e_n is None:
            n_used, source = float(params["public_n"]), "public number of points"
        else:
            n_used = float(noisy_counts(np.array([aggregate.total]), e_n, k, noise)[0])
            source = "noisy count"
        rec = self.choose(grid, cost, params, n_used, k)
        inner = self.mechanism(rec.mechanism)
        inner_params = self.chosen_params(rec, params, n_used)
        # the candidates' data checks ran before the charge (check_aggregate); the choice's public
        # checks run here, on the parameters the rule gave it
        inner.check_public(grid, e_m, inner_params)
        rel = inner._release(aggregate, e_m, inner_params, noise)
        levels = rel.levels
        if e_n is not None:
            levels = (*levels, self._count_level(grid, e_n, k, max(lv.level for lv in levels) + 1))
        choice = {"chosen": rec.mechanism, "chosen_title": inner.title, "chosen_params": inner_params,
                  "reason": rec.reason, "n_used": n_used, "n_source": source,
                  "table_entry": rec.to_dict()["table_entry"], "epsilon_chosen": e_m.value}
        public = {**rel.public, "auto": choice}
        if e_n is not None:
            public["noisy_point_count"] = int(n_used)
        return dataclasses.replace(
            rel, mechanism=self.name, mechanism_title=f"Auto → {inner.title}",
            mechanism_reference=f"{inner.reference}; the choice: {self.reference}", params=dict(params),
            cost=cost, levels=levels, public=public)
