"""Compare: the mechanisms' error on random range queries, to choose one (curator-only).

``pages/compare.py`` calls :func:`compare_step` on every run (this module is imported once).
"""

from __future__ import annotations

import streamlit as st

from dpcore import catalog
from dpcore.data.domain import Grid
from dpcore.errors import DPCoreError
from dpcore.points import evaluate
from ui import fmt, frame, kinds, state
from ui.kinds.points import state as points_state

REAL_DATA_WARNING = (
    "Choosing a mechanism by its error on your real data is itself a use of the data that is not "
    "differentially private: the choice can leak information. Prefer a public or synthetic "
    "stand-in, or treat the result as a privacy cost."
)
EPSILON_CHOICES = [0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]
SIZE_CHOICES = [0.01, 0.02, 0.05, 0.06, 0.1, 0.2]
SIGMA_CHOICES = {20: "σ = 20 cells: dense (one tight cluster)", 50: "σ = 50 cells: medium",
                 100: "σ = 100 cells: sparse (spread out)"}
SHAPES = {"random": "Random shape (sides in ratio up to 1:4)", "square": "Squares"}


def purpose() -> str:
    """The page's one sentence for the kind loaded now: what Compare is for and what comes next."""
    if kinds.current_name() == "points":
        return ("Compare how far each mechanism's answers to range queries are from the truth, to choose a "
                "mechanism before you release. Nothing here spends your privacy budget or is published. "
                "Next step: choose the best one on the Plan step.")
    return ("Compare every mechanism's expected error at each level, side by side, to choose one before you "
            "release. It uses no data and spends nothing. Next step: take the best one to the Plan step.")


def compare_step() -> None:
    """The Compare page below its heading: what to compare on, the settings, the run, the results."""
    if kinds.current_name() == "areas":
        from ui.kinds.areas.compare import compare_step as areas_step

        areas_step()
        return
    if kinds.current_name() == "flows":
        from ui.kinds.flows.compare import compare_step as flows_step

        flows_step()
        return
    ds = points_state.dataset()
    try:
        grid = points_state.grid()
    except DPCoreError as e:
        st.error(str(e))
        st.caption("Fix the area and grid on the Data page.")
        frame.stop()

    source, sigma, n_points = _data_choice(ds, grid)
    chosen, epsilons, sizes, shape, n_queries, repeats = _settings(grid)
    n_releases = len(chosen) * len(epsilons) * int(repeats)
    st.caption(f"{fmt.count(n_releases)} releases, each answering {fmt.count(len(sizes) * int(n_queries))} "
               "queries. None of them is charged to your budget: they are never published.")

    # ---------------------------------------------------------------- run
    if st.button("Run the comparison", type="primary", key="compare_run", disabled=n_releases == 0):
        _run(ds, grid, source, sigma, n_points, chosen, epsilons, sizes, shape, n_queries, repeats)

    _results(ds)


def _data_choice(ds: points_state.Dataset, grid: Grid) -> tuple[str, int | None, int | None]:
    """What to compare on: the loaded data (with its warning) or a synthetic stand-in and its settings."""
    sources = {
        "synthetic": "A public/synthetic stand-in (made-up clusters, as in the HTF paper)",
        "loaded": f"The loaded data ({ds.name})",
    }
    source = st.radio("Data to compare on", list(sources), format_func=sources.get,
                      key=state.persistent("compare_source", "synthetic"))
    state.store("compare_source")
    if source == "loaded":
        st.warning(REAL_DATA_WARNING, icon=":material/warning:")
        if ds.is_demo:
            st.caption("The demo dataset is made up, so comparing on it leaks nothing about real people.")
        return source, None, None
    c1, c2 = st.columns(2)
    sigma = c1.selectbox(
        "How clustered (σ of the Gaussian cluster)", list(SIGMA_CHOICES), format_func=SIGMA_CHOICES.get,
        key=state.persistent("compare_sigma", 50),
        help="Points around one random centre with spread σ in cells of a 1024 x 1024 grid over "
             "your bounds (the HTF paper's low / medium / high sparsity).")
    state.store("compare_sigma")
    n_points = c2.number_input(
        "Number of made-up points", min_value=1_000, max_value=5_000_000, step=10_000,
        key=state.persistent("compare_n", int(ds.n_guess or 100_000)),
        help="A public guess of your data's size. Do not copy the exact count from your data: "
             "that number is confidential too.")
    state.store("compare_n")
    st.caption(f"Made-up points over the public bounds and grid of the Data page "
               f"({fmt.count(grid.rows)} x {fmt.count(grid.cols)} cells); they hold nobody, so "
               "comparing on them costs no privacy.")
    return source, sigma, n_points


def _settings(grid: Grid) -> tuple[list[str], list[float], list[float], str, int, int]:
    """The mechanisms, budgets, query sizes and shape, queries per size and repeats."""
    # only mechanisms that can run these settings are offered (their own public checks, no data)
    eps_key = state.persistent("compare_epsilons", [0.1, 0.3, 0.5])
    names = catalog.names("points")
    refused = evaluate.refusals(grid, names, st.session_state[eps_key] or [0.5])
    runnable = [n for n in names if n not in refused]
    mech_key = state.persistent("compare_mechanisms", runnable)
    st.session_state[mech_key] = [n for n in st.session_state[mech_key] if n in runnable]
    chosen = st.multiselect(
        "Mechanisms", runnable, format_func=lambda n: catalog.get("points", n).title, key=mech_key,
        help="Each is run with its paper's default parameters. Mechanisms that need the number of "
             "points measure it privately, as in a real release. Only mechanisms that can run the "
             "grid and budgets chosen here are offered.")
    state.store("compare_mechanisms")
    for n, why in refused.items():
        st.caption(f":gray[Not offered — **{catalog.get('points', n).title}**: {why}]")
    c1, c2, c3 = st.columns(3)
    epsilons = c1.multiselect("Privacy budgets (ε)", EPSILON_CHOICES, format_func=lambda e: f"ε = {fmt.eps(e)}",
                              key=eps_key,
                              help="Every mechanism is released once per budget and repeat.")
    state.store("compare_epsilons")
    sizes = c2.multiselect("Query sizes (share of the area)", SIZE_CHOICES, format_func=lambda s: f"{s:.0%}",
                           key=state.persistent("compare_sizes", [0.02, 0.06, 0.1]),
                           help="Rectangles covering this share of the area, placed at random.")
    state.store("compare_sizes")
    shape = c3.radio("Query shape", list(SHAPES), format_func=SHAPES.get,
                     key=state.persistent("compare_shape", "random"))
    state.store("compare_shape")
    c1, c2 = st.columns(2)
    n_queries = c1.number_input("Queries per size", min_value=10, max_value=10_000, step=100,
                                key=state.persistent("compare_queries", 500),
                                help="The HTF paper uses 2,000; fewer run faster.")
    state.store("compare_queries")
    repeats = c2.number_input("Repeats", min_value=1, max_value=20, step=1,
                              key=state.persistent("compare_repeats", 3),
                              help="Independent releases per mechanism and budget; the ± is the "
                                   "standard error over them.")
    state.store("compare_repeats")
    return chosen, epsilons, sizes, shape, n_queries, repeats


def _run(ds: points_state.Dataset, grid: Grid, source: str, sigma: int | None, n_points: int | None,
         chosen: list[str], epsilons: list[float], sizes: list[float], shape: str, n_queries: int,
         repeats: int) -> None:
    """Release every chosen mechanism at every budget, never charged (never published); keep the result."""
    try:
        evaluate.check_settings(chosen, epsilons, sizes, int(n_queries), int(repeats), shape)
        bar = st.progress(0.0, text="Preparing the data …")
        if source == "loaded":
            agg = points_state.aggregate()
            label = ds.name
        else:
            agg = evaluate.synthetic_aggregate(grid, float(sigma), int(n_points))
            spec = evaluate.SyntheticSpec(float(sigma), int(n_points))
            label = spec.label

        def progress(done: int, total: int, what: str) -> None:
            text = "Done" if done >= total else f"Releasing {what} ({done + 1} of {total})"
            bar.progress(min(done / max(total, 1), 1.0), text=text)

        failures: dict[str, str] = {}
        results = evaluate.evaluate(agg, chosen, epsilons, sizes, int(n_queries), int(repeats), shape,
                                    progress=progress, failures=failures)
        bar.empty()
        st.session_state["compare_result"] = {
            "results": results,
            "summary": evaluate.summarize(results),
            "failures": failures,
            "real": source == "loaded",
            "data": label,
            "fingerprint": ds.fingerprint if source == "loaded" else None,
            "grid": (grid.rows, grid.cols),
            "n_queries": int(n_queries),
            "repeats": int(repeats),
        }
    except DPCoreError as e:
        st.error(str(e))


def _results(ds: points_state.Dataset) -> None:
    """The last comparison: its data, failures, a table per query size, the best per budget, the chart."""
    res = st.session_state.get("compare_result")
    if res is None:
        st.info("Choose what to compare and press **Run the comparison**. With the defaults it takes "
                "a few seconds per mechanism.")
        frame.stop()

    summary = res["summary"]
    if res["real"]:
        st.subheader(":red[Not for publication] — mechanisms compared on your real data")
        if res["fingerprint"] != ds.fingerprint:
            st.info(f"These results were computed on {res['data']}, not on the dataset loaded now.")
    else:
        st.subheader("Mechanisms compared on a synthetic stand-in")
    rows, cols = res["grid"]
    st.caption(
        f"Data: {res['data']}; grid {fmt.count(rows)} x {fmt.count(cols)}; {fmt.count(res['n_queries'])} "
        f"queries per size; {res['repeats']} repeat(s). Mean relative error (MRE) in percent, "
        "|true − released| / max(true, 20), averaged over the queries, ± its standard error over the "
        "repeats. Lower is better."
    )
    failures = res.get("failures") or {}
    for n, why in failures.items():
        st.warning(f"**{catalog.get('points', n).title}** did not finish ({why}). The other mechanisms' results are shown.",
                   icon=":material/error:")
    if summary.empty:
        st.dataframe(evaluate.summary_table(summary, failures=failures), width="stretch")
        frame.stop()
    pairs = [(sh, s) for sh in dict.fromkeys(summary["shape"])
             for s in dict.fromkeys(summary.loc[summary["shape"] == sh, "query_size"])]
    tabs = st.tabs([f"Queries of {s:.0%}" + ("" if sh == "random" else ", squares") for sh, s in pairs])
    for tab, (sh, s) in zip(tabs, pairs, strict=True):
        with tab:
            st.dataframe(evaluate.summary_table(summary, s, sh, failures).rename(index=_title), width="stretch")
    best = evaluate.best_per_epsilon(summary)
    if best:
        st.markdown("**Best at each budget** (the lowest MRE over the query sizes): " + "; ".join(
            f"ε = {fmt.eps(e)}: **{_title(n)}** ({fmt.num(m)} %)" for e, n, m in best) + ".")
        st.caption("Pick the best at the ε you plan to release with, and choose it on the Plan step. Auto, the Plan "
                   "step's default, uses the mechanism that did best, measured the same way, on test data no rule was tuned on.")
        _use(list(dict.fromkeys(summary["mechanism"])), best)
    title = "MRE vs ε" + (" — not for publication (real data)" if res["real"] else " — synthetic stand-in")
    st.plotly_chart(evaluate.summary_figure(summary.assign(mechanism=summary["mechanism"].map(_title)), title),
                    key="compare_chart")
    with st.expander("Time of one release (seconds)"):
        st.dataframe(evaluate.time_table(summary).map(lambda v: f"{v:.3g}"), width="stretch")


def _title(name: str) -> str:
    """A point mechanism by its title, as the Plan step lists it (the tables and the chart)."""
    return catalog.get("points", name).title


def nearest_best(best: list[tuple[float, str, float]], planned: float) -> str:
    """The best mechanism at the compared ε nearest the Plan step's ε ``planned`` (``best``: per compared
    ε, the best and its MRE, as :func:`dpcore.points.evaluate.best_per_epsilon` gives them; a tie between
    two ε: the smaller).

    >>> best = [(0.1, "uniform", 9.0), (0.5, "ug", 4.0), (1.0, "ag", 2.0)]
    >>> [nearest_best(best, e) for e in (0.05, 0.3, 0.4, 0.8, 5.0)]
    ['uniform', 'uniform', 'ug', 'ag', 'ag']
    """
    return min(best, key=lambda b: abs(b[0] - planned))[1]


def _use(names: list[str], best: list[tuple[float, str, float]]) -> None:
    """Take a compared mechanism to the Plan step: the best at the budget nearest the Plan step's ε first."""
    ss = st.session_state
    planned = float(ss.get("epsilon", state.DEFAULT_EPSILON))
    nearest = nearest_best(best, planned)
    pick = st.selectbox("Mechanism to plan with", names, index=names.index(nearest), format_func=_title,
                        key="compare_points_pick",
                        help=f"The best at the compared ε nearest the Plan step's ε = {fmt.eps(planned)} comes first.")
    if st.button("Use it on the Plan step", key="compare_points_use", icon=":material/tune:"):
        state.use_on_plan_step("mechanism", pick)
