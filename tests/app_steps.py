"""Helpers for the AppTests that open a kind's Data step in a new session (imported as
``app_steps``: ``tests/`` is on the path through its conftest).  Not a test module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from ui.state import release_widget_key

APP = str(Path(__file__).resolve().parents[1] / "app.py")
DEMO = Path(__file__).resolve().parents[1] / "assets" / "demo"


def ok(at: AppTest) -> AppTest:
    """``at`` after checking that its last run raised nothing."""
    assert not at.exception, at.exception
    return at


def data_step(kind: str) -> AppTest:
    """A new session of the app on the Data step with ``kind`` (points, areas, flows) chosen."""
    at = AppTest.from_file(APP, default_timeout=240)
    at.session_state["kind"] = at.session_state["_w_kind"] = kind
    ok(at.run())
    at.switch_page("pages/data.py").run()
    return ok(at)


def step(at: AppTest, name: str) -> AppTest:
    """Go to a step of the path (data, plan, release, export) as the navigation does."""
    at.switch_page(f"pages/{name}.py").run()
    return ok(at)


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe shown with ``column`` (AppTest does not expose dataframe keys)."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no dataframe with a column {column!r}")


def counties_csv(drop: int = 0) -> bytes:
    """The Georgia and Texas counties of the demo's population table as an upload (STATEFP, COUNTYFP,
    population); ``drop`` leaves out that many first rows."""
    t = pd.read_csv(DEMO / "census" / "us_state_county_population_2019.csv", dtype=str)
    t = t[(t["level"] == "county") & t["state_fips"].isin(["13", "48"])]
    return pd.DataFrame({"STATEFP": t["state_fips"], "COUNTYFP": t["county_fips"],
                         "population": t["popestimate2019"]}).iloc[drop:].to_csv(index=False).encode()


def in_order(node) -> list[tuple[str, str]]:
    """The elements under ``node`` (``at.main``) in drawing order: (type, text), the text being a button's
    or a status's label, else the element's value ("" when it has none)."""
    out: list[tuple[str, str]] = []
    for child in getattr(node, "children", {}).values():
        kind = type(child).__name__
        text = child.label if kind in ("Button", "Status") else getattr(child, "value", "")
        out.append((kind, str(text)))
        out += in_order(child)
    return out


def next_release_after_results(at: AppTest, key: str) -> None:
    """shared/UX.md, "a success reads as a success": the confirmation first, then the map and the errors,
    then "Another release from this data" with a secondary button (widget ``key``) that still states the
    cost."""
    order = in_order(at.main)

    def where(kind: str, start: str) -> int:
        return next(i for i, (k, t) in enumerate(order) if k == kind and t.startswith(start))

    success = where("Success", "Released")
    assert not [k for k, _ in order[:success] if k == "Button"]  # nothing to click above the confirmation
    assert success < where("Subheader", "Map") < where("Subheader", "Errors") < where("Markdown", "###### Another")
    assert where("Markdown", "###### Another") < where("Button", "Release with ")
    button = at.button(key=release_widget_key(key, at.session_state))
    assert button.label.startswith("Release with ") and " after this" in button.label  # the cost, stated
    assert button.proto.type == "secondary"


def extent_map_kept(at: AppTest, monkeypatch, module, chart: str) -> None:  # noqa: ANN001 - pytest's fixture
    """The Data step's extent map is made once per area list and kept in the session
    (:func:`ui.charts.kept`): two reruns draw ``chart`` once each and never make it again."""
    import pytest

    made = []
    monkeypatch.setattr(module, "_shipped_extent", lambda *a: made.append(a) or pytest.fail("made again"))
    for _ in range(2):
        ok(at.run())
        assert len([el for el in at.get("plotly_chart") if el.proto.id.endswith(chart)]) == 1
    assert made == []


def timed_points(days: int = 5, per_day: int = 40, seed: int = 3) -> bytes:
    """Points over NYC with a 'Date/Time' column, April 2014 (the Uber file's format)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(1, days + 1):
        for _ in range(per_day):
            lat, lon = 40.70 + 0.1 * rng.random(), -74.0 + 0.1 * rng.random()
            rows.append(f"4/{d}/2014 {rng.integers(0, 24)}:{rng.integers(10, 60)}:00,{lat:.5f},{lon:.5f}")
    return ("Date/Time,Lat,Lon\n" + "\n".join(rows) + "\n").encode()


def clean(at: AppTest) -> AppTest:
    """``at`` after checking that its last run raised nothing and showed no error."""
    ok(at)
    assert not at.error, [e.value for e in at.error]
    return at


def series_session(days: int = 5) -> AppTest:
    """A new session of the app with ``timed_points(days)`` uploaded on the points Data step and its
    time controls switched on (releases over time)."""
    at = clean(AppTest.from_file(APP, default_timeout=240).run())
    at.file_uploader(key="points_upload").set_value(("pickups.csv", timed_points(days), "text/csv")).run()
    clean(at)
    at.toggle(key="_w_series_on_points").set_value(True).run()
    return clean(at)
