"""The app with census blocks (issue 28 item 1, the app's part): the steps a curator clicks, driven headless.

Streamlit's AppTest runs ``app.py`` in this process: the kind "counts over areas", the upload of a
block table (``benchmarks/blocks_data.py``, Parquet), levels STATE / COUNTY / TRACT / BLOCK, the
table as the area list, Plan (the default, ``exact``), Release, the map by level (BLOCK) and the
narrowing down (a state, a county, a tract), Export, Release again.  Each step is one script run;
its seconds (server side, no browser), the process's resident size after it and the peak so far,
and the machine's load average are printed, then what reached the page (table rows, choices).

Run from the repository root (under ``nice`` on a shared machine)::

    nice -n 10 .venv/bin/python benchmarks/blocks_app.py /tmp/dpcore-blocks/blocks_8000000.parquet

The budget database is a fresh temporary file (``DPCORE_LEDGER_DB``).  Synthetic public data.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def memory() -> tuple[float, float]:
    """(resident GB now, peak resident GB so far) of this process, from /proc/self/status."""
    got = {}
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            k, v = line.split(":")
            got[k] = int(v.split()[0]) / 2**20
    return got.get("VmRSS", 0.0), got.get("VmHWM", 0.0)


def main() -> int:
    from streamlit.testing.v1 import AppTest

    from ui.state import release_widget_key

    path = Path(sys.argv[1])
    os.environ["DPCORE_LEDGER_DB"] = tempfile.mkdtemp() + "/ledger.sqlite"
    os.chdir(ROOT)
    steps: list[dict[str, Any]] = []

    def step(label: str, f: Any) -> Any:
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        r = f()
        rss, peak = memory()
        s = {"step": label, "seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
             "rss_gb": rss, "peak_gb": peak, "load": load}
        steps.append(s)
        print(f"{label:<16} {s['seconds']:7.1f} s  CPU {s['cpu_s']:6.1f} s  RSS {rss:5.2f} GB  peak {peak:5.2f} GB  "
              f"load {load:4.1f}", flush=True)
        if r is not None and r.exception:
            print(r.exception)
            raise SystemExit(1)
        return r

    at = step("start", lambda: AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800).run())
    step("kind", lambda: at.radio(key="_w_kind").set_value("areas").run())
    step("source", lambda: at.radio(key="_w_hier_source").set_value("upload").run())
    step("upload", lambda: at.file_uploader(key="hier_upload").set_value(
        (path.name, path.read_bytes(), "application/octet-stream")).run())
    step("levels", lambda: at.multiselect(key="w_levels").set_value(["STATE", "COUNTY", "TRACT", "BLOCK"]).run())
    step("area source", lambda: at.radio(key="_w_hier_area_source").set_value("table").run())
    print("areas per level", at.session_state["hier_model"]["h"].sizes)
    for box in at.status:  # the Data step's phases as the curator saw them, each with its seconds
        print(box.label, *(f"  {c.value}" for c in box.caption), sep="\n")
    step("plan", lambda: (at.switch_page("pages/plan.py"), at.run())[1])
    step("release page", lambda: (at.switch_page("pages/release.py"), at.run())[1])
    step("release click", lambda: at.button(key=release_widget_key("hier_release_button", at.session_state)).click().run())
    print("status shown", [x.label for x in at.status])
    step("release rerun", lambda: at.run())
    step("level BLOCK", lambda: at.selectbox(key="_w_hier_map_level").set_value("BLOCK").run())
    print("table rows", [len(d.value) for d in at.dataframe])
    step("drill state", lambda: at.selectbox(key="hier_drill_2").set_value(0).run())
    step("drill county", lambda: at.selectbox(key="hier_drill_3").set_value(at.selectbox(key="hier_drill_3").options[1]).run())
    step("drill tract", lambda: at.selectbox(key="hier_drill_4").set_value(at.selectbox(key="hier_drill_4").options[1]).run())
    print("table rows", [len(d.value) for d in at.dataframe], "largest choice", max(len(x.options) for x in at.selectbox))
    step("export", lambda: (at.switch_page("pages/export.py"), at.run())[1])
    step("release again", lambda: (at.switch_page("pages/release.py"), at.run())[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
