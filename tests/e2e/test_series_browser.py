"""Releases over time in a real browser (issue 24): the Uber pickups of April 2014 released as 30
daily periods (event unit), the time slider moved over the map, the chart of one area seen, and a
second click that re-serves every period without charging.  A slice of the file (the first pickups
of each day, written to a temp dir) keeps it fast; the periods come from the typed range.

Navigation is by the sidebar links only (a page.goto() would start a new session)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_steps import (
    SCREENS,
    click,
    enter,
    go_to,
    keep_screenshot,
    pick_option,
    wait_for_map,
    wait_idle,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="/usr/bin/chromium is missing"),
    pytest.mark.filterwarnings("ignore:Session-scoped fixtures defined as instance methods"),
]

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
UBER = SHARED / "points" / "uber_nyc_pickups_2014-04.csv.gz"
TAXI = SHARED / "od" / "nyc_green_taxi_trips_2020-04.csv.gz"
ZONES = SHARED / "boundaries" / "nyc_taxi_zone_lookup.csv"
OUTLINES = SHARED / "boundaries" / "nyc_taxi_zones.geojson"


def uber_slice(per_day: int = 150) -> bytes:
    """The first ``per_day`` pickups of every day of April 2014, as the file has them."""
    df = pd.read_csv(UBER)
    day = pd.to_datetime(df["Date/Time"], format="%m/%d/%Y %H:%M:%S").dt.day
    return df[df.groupby(day).cumcount() < per_day].to_csv(index=False).encode()


def turn_on_series(page, start: str, end: str) -> None:
    """Data step: "Release over time", then the public range typed by the curator."""
    main = page.get_by_test_id("stMain")
    click(page, main.get_by_text("Release over time (one release per period)"))
    for name, value in (("Start of the public time range", start), ("End (its whole day included)", end)):
        enter(page, main.get_by_role("textbox", name=name), value)


@pytest.mark.skipif(not UBER.exists(), reason="the Uber pickups are missing")
def test_uber_pickups_30_days_slider_chart_and_reserve(app_url, page):
    page.set_default_timeout(90_000)
    page.goto(app_url)
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("100,000 rows kept of 100,000 read").wait_for()
    data = uber_slice()
    n = data.count(b"\n") - 1
    wait_idle(page)
    page.locator("input[type=file]").first.set_input_files(
        files=[{"name": "uber_slice.csv", "mimeType": "text/csv", "buffer": data}])
    sidebar.get_by_text(re.compile(rf"rows kept of {n:,} read")).wait_for()
    main = page.get_by_test_id("stMain")
    turn_on_series(page, "2014-04-01", "2014-04-30")
    main.get_by_text("30 periods, 2014-04-01 to 2014-04-30; unit: one record, per day").wait_for()

    go_to(page, "Plan")  # ε = 0.1 per day, as the command line
    main.get_by_text("Horizon, a person in every period (ρ)").wait_for()
    enter(page, main.get_by_role("spinbutton", name="Privacy budget of this release (ε)"), "0.1")
    main.get_by_text("Each of the 30 periods (day) is released with ε = 0.1").wait_for()
    go_to(page, "Release")
    click(page, main.get_by_role("button", name="Release 30 periods — ε = 0.1 each"))
    main.get_by_text(re.compile(r"^Released the series of 30 periods \(30 released\)")).wait_for(timeout=180_000)
    wait_for_map(page)
    keep_screenshot(page, "series_uber_first.png", full_page=True)

    # the time slider: three steps to the right shows the 4th of April
    main.get_by_role("slider").first.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    main.get_by_text(re.compile(r"^2014-04-04: [\d,]+ released rows, released")).wait_for()
    wait_for_map(page)
    chart = main.locator(".js-plotly-plot").filter(has_text="noisy count per period with its 95 % interval")
    chart.first.wait_for()
    assert chart.first.locator(".scatterlayer .trace").count() == 3  # band top, band bottom, the series
    keep_screenshot(page, "series_uber_day4.png", full_page=True)

    # asking again re-serves every period, byte for byte, and charges nothing
    click(page, main.get_by_role("button", name=re.compile(r"^Release 30 periods")))
    main.get_by_text("Re-served all 30 periods from the stored releases: byte-identical, nothing charged.").wait_for()
    go_to(page, "History")
    main.get_by_text("Every budget in the database (the office view)").wait_for()
    main.get_by_test_id("stDataFrame").first.wait_for()
    if SCREENS:
        page.wait_for_timeout(1500)  # the table draws on a canvas
        keep_screenshot(page, "series_uber_history.png", full_page=True)


def public_zones() -> pd.DataFrame:
    """The public zone list (borough, then zone) with each zone's centroid from the TLC's zone outlines."""
    import geopandas as gpd

    zones = pd.read_csv(ZONES, dtype=str)[["Borough", "LocationID"]]
    shapes = gpd.read_file(OUTLINES)
    pts = shapes.to_crs(2263).geometry.centroid.to_crs(4326)
    xy = pd.DataFrame({"LocationID": shapes["LocationID"].astype(int).astype(str), "lon": pts.x.round(5),
                       "lat": pts.y.round(5)}).drop_duplicates("LocationID")
    return zones.merge(xy, on="LocationID", how="left")


@pytest.mark.skipif(not (TAXI.exists() and ZONES.exists() and OUTLINES.exists()),
                    reason="the green taxi trips are missing")
def test_green_taxi_trips_by_iso_week_person_period(app_url, page):
    """A temp copy of the trips with a synthetic person id, uploaded with the public zone list;
    released by ISO week with the unit person-week; the slider and the chart of one pair."""
    page.set_default_timeout(90_000)
    trips = pd.read_csv(TAXI, usecols=["lpep_pickup_datetime", "PULocationID", "DOLocationID"])
    trips = trips.sample(n=8_000, random_state=4).reset_index(drop=True)
    trips["person"] = np.random.default_rng(5).integers(0, 2_000, len(trips))  # a synthetic person id
    zones = public_zones()
    page.goto(f"{app_url}/data?kind=flows")  # a link naming the kind of data: its Data step first
    main = page.get_by_test_id("stMain")
    click(page, main.get_by_text("Upload trips", exact=True))
    inputs = main.locator("input[type=file]")
    inputs.first.wait_for(state="attached")
    wait_idle(page)
    inputs.nth(0).set_input_files(files=[{"name": "taxi.csv", "mimeType": "text/csv",
                                          "buffer": trips.to_csv(index=False).encode()}])
    main.get_by_text("taxi.csv").first.wait_for()
    page.wait_for_timeout(2_000)  # the rerun that reads the trips, before the next upload
    wait_idle(page)
    inputs.nth(1).set_input_files(files=[{"name": "zones.csv", "mimeType": "text/csv",
                                          "buffer": zones.to_csv(index=False).encode()}])
    pick_option(page, main.get_by_test_id("stSelectbox").filter(has_text="Person id column"), "person")
    main.get_by_text(re.compile(r"one person with at most 1 trip")).first.wait_for()
    turn_on_series(page, "2020-04-01", "2020-04-30")
    pick_option(page, main.get_by_test_id("stSelectbox").filter(has_text="Period"), "week")
    main.get_by_text("5 periods, 2020-W14 to 2020-W18; unit: one person-week").first.wait_for()

    go_to(page, "Release")
    click(page, main.get_by_role("button", name=re.compile(r"^Release 5 periods — ρ = .* each$")))
    main.get_by_text(re.compile(r"^Released the series of 5 periods \(5 released\)")).wait_for(timeout=180_000)
    wait_for_map(page)
    main.get_by_role("slider").first.focus()
    page.keyboard.press("ArrowRight")
    main.get_by_text(re.compile(r"^2020-W15: [\d,]+ released rows, released")).wait_for()
    chart = main.locator(".js-plotly-plot").filter(has_text="noisy count per period with its 95 % interval")
    chart.first.wait_for()
    keep_screenshot(page, "series_taxi_week15.png", full_page=True)
