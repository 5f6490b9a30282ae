"""Points, Plan step: the mechanism, its parameters, the budget, the expected error (no data used).

:func:`selection` reads back what the curator chose (no widgets), for the Release step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from dpcore import catalog
from dpcore.core.mechanism import Param
from dpcore.errors import DPCoreError
from dpcore.points import recommend
from dpcore.privacy import budget
from dpcore.privacy.calibration import interval_half_width
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.units import Unit
from ui import budget_ui, fmt, frame, state, target_ui
from ui.kinds.points import plan_matrix

#: the preview's guess of the number of points when the data gives none (not used by a release)
DEFAULT_N_GUESS = 100_000


def plan_step() -> None:
    """The Plan step for points (the page script is pages/plan.py)."""
    ds = state.dataset()
    try:
        grid = state.grid()
    except DPCoreError as e:
        st.error(str(e))
        frame.link("data", "Fix the area and grid on the Data step")
        frame.stop()

    # ---------------------------------------------------------------- mechanism
    names = sorted(catalog.names("points"), key=lambda n: n != state.DEFAULT_MECHANISM)  # the default first
    mname = st.selectbox(
        "Mechanism", names, key=state.persistent("mechanism", state.DEFAULT_MECHANISM),
        format_func=lambda n: f"{catalog.get('points', n).title} — use it when: {use_when_line(catalog.get('points', n))}",
        help="Each mechanism with the one line that says when to use it. Auto, the default, chooses for you "
             "from public inputs only.",
    )
    state.store("mechanism")
    mech = catalog.get("points", mname)
    st.markdown(f"{mech.summary}  \n*When to use:* {mech.when_to_use}")
    st.caption(f"Source: {mech.reference}")

    raw = dict(st.session_state["mech_params"].get(mname, {}))


    def _param_widget(p: Param) -> None:
        key = f"param_{mname}_{p.name}"
        cur = raw.get(p.name, p.default)
        defaults = {q.name: q.default for q in mech.params}
        if p.shown_if is not None and raw.get(p.shown_if[0], defaults.get(p.shown_if[0])) != p.shown_if[1]:
            return  # only relevant for another choice: keep its value, do not show it
        if p.kind not in (bool, int, float, str):
            return  # not typed in: set below (e.g. the matrix mechanism's uploaded rectangles)
        if p.choices:
            names = dict(zip(p.choices, p.choice_labels or p.choices, strict=True))
            raw[p.name] = st.selectbox(p.label, list(p.choices), index=list(p.choices).index(cur),
                                       format_func=names.get, help=p.help, key=key)
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


    basic = [p for p in mech.params if not p.advanced]
    for p in basic:
        _param_widget(p)
    _defaults = {q.name: q.default for q in mech.params}
    advanced = [p for p in mech.params if p.advanced and (  # only those that matter for the choices made
        p.shown_if is None or raw.get(p.shown_if[0], _defaults.get(p.shown_if[0])) == p.shown_if[1])]
    if advanced:
        with st.expander("Advanced parameters"):
            for p in advanced:
                _param_widget(p)


    if mname == "matrix" and raw.get("workload") == "uploaded":
        plan_matrix.rectangles_upload(raw)
    st.session_state["mech_params"][mname] = raw
    if mname == "auto":
        _auto_reason(grid, ds, raw)

    # ---------------------------------------------------------------- budget
    st.subheader("Privacy budget")
    fp = ds.fingerprint
    sec = budget_ui.section("points", fp, st.session_state["ledgers"], key=f"points_{fp}",
                            definition_key=f"definition_{fp}", cap_key=f"budget_cap_{fp}_{{definition}}",
                            release_keys={"pure": "epsilon", "zcdp": "rho"}, delta_key="delta",
                            cap_label="Budget cap for this dataset (total)")
    led, release_cost, definition = sec.ledger, sec.cost, sec.definition
    assert release_cost is not None
    sym = led.cap.symbol

    n_guess = None
    if mech.needs_n_guess:
        default_guess = ds.n_guess if ds.n_guess else DEFAULT_N_GUESS
        n_guess = st.number_input(
            "Rough number of points (a public guess, only for this preview)", min_value=1, step=1000,
            key=state.seed(f"_w_n_guess_{ds.fingerprint}",
                           int(st.session_state.get(f"n_guess_{ds.fingerprint}", default_guess))),
            help="This mechanism sizes its grid from the number of points, which it measures privately "
                 "when releasing. The preview needs a guess; it is not used in the release.",
        )
        st.session_state[f"n_guess_{ds.fingerprint}"] = int(n_guess)



    # ---------------------------------------------------------------- expected error
    st.subheader("Expected error (before release, from no data)")
    agg_sens = 1
    cap_user = st.session_state.get("user_cap")
    if ds.table.user_column is not None and cap_user:
        agg_sens = int(cap_user)
    try:
        unit = Unit("person", cap=agg_sens) if agg_sens > 1 else Unit("record")
        if mech.name == "matrix":
            with st.spinner("Designing the strategy for these queries (once per workload; a big grid takes "
                            "a minute) …"):
                plan = mech.plan(grid, release_cost, raw, unit=unit, n_estimate=n_guess)
        else:
            plan = mech.plan(grid, release_cost, raw, unit=unit, n_estimate=n_guess)
        params, levels = dict(plan.params), plan.inner
        rows = []
        for lv in levels:

            def query(share: float, lv: Any = lv) -> str:  # only released levels answer queries: "–" otherwise
                return (f"± {fmt.count(interval_half_width('normal', lv.query_sd(share, grid.n_cells)))}"
                        if lv.in_partition else "–")

            rows.append({
                "level": lv.name,
                sym: lv.cost.value,
                f"share of {sym}": lv.cost.value / release_cost.value,
                "counts released": int(lv.n_counts),
                "noise scale": lv.scale,
                "± per count (95%)": int(round(lv.ci95)),
                "2% of area: ± (95%)": query(0.02),
                "10% of area: ± (95%)": query(0.10),
            })
        table = pd.DataFrame(rows)
        st.dataframe(
            table, hide_index=True, width="stretch",
            column_config={  # narrow number columns: the whole table fits the page without scrolling
                "level": st.column_config.TextColumn(width="medium"),
                sym: st.column_config.NumberColumn(format="%.2g", help="This level's share of the budget.",
                                                   width="small"),
                f"share of {sym}": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent",
                                                                   width="small"),
                "counts released": st.column_config.NumberColumn(format="localized", width="small"),
                "noise scale": st.column_config.NumberColumn(format="%.3g", width="small"),
                "± per count (95%)": st.column_config.NumberColumn(format="localized", width="small",
                                                                    help="In points, for 95 % of the counts."),
                "2% of area: ± (95%)": st.column_config.TextColumn(
                    width="small",
                    help="A query over 2 % of the area, in points, from noise alone; – for levels that are "
                         "not released."),
                "10% of area: ± (95%)": st.column_config.TextColumn(
                    width="small", help="As for 2 %, over 10 % of the area."),
            },
        )
        leaf = [lv for lv in levels if lv.in_partition][-1]
        st.markdown(
            f"Each released count is off by at most **±{fmt.count(leaf.ci95)} points** in 19 of 20 cases "
            f"(1 in 20 may be off by more). A query covering 10% of the area is off by about "
            f"±{fmt.count(interval_half_width('normal', leaf.query_sd(0.10, grid.n_cells)))} from noise alone."
        )
        if mech.name == "matrix":
            mx = levels[0].extra["matrix"]
            st.markdown(f"**Queries the strategy is tuned for:** {mx['workload_name']} "
                        f"({fmt.count(mx['n_queries'])} queries; strategy {mx['strategy']}).")
            st.dataframe(
                pd.DataFrame([{
                    "expected error per query (RMSE)": mx["expected_rmse_per_query"],
                    "lower bound (any strategy)": mx["rmse_lower_bound"],
                    "ratio to the bound": mx["ratio_to_lower_bound"],
                }]),
                hide_index=True, width="stretch", key="matrix_error_table",
                column_config={c: st.column_config.NumberColumn(format="%.3g") for c in (
                    "expected error per query (RMSE)", "lower bound (any strategy)", "ratio to the bound")},
            )
            st.caption("From the queries and the budget only (no data): the root mean square noise of the "
                       "answers to your queries, and the smallest any strategy could reach (SVD bound).")
            for note in mx["notes"]:
                st.warning(note)
            if "simultaneous_95" in mx:
                plan_matrix.matrix_extras(mx)
        elif mech.name == "htf":
            _htf_note(levels)
        elif mech.name == "uniform":
            st.caption("Uniform's error is mostly from assuming the points are spread evenly; "
                       "that part depends on the data and cannot be previewed.")
        elif mech.name == "ug":
            st.caption("Noise only: the error from spreading each block's count evenly over it depends "
                       "on the data and is not included.")
        plan_ok = True
    except DPCoreError as e:
        if mech.name == "matrix" and raw.get("workload") == "uploaded" and not raw.get("rectangles"):
            st.info("The expected error appears here once your rectangles are uploaded.")  # nothing wrong yet
        else:
            st.error(str(e))
        plan_ok = False

    if plan_ok:
        with st.expander("Plan from the error you need", icon=":material/target:"):
            prop = target_ui.planner(catalog.get("points", mname), grid, definition, params,
                                     {"n_estimate": n_guess} if n_guess else {}, unit=unit, key="points_target",
                                     on_use=_use_budget, word="points", finest_label="each released count")
            if prop is not None and prop.cost.value > led.remaining:
                st.warning(f"The proposal is more than the budget left ({sym} = {fmt.eps(led.remaining)}): "
                           "loosen the target, or raise the cap.")
        with st.expander("Expected error of a query you type (before release, costs nothing)"):
            b = grid.bounds
            # default: a box of 10 % of the area around the centre
            f = 0.10 ** 0.5 / 2
            mx, my = (b.west + b.east) / 2, (b.south + b.north) / 2
            dx, dy = (b.east - b.west) * f, (b.north - b.south) * f
            q1, q2, q3, q4 = st.columns(4)
            qw = q1.number_input("Query west", b.west, b.east, key=state.seed("_w_q_w", mx - dx), format="%.5f")
            qs = q2.number_input("Query south", b.south, b.north, key=state.seed("_w_q_s", my - dy), format="%.5f")
            qe = q3.number_input("Query east", b.west, b.east, key=state.seed("_w_q_e", mx + dx), format="%.5f")
            qn = q4.number_input("Query north", b.south, b.north, key=state.seed("_w_q_n", my + dy), format="%.5f")
            if qw >= qe or qs >= qn:
                st.error("The query box needs west < east and south < north.")
            else:
                rows, cols, _ = grid.cell_index(np.array([qw, qe]), np.array([qs, qn]))
                rect = (int(rows[0]), int(rows[1]) + 1, int(cols[0]), int(cols[1]) + 1)
                qerr = mech.query_error(plan, rect)
                share = qerr["cells"] / grid.n_cells
                how = ("exact" if qerr["exact"] else
                       "approximate: assumes the released areas are evenly spread over the grid")
                st.markdown(
                    f"The box covers {fmt.count(qerr['cells'])} cells ({share:.1%} of the area). Its released "
                    f"count is off by about **±{fmt.count(interval_half_width('normal', qerr['sd']))} points** (95%) from noise alone "
                    f"(SD {fmt.num(qerr['sd'])}; {how})."
                )
                st.caption("Snapped to the grid's cells. The error from spreading counts evenly inside "
                           "areas depends on the data and is not included.")

        frame.link("release", "Next: release →")


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


def _auto_reason(grid: Any, ds: state.Dataset, raw: dict[str, Any]) -> None:
    """Which mechanism auto will use and why, in one sentence (:func:`dpcore.points.recommend.app_default`),
    from the public inputs as they stand now: ε, the public number or guess of the points, the query sizes
    and the cap per person (the budget and guess widgets below are read from the session)."""
    ss = st.session_state
    if state.ledger().definition != "pure":
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
        sizes = catalog.get("points", "auto").resolve_params(raw)["query_sizes"]
        _, why = recommend.app_default(grid, eps, float(n), sizes, sensitivity=k)
    except DPCoreError as e:
        st.error(str(e))
        return
    how = ("" if public_n else " The release counts the points privately (5 % of ε) and may choose another "
           "if the count lands elsewhere; the guess below is for this preview only.")
    st.info(why + how, icon=":material/recommend:")


def _use_budget(prop: Any) -> None:
    """"Use this budget" (a button callback, so it may set the budget widget's key): the proposal,
    rounded up, becomes this release's ε (or ρ); inside the widget's range."""
    ss = st.session_state
    name, low = ("epsilon", 0.001) if prop.cost.definition == "pure" else ("rho", 0.0001)
    ss[name] = ss[f"_w_{name}"] = min(max(float(prop.rounded), low), 100.0)


def _htf_note(levels: Any) -> None:
    """Before an HTF release: how often a release is much worse than a typical one (simulated)."""
    notes = [lv.extra.get("bad_release_note") for lv in levels if "bad_release_note" in lv.extra]
    note = next((n for n in notes if n), None)
    if note:
        st.warning(f"**HTF can have a bad release.** {note} Releasing again to get a better one would "
                   "spend budget again.", icon=":material/warning:")
    else:
        st.caption("HTF's error varies from one release to the next: on clustered data some releases are "
                   "several times worse than a typical one, because the tree may stop before it reaches "
                   "a dense cluster. How often was simulated only for 512 × 512 grids with the default "
                   "parameters, about 10,000 to 1,000,000 points and ε near 0.1 or 1.")


@dataclass(frozen=True)
class Selection:
    """What the Plan step chose, read back without widgets: the Release step releases exactly this."""

    mechanism: Any
    params: dict[str, Any]
    cost: budget.PrivacyCost
    ledger: Ledger
    unit: Unit
    error: str | None  # why the plan cannot be released (bad parameters, no rectangles ...), or None


def selection() -> Selection:
    """The mechanism, parameters and budget of the Plan step, for the dataset loaded now."""
    ss = st.session_state
    ds = state.dataset()
    mech = catalog.get("points", ss.get("mechanism", state.DEFAULT_MECHANISM))
    led = state.ledger()
    cost = (budget.pure(ss.get("epsilon", state.DEFAULT_EPSILON)) if led.definition == "pure"
            else budget.zcdp(ss.get("rho", state.DEFAULT_RHO)))
    cap_user = ss.get("user_cap")
    # whom this release protects (checked again when charging)
    unit = Unit("person", cap=int(cap_user)) if ds.table.user_column is not None and cap_user else Unit("record")
    try:
        raw = dict(ss["mech_params"].get(mech.name, {}))
        if mech.name == "matrix" and raw.get("workload") == "uploaded" and not raw.get("rectangles"):
            raise DPCoreError("Upload the query rectangles on the Plan step first.")
        # the plan's own refusals (ρ-zCDP for a pure-only mechanism, a grid too large for the matrix
        # mechanism ...): data-free, cached
        params = dict(mech.plan(state.grid(), cost, raw, unit=unit, n_estimate=ss.get(
            f"n_guess_{ds.fingerprint}", ds.n_guess or DEFAULT_N_GUESS) if mech.needs_n_guess else None).params)
        error = None
    except DPCoreError as e:
        params, error = {}, str(e)
    return Selection(mech, params, cost, led, unit, error)
