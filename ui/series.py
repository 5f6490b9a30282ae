"""Releases over time in the app, the same for every kind of data: the time controls of the Data
step, the horizon figure of the Plan step, the one-click series release with its time slider and
chart, the series files of the Export step, and the office view of every budget (History).

The library does the work (:func:`dpcore.series.release_series`, charged through the one session
to :meth:`dpcore.core.session.Session.series_budget`); a kind supplies only its inputs (a
callable building the :class:`dpcore.series.PeriodInput` list), its files and its map of one
period (:class:`SeriesKind`).  Asking again re-serves the stored periods byte for byte and charges
nothing.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpcore.core import target_time
from dpcore.core.periods import parse_period, parse_time_range, periods_in
from dpcore.errors import DPCoreError
from dpcore.privacy import budget
from dpcore.privacy.budget import two_significant
from dpcore.privacy.series_ledger import horizon_figure, periods_per_year
from dpcore.privacy.units import TimeUnit
from ui import fmt, state

PERIODS = ("day", "week", "month", "fixed length")
UNITS = {"event": "one record (a point or a trip), whatever the period",
         "person-period": "one person's records in one period, capped (Google's and Meta's user-day)",
         "person": "one person over the whole range, in at most a set number of periods"}


@dataclass(frozen=True)
class Settings:
    """The public time settings of a series: the time column, the period, the range, the unit."""

    column: str
    period: str  # day, week, month or a fixed length such as 6h
    start: str
    end: str
    scope: str
    max_periods: int | None

    def periods(self) -> list[Any]:
        """The public periods of the range (from the curator's range, never from the data)."""
        start, end = parse_time_range(f"{self.start},{self.end}")
        return periods_in(start, end, parse_period(self.period))

    def unit(self, base: Any) -> TimeUnit:
        """The unit over time, on the unit each period's release protects."""
        return TimeUnit(self.scope, base, self.period.strip().lower(),
                        self.max_periods if self.scope == "person" else None)

    def time(self) -> dict[str, str]:
        """The public time settings for series.json."""
        return {"column": self.column, "period": self.period, "range": f"{self.start},{self.end}"}


@dataclass(frozen=True)
class SeriesKind:
    """What a kind supplies: ``inputs(unit, session) -> (period inputs, whole-data fingerprint)``,
    ``files_of(kind_release, ledger) -> files`` and ``figure(release.csv rows, zmax) -> figure``."""

    name: str
    inputs: Callable[[TimeUnit, Any], tuple[list[Any], str]]
    files_of: Callable[[Any, Any], Mapping[str, bytes]]
    figure: Callable[[pd.DataFrame, float | None, str], go.Figure]
    value: Callable[[pd.DataFrame], Any]  # what the colour scale reads (a density, a count)
    scope: str = ""  # the loaded data's fingerprint, under which its one-off releases are charged (``name`` the
    # ledger's kind): a series is shown only with the data it was released from, and composes with that budget


def _key(kind: str, what: str) -> str:
    return f"series_{what}_{kind}"


def result(kind: str, scope: str) -> Any:
    """The series released in this session from the data ``scope`` of ``kind``, or None."""
    kept = st.session_state.get(_key(kind, "out"))
    return kept[1] if kept is not None and kept[0] == scope else None


def active(kind: str) -> Settings | None:
    """The series settings of ``kind`` when "Release over time" is on and they are valid, else None."""
    return st.session_state.get(_key(kind, "settings"))


def time_controls(kind: str, frame: pd.DataFrame | None, base_unit: Any,
                  unit_choice: Callable[[Any], tuple[str, Any]] | None = None) -> Settings | None:
    """The Data step's "Release over time": time column, period, public range and unit over time.

    ``unit_choice(base_unit) -> (scope, base unit)`` draws a kind's own unit control in place of the
    choice of the three scopes (a count table names no person: :mod:`ui.kinds.areas.series`)."""
    from dpcore.core.periods import detect_time_column

    ss = st.session_state
    st.subheader("Release over time")
    on = st.toggle("Release over time (one release per period)", key=state.persistent(_key(kind, "on"), False),
                   help="A time column and a period turn the release into a series: every period of the public "
                        "range is released with the same plan, one click for all of them.")
    state.store(_key(kind, "on"))
    if not on:
        ss[_key(kind, "settings")] = None
        return None
    if frame is None or frame.empty:
        st.info("A release over time needs the data's time column: upload a file with one (the demo has none). "
                "For files kept on this computer, use the command line: python -m dpcore release ... --time-col.")
        ss[_key(kind, "settings")] = None
        return None
    cols = [str(c) for c in frame.columns]
    found = detect_time_column(frame.head(500))
    c1, c2 = st.columns(2)
    column = c1.selectbox("Time column", cols, key=_kept(kind, "col", found or cols[0], cols),
                          help=f"Detected: {found}." if found else "No time column was detected; pick it.")
    how = c2.selectbox("Period", PERIODS, key=_kept(kind, "period", "day"),
                       help="Day, ISO week (Monday to Sunday), calendar month, or a fixed length such as 6h.")
    period = how if how != "fixed length" else c2.text_input(
        "Fixed length", key=_kept(kind, "fixed", "6h"), help="e.g. 90min, 6h, 3d or 2w.")
    r1, r2 = st.columns(2)
    help_range = ("The public time range, typed by you and never filled from the data (like the public area): the "
                  "periods come from it, so an empty period is released too. Records outside it are dropped.")
    start = r1.text_input("Start of the public time range", key=_kept(kind, "start", ""),
                          placeholder="2014-04-01", help=help_range)
    end = r2.text_input("End (its whole day included)", key=_kept(kind, "end", ""),
                        placeholder="2014-04-30", help=help_range)
    if unit_choice is not None:
        scope, base_unit = unit_choice(base_unit)
    else:
        default_scope = "person-period" if getattr(base_unit, "entity", "record") == "person" else "event"
        scope = st.radio("Unit of privacy over time", list(UNITS), key=_kept(kind, "unit", default_scope),
                         horizontal=True, captions=list(UNITS.values()),
                         help="Person-period and person need the person column and its cap (set above).")
    max_periods = None
    if scope == "person":
        max_periods = int(st.number_input("Most periods one person may touch", min_value=1, step=1,
                                          key=_kept(kind, "maxp", 7),
                                          help="Each person's other periods are dropped by a keyed random choice "
                                               "before anything else."))
    for name in ("col", "period", "fixed", "start", "end", "unit", "maxp"):  # kept when the page is left
        if f"_w_series_{name}_{kind}" in ss:
            state.store(f"series_{name}_{kind}")
    return _checked(kind, Settings(column, str(period), start.strip(), end.strip(), scope, max_periods), base_unit)


def _kept(kind: str, name: str, default: Any, options: list[Any] | None = None) -> str:
    """The key of a time control whose value survives page switches (:func:`ui.state.persistent`);
    a kept value that is not among ``options`` (another table's column) goes back to ``default``."""
    key = state.persistent(f"series_{name}_{kind}", default)
    if options is not None and st.session_state[key] not in options:
        st.session_state[key] = default
    return key


def _checked(kind: str, s: Settings, base_unit: Any) -> Settings | None:
    """Keep the settings when they describe a series, else say what to fix (and keep none)."""
    ss = st.session_state
    ss[_key(kind, "settings")] = None
    if not s.start or not s.end:
        st.info("Type the public time range (start and end) to release over time.")
        return None
    try:
        periods = s.periods()
        unit = s.unit(base_unit)
    except DPCoreError as e:
        st.error(str(e))
        return None
    st.caption(f"{fmt.count(len(periods))} periods, {periods[0].label} to {periods[-1].label}; unit: {unit.label()}.")
    ss[_key(kind, "settings")] = s
    return s


def plan_panel(kind: str, cost: budget.PrivacyCost) -> None:
    """The Plan step over time: the budget per period, the horizon figure and its projection, a horizon cap."""
    s = active(kind)
    if s is None:
        return
    st.subheader("Over time")
    periods = s.periods()
    n = len(periods)
    h = horizon_figure([cost.value] * n, cost.definition, s.period.strip().lower(), n,
                       max_periods=s.max_periods if s.scope == "person" else None)
    eps = h["epsilon"][0]
    how = ("in parallel over periods: each period has its own budget" if s.scope != "person" else
           "sequentially: every period draws on one budget for the whole range")
    st.markdown(f"Each of the **{fmt.count(n)} periods** ({s.period}) is released with **{cost.label()}**; "
                f"they compose {how}.")
    c1, c2, c3 = st.columns(3)
    c1.metric("Per period", cost.label())
    c2.metric("Horizon, a person in every period (ρ)", fmt.eps(h["rho"]),
              help="The zCDP sum over the periods (a pure ε reads as ρ = ε²/2; Bun & Steinke 2016, Prop. 1.4).")
    c3.metric(f"Its (ε, δ) reading at δ = {eps['delta']:g}", fmt.eps(eps["epsilon"]))
    # the horizon cap reads the figure in the release's terms: ρ summed, or ε summed (basic composition)
    total = h["rho"] if cost.definition == "zcdp" else h["epsilon_pure"]
    st.caption(horizon_sentence(h, s.period.strip().lower()))
    cap = st.number_input(f"Horizon cap ({cost.symbol} summed over the periods, optional; 0 for none)", min_value=0.0,
                          format="%.4g", key=state.persistent(_key(kind, "hcap"), 0.0),
                          help="Refuse any period's release that would take the horizon figure past this.")
    state.store(_key(kind, "hcap"))
    if cap and total > cap * (1 + 1e-9):
        st.warning(f"This series would take the horizon figure to {cost.symbol} = {fmt.eps(total)}, past the horizon "
                   "cap: the release would be refused. Lower the budget per period or shorten the range.")


def horizon_sentence(h: Mapping[str, Any], period: str) -> str:
    """The Plan step's line under the horizon figure ``h`` (of periods named by ``period``): the range's
    total and a year's at the same rate, each as ρ and (under pure DP) as ε summed, so neither is read
    against the other.  The number of periods and of a year's are the figure's own (``periods``, and its
    projection's); a year's ε summed is :func:`dpcore.core.target_time.horizon_figure`'s, at the figure's
    mean ε per period.

    >>> from dpcore.privacy.series_ledger import horizon_figure
    >>> horizon_sentence(horizon_figure([0.5] * 30, "pure", "day", 30), "day")
    'Over the 30 periods of the range: ε summed = 15 (ρ = 3.8); 365 days at this rate: ε summed = 180 (ρ = 46).'
    >>> horizon_sentence(horizon_figure([0.01] * 2, "zcdp", "week", 2), "week")
    'Over the 2 periods of the range: ρ = 0.02; 52 weeks at this rate: ρ = 0.52.'
    """
    n, p = h["periods"], h["projection"]
    year, name = p["periods"], periods_per_year(period)[1]
    if "epsilon_pure" in h:
        per = h["epsilon_pure"] / n if n else 0.0
        in_year = target_time.horizon_figure(budget.pure(per), year)["value"] if per else 0.0
        text = (f"Over the {fmt.count(n)} periods of the range: ε summed = {two_significant(h['epsilon_pure'])} "
                f"(ρ = {two_significant(h['rho'])}); {fmt.count(year)} {name} at this rate: ε summed = "
                f"{two_significant(in_year)} (ρ = {two_significant(p['rho'])})")
    else:
        text = (f"Over the {fmt.count(n)} periods of the range: ρ = {two_significant(h['rho'])}; {fmt.count(year)} {name} "
                f"at this rate: ρ = {two_significant(p['rho'])}")
    return text + (f"; {h['person_bound']['text']}" if "person_bound" in h else "") + "."


def horizon_cap(kind: str, definition: str) -> budget.PrivacyCost | None:
    """The optional horizon cap of the Plan step, in the release's terms."""
    cap = float(st.session_state.get(_key(kind, "hcap")) or 0.0)
    if cap <= 0:
        return None
    return budget.pure(cap) if definition == "pure" else budget.zcdp(cap)


def release_series_now(kind: SeriesKind, plan: Any, s: Settings, session: Any) -> Any:
    """Release (or re-serve) every period with a progress bar; the series is kept in the session."""
    from dpcore.core.session import default_cap
    from dpcore.series import release_series

    unit = s.unit(plan.unit)
    bar = st.progress(0.0, text="Reading the periods …")
    inputs, whole = kind.inputs(unit, session)
    pairs = [(i.period.label, i.fingerprint) for i in inputs if not i.empty]
    # linked to the budget a one-off release of the same data draws on (the kind's ledger key and the
    # loaded data's fingerprint), so one-off releases and series compose as on the command line
    bud = session.series_budget(plan.kind, whole, pairs, unit, default=default_cap(plan.cost),
                                horizon_cap=horizon_cap(kind.name, plan.cost.definition),
                                oneoff=[(kind.name, kind.scope)] if kind.scope else [])
    out = release_series(plan, inputs, kind.files_of, unit=unit, budget=bud, session=session,
                         progress=lambda f, m: bar.progress(min(max(f, 0.0), 1.0), text=m), time=s.time())
    bar.empty()
    st.session_state[_key(kind.name, "out")] = (kind.scope, out)
    return out


def release_step(kind: SeriesKind, plan: Any, plan_error: str | None, session: Any) -> None:
    """The Release step over time: one button stating the cost, the outcome, the time slider and the chart."""
    s = active(kind.name)
    if s is None:
        return
    if plan is None:
        st.error(plan_error or "Fix the plan first.")
        return
    try:
        n = len(s.periods())
        s.unit(plan.unit)
    except DPCoreError as e:
        st.error(str(e))
        return
    label = f"Release {fmt.count(n)} periods — {plan.cost.label()} each"
    if st.button(label, type="primary", key=f"series_release_{kind.name}",
                 help="Periods released before with this plan and the same data are re-served, byte for byte, "
                      "and charge nothing."):
        try:
            release_series_now(kind, plan, s, session)
        except DPCoreError as e:
            st.error(str(e))
    out = result(kind.name, kind.scope)
    if out is None:
        st.caption("Nothing has been released over time from this data yet.")
        return
    _outcome(out, plan)
    st.subheader("Map over time", anchor="map")
    rows = series_frame(out)
    _map_over_time(kind, out, rows)
    st.subheader("One area over time")
    _chart(rows)


def _outcome(out: Any, plan: Any) -> None:
    """What this request did: released, re-served (nothing charged), corrections; the horizon."""
    counts = {k: sum(o.status == k for o in out.outcomes) for k in ("released", "re-served", "correction")}
    n = len(out.outcomes)
    if counts["re-served"] == n:
        st.success(f"Re-served all {fmt.count(n)} periods from the stored releases: byte-identical, nothing charged.")
    else:
        said = ", ".join(f"{fmt.count(v)} {k}" for k, v in counts.items() if v)
        st.success(f"Released the series of {fmt.count(n)} periods ({said}); {fmt.count(out.charged)} charged "
                   f"{plan.cost.label()} each.")
    if counts["correction"]:
        st.warning(f"{counts['correction']} period(s) had changed data since their release (late records): released "
                   "again as corrections, charged, and labelled so in series.json.")
    h = out.record.get("horizon")
    if h:
        st.caption(f"Horizon (a person in every period): ρ = {fmt.eps(h['rho'])} "
                   f"(ε ≈ {fmt.eps(h['epsilon'][0]['epsilon'])} at δ = {h['epsilon'][0]['delta']:g}); "
                   f"{h['projection']['text']}.")


def series_frame(out: Any) -> pd.DataFrame:
    """series.csv as published, read once per series (period and area as text)."""
    kept = st.session_state.get("_series_rows")
    if kept is not None and kept[0] is out:  # the object itself: an id may be reused once it is freed
        return kept[1]
    rows = pd.read_csv(io.BytesIO(out.files["series.csv"]), dtype={"period": str, "area": str})
    st.session_state["_series_rows"] = (out, rows)
    return rows


def _map_over_time(kind: SeriesKind, out: Any, rows: pd.DataFrame) -> None:
    labels = [o.period.label for o in out.outcomes]
    wkey = f"_w_series_period_shown_{kind.name}"
    if st.session_state.get(wkey) not in labels:  # another series (other periods) since it was moved
        st.session_state[wkey] = labels[0]
    shown = labels[0] if len(labels) == 1 else st.select_slider(
        "Period shown", labels, key=wkey, help="Move along the periods; the colour scale is the same for every period.")
    values = kind.value(rows)
    zmax = float(pd.Series(values).max()) if len(rows) else None  # the top of every period's log scale
    part = rows[rows["period"] == shown]
    status = next(o.status for o in out.outcomes if o.period.label == shown)
    st.plotly_chart(kind.figure(part, zmax, f"{shown} ({status})"), width="stretch", key=f"series_map_{kind.name}")
    st.caption(f"{shown}: {fmt.count(len(part))} released rows, {status}. Negative noisy counts are drawn as 0; the "
               "files keep them.")


def _chart(rows: pd.DataFrame) -> None:
    """The series of one area (cell, area or pair) with its 95 % interval band."""
    if rows.empty:
        st.info("The series has no released rows.")
        return
    totals = rows.groupby("area")["noisy_count"].sum().sort_values(ascending=False)
    areas = list(totals.index[:300])
    if st.session_state.get("_w_series_area") not in areas:  # another series since it was chosen
        st.session_state["_w_series_area"] = areas[0]
    area = st.selectbox("Area", areas, key="_w_series_area",
                        help="The 300 areas with the largest noisy totals, largest first (the files hold every one).")
    one = rows[rows["area"] == area].sort_values("period")
    # a mechanism without a valid interval leaves ci95_low/high empty in release.csv: no band is drawn
    band = bool(one[["ci95_low", "ci95_high"]].apply(pd.to_numeric, errors="coerce").notna().all(axis=1).any())
    fig = go.Figure([
        *([go.Scatter(x=one["period"], y=one["ci95_high"], mode="lines", line={"width": 0}, showlegend=False,
                      hoverinfo="skip"),
           go.Scatter(x=one["period"], y=one["ci95_low"], mode="lines", line={"width": 0}, fill="tonexty",
                      fillcolor="rgba(31,78,121,0.2)", name="95 % interval")] if band else []),
        go.Scatter(x=one["period"], y=one["noisy_count"], mode="lines+markers", line={"color": "#1f4e79"},
                   name="noisy count"),
    ])
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10}, xaxis={"type": "category"},
                      title={"text": f"Area {area}: noisy count per period" + (" with its 95 % interval" if band else ""),
                             "font": {"size": 14}},
                      yaxis={"title": "noisy count"})
    st.plotly_chart(fig, width="stretch", key="series_chart")
    if not band:
        st.caption("No 95 % interval: this mechanism's release.csv leaves ci95_low and ci95_high empty "
                   "(release.json says why and where a valid interval is given).")


def export_step(kind: str, scope: str) -> bool:
    """The Export step over time: series.csv, series.json and every period's files (a zip); whether shown."""
    out = result(kind, scope)
    if out is None:
        return False
    st.subheader("Series")
    st.markdown(f"{fmt.count(len(out.outcomes))} periods. `series.csv`: one row per period and released area "
                "(period, area, noisy count, SD, 95 % interval); `series.json`: the series record (plan, unit, "
                "every period's status and spend, the horizon figure).")
    c1, c2, c3 = st.columns(3)
    c1.download_button("series.csv", out.files["series.csv"], "series.csv", "text/csv", on_click="ignore")
    c2.download_button("series.json", out.files["series.json"], "series.json", "application/json", on_click="ignore")
    c3.download_button("Every period's files (zip)", lambda: period_zip(out), "series.zip", "application/zip",
                       on_click="ignore", help="One folder per period (S/<period>/) with the usual files.")
    st.dataframe(series_frame(out).head(20), hide_index=True)
    return True


def period_zip(out: Any) -> bytes:
    """The folders S/<period>/ of a series and its two series files, as one zip (the bytes served)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for o in out.outcomes:
            for name, data in o.files.items():
                z.writestr(f"S/{o.period.label}/{name}", data)
        for name, data in out.files.items():
            z.writestr(f"S/{name}", data)
    return buf.getvalue()


def budgets_table(names: Mapping[str, str] | None = None) -> None:
    """History's office view: every budget in the database (no upload needed); ``names``: budget key ->
    the name History lists its data under (shown instead of the keyed key)."""
    try:
        rows = state.session().budgets()
    except DPCoreError as e:
        st.error(str(e))
        return
    if not rows:
        st.caption("No budget in the database yet.")
        return
    st.dataframe(pd.DataFrame([budget_row(r, names) for r in rows]), hide_index=True, key="budgets_table")


def budget_row(r: Mapping[str, Any], names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One budget as a row of the office view (the figures of ``python -m dpcore budgets``); ``names``
    (budget key -> name) names the keyed ones."""
    h = r["horizon"]
    eps = h["epsilon"][0] if h.get("epsilon") else {"epsilon": 0.0, "delta": 0.0}
    name = (names or {}).get(str(r["population"]))
    return {"population": name or str(r["population"])[:24], "kind": r["kind"],
            "unit": (r.get("unit") or {}).get("label", "one record"),
            "periods": len(r["periods"]),
            "spent": fmt.eps(r["spent"]) + (" (most of any period)" if r.get("cap_per") == "period" else "")
            + (f"; {r['counted']}" if r.get("counted") else ""),
            "cap": r["cap"]["label"] + (f" per {r['cap_per']}" if r.get("cap_per") else ""),
            "horizon ρ": fmt.eps(h["rho"]), "horizon ε": f"{fmt.eps(eps['epsilon'])} at δ = {eps['delta']:g}",
            "projection": h["projection"]["text"], "releases": r["releases"]}


def sidebar_note(kind: str, scope: str, ledger: Any = None) -> None:
    """The sidebar's lines on the series of ``kind`` (its budget is per period, beside the one-off budget):
    each linked series' budget as the budget database holds it (``ledger``: the data's one-off budget,
    :meth:`dpcore.privacy.oneoff_links.LinkedLedger.linked_series`), and the horizon of this session's."""
    linked = ledger.linked_series() if hasattr(ledger, "linked_series") else []
    if active(kind) is None and not linked:
        return
    out = result(kind, scope)
    st.markdown("#### Over time")
    for s in linked:
        cap = s["cap"]
        per = "per period" if s["per_period"] else "over the horizon (a person)"
        if s["spent"] is None:
            st.caption(f"{per}: cap {cap.label()}, over {fmt.count(s['periods'])} periods (the one-off releases of "
                       "this data cannot be counted in it: nothing more can be released over time).")
        else:
            st.caption(f"{per}: spent {cap.symbol} = {fmt.eps(s['spent'])} of {fmt.eps(cap.value)} · left "
                       f"{fmt.eps(max(cap.value - s['spent'], 0.0))}, over {fmt.count(s['periods'])} "
                       f"period{'s' if s['periods'] != 1 else ''}")
    if out is None:
        if not linked:
            st.caption("Release over time is on: the Release step releases every period.")
        return
    per = out.record["spend"]["per_period"]
    h = out.record.get("horizon") or {}
    st.caption(f"{fmt.count(len(out.outcomes))} periods, {per.get('label', '')} each"
               + (f"; horizon ρ = {fmt.eps(h['rho'])} for a person in every period" if h else "") + ".")


def current_note(kind: str, scope: str) -> str | None:
    """The sidebar's "Current release" line of the series released in this session from ``scope``, or None."""
    out = result(kind, scope)
    if out is None:
        return None
    r = out.record
    period = (r.get("time") or {}).get("period", "")
    return (f"Series over time: {r['plan'].get('label') or r['mechanism']}  \n{r['spend']['per_period']['label']} "
            f"per period · {fmt.count(len(out.outcomes))} periods" + (f" ({period})" if period else ""))
