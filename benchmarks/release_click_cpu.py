"""Server side of the points Release click, by phase, in CPU seconds (AppTest, no browser).

A loaded machine stretches wall-clock times several fold; the CPU time the server spends on the
click's run moves much less.  For each case, in a new AppTest session of ``app.py`` (the demo
points, ε = 0.5, a budget database of its own) it clicks the Release button and reports the
process CPU time and wall time of:

* the click's callback (charge, release, what is made before anything is shown);
* from the callback's end until the map's element is sent (the page up to ``st.plotly_chart``);
* from the map until the run ends (what runs while the browser draws: the release's files, the
  curator's errors, the interval section, the sidebar);
* a revisit of the step (Plan, then Release again: nothing is released).

Run from the repository root::

    python benchmarks/release_click_cpu.py                 # UG at 1,024² and 4,096², 2 runs each
    python benchmarks/release_click_cpu.py --grid 4096 --mechanism ug --repeats 3

It prints one line per run (nothing is written).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def run(grid: int, mechanism: str) -> dict[str, tuple[float, float]]:
    """One session: the Release click and a revisit; phase -> (wall, cpu) seconds."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from ui import state
    from ui.kinds.points import release as points_release

    marks: dict[str, tuple[float, float]] = {}
    real_now, real_chart = points_release.release_now, st.plotly_chart

    def release_now(*a, **k):
        out = real_now(*a, **k)
        marks.setdefault("callback", _clock())
        return out

    def chart(*a, **k):
        out = real_chart(*a, **k)
        if k.get("key") == "release_map":
            marks.setdefault("map", _clock())
        return out

    points_release.release_now, points_release.st.plotly_chart = release_now, chart
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.session_state["kind"] = at.session_state["_w_kind"] = "points"
        at.session_state["grid_shape"] = (grid, grid)
        at.session_state["mechanism"] = mechanism
        at.run()
        at.switch_page("pages/release.py").run()
        start = _clock()
        at.button(key=state.release_widget_key("release_button", at.session_state)).click().run()
        end = _clock()
        if at.exception or not at.success:
            raise RuntimeError(f"the release failed: {at.exception}")
        at.switch_page("pages/plan.py").run()
        again = _clock()
        at.switch_page("pages/release.py").run()
        again_end = _clock()
    finally:
        points_release.release_now, points_release.st.plotly_chart = real_now, real_chart

    def span(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
        return b[0] - a[0], b[1] - a[1]

    cb, mp = marks.get("callback", start), marks.get("map", end)
    return {"callback": span(start, cb), "to map": span(cb, mp), "click to map": span(start, mp),
            "after map": span(mp, end), "revisit": span(again, again_end)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", type=int, action="append", help="grid side (repeatable; default 1024 and 4096)")
    ap.add_argument("--mechanism", default="ug", help="points mechanism (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per grid (default %(default)s)")
    args = ap.parse_args()
    os.environ["DPCORE_LEDGER_DB"] = os.path.join(tempfile.mkdtemp(prefix="release_click_cpu_"), "ledger.sqlite")
    logging.disable(logging.WARNING)
    for grid in args.grid or [1024, 4096]:
        for i in range(args.repeats):
            r = run(grid, args.mechanism)
            load = " / ".join(Path("/proc/loadavg").read_text().split()[:3])
            print(f"{args.mechanism} {grid}² run {i + 1}: " + "; ".join(
                f"{k} {cpu:.3f} s CPU ({wall:.3f} s wall)" for k, (wall, cpu) in r.items()) + f"; load {load}", flush=True)


if __name__ == "__main__":
    main()
