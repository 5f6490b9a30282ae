"""Points, Plan step: the mechanism, its parameters, the budget, the expected error (no data used).

The step builds the one core plan (:func:`ui.kinds.points.state.planned`, through the catalogue) and
shows it; the Release step releases that same plan."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from dpcore import catalog
from dpcore.core.mechanism import Mechanism, Param, PlanRow
from dpcore.errors import DPCoreError
from dpcore.points import recommend, recommend_features
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger
from ui import budget_ui, fmt, frame, plan_table, series, state, target_ui
from ui.kinds.points import plan_matrix
from ui.kinds.points import state as points_state
from ui.kinds.points.state import DEFAULT_N_GUESS, PlannedRelease

__all__ = ["DEFAULT_N_GUESS", "plan_step", "query_reading", "use_when_line"]


def plan_step() -> None:
    """The Plan step for points (the page script is pages/plan.py): choose, budget, see the plan."""
    ds = points_state.dataset()
    try:
        grid = points_state.grid()
    except DPCoreError as e:
        st.error(str(e))
        frame.link("data", "Fix the area and grid on the Data step")
        frame.stop()
    name, mech = _mechanism_choice()
    raw = _parameters(name, mech)
    if name == "auto":
        _auto_reason(grid, ds, raw)
    st.subheader("Privacy budget")
    sec = budget_ui.section("points", ds.fingerprint, st.session_state["ledgers"], key=f"points_{ds.fingerprint}",
                            definition_key=f"definition_{ds.fingerprint}",
                            cap_key=f"budget_cap_{ds.fingerprint}_{{definition}}",
                            release_keys={"pure": "epsilon", "zcdp": "rho"}, delta_key="delta",
                            cap_label="Budget cap for this dataset (total)")
    pr = _plan_with_guess(ds)
    st.subheader("Expected error (before release, from no data)")
    if pr.plan is None:
        if name == "matrix" and raw.get("workload") == "uploaded" and not raw.get("rectangles"):
            st.info("The expected error appears here once your rectangles are uploaded.")  # nothing wrong yet
        else:
            st.error(pr.error)
        return
    _expected_error(pr)
    _target(pr, sec.ledger, sec.definition)
    _query_box(pr)
    series.plan_panel("points", pr.choice.cost)
    frame.link("release", "Next: release →")


def _mechanism_choice() -> tuple[str, Mechanism]:
    """The mechanism list (auto, the default, first), with what it is and when to use it."""
    names = sorted(catalog.names("points"), key=lambda n: n != points_state.DEFAULT_MECHANISM)  # the default first
    name = st.selectbox(
        "Mechanism", names, key=state.persistent("mechanism", points_state.DEFAULT_MECHANISM),
        format_func=lambda n: f"{catalog.get('points', n).title} — use it when: "
                              f"{use_when_line(catalog.get('points', n))}",
        help="Each mechanism with the one line that says when to use it. Auto, the default, chooses for you "
             "from public inputs only.",
    )
    state.store("mechanism")
    mech = catalog.get("points", name)
    st.markdown(f"{mech.summary}  \n*When to use:* {mech.when_to_use}")
    st.caption(f"Source: {mech.reference}")
    return name, mech


def _shown(p: Param, raw: dict[str, Any], defaults: dict[str, Any]) -> bool:
    """Whether a parameter matters for the choices made (``shown_if``) and is typed in."""
    if not p.applies(raw, defaults):
        return False  # only relevant for another choice: keep its value, do not show it
    return p.kind in (bool, int, float, str)  # others are set below (the matrix mechanism's rectangles)


def _param_widget(name: str, p: Param, raw: dict[str, Any]) -> None:
    """One parameter's widget; its value goes into ``raw``."""
    key = f"param_{name}_{p.name}"
    cur = raw.get(p.name, p.default)
    if p.choices:
        labels = dict(zip(p.choices, p.choice_labels or p.choices, strict=True))
        raw[p.name] = st.selectbox(p.label, list(p.choices), index=list(p.choices).index(cur),
                                   format_func=labels.get, help=p.help, key=key)
    elif p.kind is bool:
        raw[p.name] = st.checkbox(p.label, value=bool(cur), help=p.help, key=key)
    elif p.kind is int:
        state.seed(key, int(cur))
        raw[p.name] = st.number_input(p.label, step=1, help=p.help, key=key,
                                      min_value=int(p.minimum) if p.minimum is not None else None,
                                      max_value=int(p.maximum) if p.maximum is not None else None)
    else:
        state.seed(key, float(cur))
        raw[p.name] = st.number_input(p.label, help=p.help, key=key, format="%.4g",
                                      min_value=float(p.minimum) if p.minimum is not None else None,
                                      max_value=float(p.maximum) if p.maximum is not None else None)


def _parameters(name: str, mech: Mechanism) -> dict[str, Any]:
    """The mechanism's parameters (the advanced ones in an expander), kept in the session."""
    raw = dict(st.session_state["mech_params"].get(name, {}))
    defaults = {q.name: q.default for q in mech.params}
    for other in {q.shown_if[0] for q in mech.params if q.shown_if is not None}:
        if f"param_{name}_{other}" in st.session_state:  # a choice changed in this run shows its settings now
            raw[other] = st.session_state[f"param_{name}_{other}"]
    for p in mech.params:
        if not p.advanced and _shown(p, raw, defaults):
            _param_widget(name, p, raw)
    advanced = [p for p in mech.params if p.advanced and _shown(p, raw, defaults)]
    if advanced:
        with st.expander("Advanced parameters"):
            for p in advanced:
                _param_widget(name, p, raw)
    if name == "matrix" and raw.get("workload") == "uploaded":
        plan_matrix.rectangles_upload(raw)
    st.session_state["mech_params"][name] = raw
    return raw


def _plan_with_guess(ds: points_state.Dataset) -> PlannedRelease:
    """The plan of the choices made; for a mechanism sized by the number of points, after asking
    for a public guess of it (for this preview only)."""
    pr = points_state.planned()
    if not pr.needs_guess:
        return pr
    n_guess = st.number_input(
        "Rough number of points (a public guess, only for this preview)", min_value=1, step=1000,
        key=state.seed(f"_w_n_guess_{ds.fingerprint}", pr.choice.n_guess),
        help="This mechanism sizes its grid or tree from the number of points, which it measures privately "
             "(or, for PrivTree, finds from the data) when releasing. The preview needs a guess; it is not used "
             "in the release. If the number is already public, give it as the mechanism's public number of "
             "points instead (where it has one).",
    )
    st.session_state[f"n_guess_{ds.fingerprint}"] = int(n_guess)
    periods = points_state.series_periods()
    if periods:
        # the plan is the one every period is released with, and re-served by: it changes only when the
        # curator types another number (never with the range), so the per-period figure is offered, not applied
        st.caption(f"Over time, every period is released with this plan, so the preview is for one period of "
                   f"**{fmt.count(int(n_guess))} points**, the number typed here: the whole file's guess unless you "
                   f"typed one period's. Spread evenly over the {fmt.count(periods)} periods, "
                   f"{fmt.count(int(n_guess))} points is about {fmt.count(max(1, round(int(n_guess) / periods)))} a "
                   "period (public figures only: no period's own count is read); type a period's number to preview "
                   "one period.")
    if not ds.is_demo and ds.n_guess is None:
        # the guess is not filled in from the data: it is written into the plan, which is published
        st.caption("The guess is not taken from your file: it is part of the published plan, so type a rounded "
                   "figure that is public already (the number of rows read, in the sidebar, is confidential).")
    return points_state.planned()  # the same plan unless the guess changed


def _query_cell(share: float) -> Any:
    """The table column of a range query over ``share`` of the area (only released levels answer)."""
    def read(r: PlanRow) -> str:
        sd = r.details.get("range_query_sd", {}).get(f"{share:g}")
        return f"± {fmt.count(interval_half_width('normal', sd))}" if r.details.get("in_partition") else "–"
    return read


QUERY_COLUMNS: tuple[plan_table.Column, ...] = (
    ("2% of area: ± (95%)", _query_cell(0.02), st.column_config.TextColumn(
        width="small", help="A query over 2 % of the area, in points, from noise alone; – for levels that are "
                            "not released.")),
    ("10% of area: ± (95%)", _query_cell(0.10), st.column_config.TextColumn(
        width="small", help="As for 2 %, over 10 % of the area.")),
)


def _expected_error(pr: PlannedRelease) -> None:
    """The table of the plan's levels, the one-line reading, and the mechanism's own notes."""
    plan = pr.plan
    assert plan is not None
    # the errors in points first (they fit the page's width), the budget and noise scale after them
    columns = plan_table.plain_first(plan_table.budget_columns(plan) + QUERY_COLUMNS,
                                     ("level", "± per count (95%)", *(label for label, _, _ in QUERY_COLUMNS)))
    plan_table.show(plan, columns, width="stretch")
    leaf = [r for r in plan.rows if r.details.get("in_partition")][-1]
    st.markdown(
        _per_period_prefix(pr) + f"released count is off by at most **±{fmt.count(leaf.ci95)} points** in 19 of 20 cases "
        f"(1 in 20 may be off by more). From noise alone, a query covering 10% of the area is off by about "
        f"{query_reading(leaf)}."
    )
    if plan.mechanism == "matrix":
        plan_matrix.strategy_report(plan_table.details(plan, "matrix"))
    elif plan.mechanism == "htf":
        _htf_note(plan.rows)
    elif plan.mechanism == "uniform":
        st.caption("Uniform's error is mostly from assuming the points are spread evenly; "
                   "that part depends on the data and cannot be previewed.")
    elif plan.mechanism == "ug":
        st.caption("Noise only: the error from spreading each block's count evenly over it depends "
                   "on the data and is not included.")


def _per_period_prefix(pr: PlannedRelease) -> str:
    """How the error sentence starts: "Each ", or over time what the preview is for (one period, planned
    for the public number of points or the guess typed, which may be the whole file's)."""
    if not points_state.series_periods():
        return "Each "
    assert pr.plan is not None
    public_n = int(pr.plan.params.get("public_n", 0) or 0)
    if public_n:
        return (f"In each period, planned for the public number of points ({fmt.count(public_n)}), which every "
                "period's release takes as its own: each ")
    if pr.needs_guess:
        return (f"In each period, planned for {fmt.count(pr.choice.n_guess)} points (the number typed above, the "
                "whole file's guess unless you typed one period's): each ")
    return "In each period: each "


def _target(pr: PlannedRelease, led: Ledger, definition: str) -> None:
    """"Plan from the error you need": the smallest budget that meets the curator's targets."""
    plan = pr.plan
    assert plan is not None and pr.grid is not None
    with st.expander("Plan from the error you need", icon=":material/target:"):
        public = {"n_estimate": pr.choice.n_guess} if pr.needs_guess else {}
        prop = target_ui.planner(catalog.get("points", plan.mechanism), pr.grid, definition, plan.params,
                                 public, unit=plan.unit, key="points_target", on_use=_use_budget,
                                 word="points", finest_label="each released count")
        if prop is not None and prop.cost.value > led.remaining:
            st.warning(f"The proposal is more than the budget left ({led.cap.symbol} = {fmt.eps(led.remaining)}): "
                       "loosen the target, or raise the cap.")


def _query_box(pr: PlannedRelease) -> None:
    """The expected error of a box the curator types (snapped to the grid; costs nothing)."""
    grid = pr.grid
    assert grid is not None and pr.plan is not None
    with st.expander("Expected error of a query you type (before release, costs nothing)"):
        b = grid.bounds
        f = 0.10 ** 0.5 / 2  # default: a box of 10 % of the area around the centre
        mx, my = (b.west + b.east) / 2, (b.south + b.north) / 2
        dx, dy = (b.east - b.west) * f, (b.north - b.south) * f
        q1, q2, q3, q4 = st.columns(4)
        qw = q1.number_input("Query west", b.west, b.east, key=state.seed("_w_q_w", mx - dx), format="%.5f")
        qs = q2.number_input("Query south", b.south, b.north, key=state.seed("_w_q_s", my - dy), format="%.5f")
        qe = q3.number_input("Query east", b.west, b.east, key=state.seed("_w_q_e", mx + dx), format="%.5f")
        qn = q4.number_input("Query north", b.south, b.north, key=state.seed("_w_q_n", my + dy), format="%.5f")
        if qw >= qe or qs >= qn:
            st.error("The query box needs west < east and south < north.")
            return
        rows, cols, _ = grid.cell_index(np.array([qw, qe]), np.array([qs, qn]))
        rect = (int(rows[0]), int(rows[1]) + 1, int(cols[0]), int(cols[1]) + 1)
        qerr = query_error(pr, rect)
        share = qerr["cells"] / grid.n_cells
        how = "exact" if qerr["exact"] else "approximate: assumes the released areas are evenly spread over the grid"
        st.markdown(
            f"The box covers {fmt.count(qerr['cells'])} cells ({share:.1%} of the area). Its released "
            f"count is off by about **±{fmt.count(interval_half_width('normal', qerr['sd']))} points** (95%) from "
            f"noise alone (SD {fmt.num(qerr['sd'])}; {how})."
        )
        st.caption("Snapped to the grid's cells. The error from spreading counts evenly inside "
                   "areas depends on the data and is not included.")


def query_error(pr: PlannedRelease, rect: tuple[int, int, int, int]) -> dict[str, Any]:
    """The noise SD of the range query over cells ``rect`` under the plan: the mechanism's exact
    data-free variance where it has one, else the leaf level's formula for evenly spread leaves
    (:meth:`dpcore.points.mechanisms.base.PointsMechanism.query_error`)."""
    assert pr.plan is not None
    return catalog.get("points", pr.plan.mechanism).query_error(pr.plan, rect)


def query_reading(leaf: PlanRow, share: float = 0.10) -> str:
    """The 95 % half-width of a range query over ``share`` of the area, from a plan's leaf row, in words: one
    figure, or, where the leaves depend on the data (PrivTree planned for a number of points), the figure for
    evenly spread points and the upper bound whatever their spread
    (:func:`dpcore.points.mechanisms.privtree.expected_leaves`).  The Release step reads the Plan step's plan
    with the same function, so both steps state the same planned figure."""
    sd = leaf.details["range_query_sd"][f"{share:g}"]
    text = f"±{fmt.count(interval_half_width('normal', sd))}"
    most = leaf.details.get("range_query_sd_at_most", {}).get(f"{share:g}")
    if leaf.details.get("finest_partition"):
        return (f"{text} at most (for the finest partition, one area per cell; the areas are chosen from the data "
                "at release, and fewer, larger areas have less noise)")
    if most is None:
        return text
    return (f"{text} if the points were spread evenly (about {fmt.count(leaf.n_counts)} leaves for "
            f"{fmt.count(leaf.details['n_estimate'])} points), at most ±{fmt.count(interval_half_width('normal', most))} "
            "wherever they are (up to "
            f"{fmt.count(leaf.details['leaves_at_most'])} leaves), and less where they cluster")


def use_when_line(mech: Any) -> str:
    """The first clause of a mechanism's "when to use" (up to its first colon, semicolon or full stop),
    short enough for one line of the mechanism list.

    >>> use_when_line(catalog.get("points", "ug"))
    'a strong, simple default for moderately spread data'
    """
    text = " ".join(str(mech.when_to_use).split())
    cut = min((i for i in (text.find(": "), text.find("; "), text.find(". ")) if i > 0), default=len(text))
    line = text[:cut].rstrip(".")
    if line.lower().startswith("when "):
        line = line[5:]
    if len(line) > 80:
        line = line[:line.rfind(" ", 0, 78)] + " …"
    return line if line[1:2].isupper() else line[:1].lower() + line[1:]


def _auto_reason(grid: Any, ds: points_state.Dataset, raw: dict[str, Any]) -> None:
    """Which mechanism auto will use and why, in one sentence (by default
    :func:`~dpcore.points.mechanisms.auto.held_out_note`; with rule ``features`` the feature rule's
    preview, with ``table`` :func:`dpcore.points.recommend.app_default`),
    from the public inputs as they stand now: ε, the public number or guess of the points, the query sizes
    and the cap per person (the budget and guess widgets below are read from the session)."""
    ss = st.session_state
    if points_state.ledger().definition != "pure":
        st.warning("Auto is for pure ε-DP only (its rule was measured under it): choose another mechanism under "
                   "ρ-zCDP, or use pure ε-DP.", icon=":material/info:")
        return
    eps = float(ss.get("_w_epsilon", ss.get("epsilon", state.DEFAULT_EPSILON)))
    public_n = int(raw.get("public_n", 0) or 0)
    n = public_n or ss.get(f"_w_n_guess_{ds.fingerprint}",
                           ss.get(f"n_guess_{ds.fingerprint}", ds.n_guess or DEFAULT_N_GUESS))
    cap = ss.get("user_cap")
    k = int(cap) if ds.table.user_column is not None and cap else 1
    try:
        auto = catalog.get("points", "auto")
        resolved = auto.resolve_params(raw)
        if resolved["rule"] == "held_out_best":  # the default: a fixed mechanism, nothing read from the data
            st.info(auto.preview(grid, budget.pure(eps), resolved, float(n), k)[2], icon=":material/recommend:")
            return
        share = float(resolved["feature_share"]) if resolved["rule"] == "features" else 0.0
        if share > 0:  # the feature rule's preview, for a middling shape: the plan's own (Auto.preview)
            mech, extra, _ = auto.preview(grid, budget.pure(eps), resolved, float(n), k)
            why = recommend_features.preview_sentence(mech, extra, float(n), eps, resolved["query_sizes"])
        else:
            _, why = recommend.app_default(grid, eps, float(n), resolved["query_sizes"], sensitivity=k)
    except DPCoreError as e:
        st.error(str(e))
        return
    if share > 0:  # issue 27: the release reads private features of the data's shape first
        bought = "a coarse histogram; your public number of points replaces a count" if public_n else \
            "a count and a coarse histogram"
        how = (f" The release first spends {share:.0%} of ε on noisy features of the data ({bought}) and may "
               "choose another mechanism or other settings for their shape"
               + ("." if public_n else "; the guess below is for this preview only."))
    else:
        how = ("" if public_n else f" The release counts the points privately ({float(resolved['count_share']):.0%} "
               "of ε) and may choose another if the count lands elsewhere; the guess below is for this preview only.")
    st.info(why + how, icon=":material/recommend:")


def _use_budget(prop: Any) -> None:
    """"Use this budget" (a button callback, so it may set the budget widget's key): the proposal,
    rounded up, becomes this release's ε (or ρ); inside the widget's range."""
    ss = st.session_state
    name, low = ("epsilon", 0.001) if prop.cost.definition == "pure" else ("rho", 0.0001)
    ss[name] = ss[f"_w_{name}"] = min(max(float(prop.rounded), low), 100.0)


def _htf_note(rows: tuple[PlanRow, ...]) -> None:
    """Before an HTF release: how often a release is much worse than a typical one (simulated)."""
    notes = [r.details.get("bad_release_note") for r in rows if "bad_release_note" in r.details]
    note = next((n for n in notes if n), None)
    if note:
        st.warning(f"**HTF can have a bad release.** {note} Releasing again to get a better one would "
                   "spend budget again.", icon=":material/warning:")
    else:
        st.caption("HTF's error varies from one release to the next: on clustered data some releases are "
                   "several times worse than a typical one, because the tree may stop before it reaches "
                   "a dense cluster. How often was simulated only for 512 × 512 grids with the default "
                   "parameters, about 10,000 to 1,000,000 points and ε near 0.1 or 1.")
