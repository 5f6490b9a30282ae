"""How long the Release step takes to draw a points release on its map, in a real (headless) browser.

Starts the app (``streamlit run app.py``) on a free local port, drives it with
Playwright + Debian's chromium, and for each case, in a fresh server (with a
budget database of its own, removed afterwards) and browser session:

1. optionally sets the grid on the Data step,
2. picks the mechanism on the Plan step,
3. opens the Release step and times, in the page's own clock, from the click on the
   Release button until the plotly map under it reports ``map.loaded()`` with the
   release drawn: the choropleth fill layer (polygons: trees) or every raster layer
   of the full-resolution image (grid densities) present.  The release itself, the
   confirmation and the map happen on that one page;
4. goes to the Plan step and back to the Release step, and times the redraw: from
   the click on "Release" in the sidebar until the map is drawn again (the release
   is made; only the page and its map are drawn).

It also records when the confirmation ("Released ...") and the chart element first
appear, so the draw time splits into "release + figure arrives" and "map draws", and
separately times the server-side figure build (``viz.release_map_figure`` +
``plotly.io.to_json``) in-process on the same demo data.  Every request the
browser makes to a host other than the local server is recorded (the maps must
draw offline).

Run from the repository root::

    .venv/bin/python benchmarks/map_draw.py               # 3 runs per case
    .venv/bin/python benchmarks/map_draw.py --repeats 2

It prints a markdown table and writes it to benchmarks/results/map_draw.md.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ui.workers import free_port  # noqa: E402 (standard library only at import)

RESULTS = ROOT / "benchmarks" / "results" / "map_draw.md"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1400, "height": 1000}
REPEATS = 3
DRAW_TIMEOUT_MS = 300_000
STEP_TIMEOUT_MS = 120_000

UG = "UG (uniform grid sized from the data volume)"
IDENTITY = "Identity (noise on every cell)"
HTF = "HTF (homogeneous tree)"

# (label, mechanism name, mechanism title, grid (rows, cols) or None for the default 1024x1024)
CASES = [
    ("UG, default 1024x1024 grid", "ug", UG, None),
    ("Identity, default 1024x1024 grid", "identity", IDENTITY, None),
    ("UG, 4096x4096 grid", "ug", UG, (4096, 4096)),
    ("Identity, 4096x4096 grid", "identity", IDENTITY, (4096, 4096)),
    ("HTF (tree, polygons), default 1024x1024 grid", "htf", HTF, None),
]
TARGET_S = 1.5

NAV = '[data-testid="stSidebarNav"] a'
MAP = ".st-key-release_map .js-plotly-plot"

# Installed before a timed click: remembers the click time (page clock) and, polled below, when the
# confirmation and the map's chart element first appear.
INSTALL_CLICK_CLOCK = """() => {
  window.__mapBench = {click: null, confirmed: null, chart: null};
  document.addEventListener('click', () => {
    if (window.__mapBench.click === null) window.__mapBench.click = performance.now();
  }, {capture: true, once: true});
}"""

# Polled until the release map has drawn (the chart of the map's key, not a stale one from before the click).
MAP_DRAWN = """(sel) => {
  const b = window.__mapBench;
  if (b.click === null) return false;
  const now = performance.now();
  if (b.confirmed === null && [...document.querySelectorAll('[data-testid="stAlert"]')]
      .some(a => a.innerText.includes('Released '))) b.confirmed = now;
  const g = document.querySelector(sel);
  if (!g || !g.data || !g.data[0] || !['choroplethmap', 'scattermap'].includes(g.data[0].type)) return false;
  if (b.chart === null) b.chart = now;
  const fl = g._fullLayout, fd = g._fullData;
  if (!fl || !fl.map || !fl.map._subplot || !fl.map._subplot.map || !fd || !fd[0]) return false;
  const m = fl.map._subplot.map;
  const images = ((g.layout && g.layout.map && g.layout.map.layers) || [])
    .filter(l => l.sourcetype === 'image').length;
  if (images === 0 && !m.getLayer('plotly-trace-layer-' + fd[0].uid + '-fill')) return false;
  const style = m.isStyleLoaded() ? m.getStyle() : null;
  if (!style) return false;
  const rasters = style.layers.filter(l => l.type === 'raster').length;
  if (rasters < images) return false;
  if (!m.loaded()) return false;
  return {click: b.click, confirmed: b.confirmed === null ? now : b.confirmed, chart: b.chart, done: now,
          polygons: images ? 0 : fd[0]._length, images: images, hover: fd[0]._length};
}"""


@contextlib.contextmanager
def streamlit_server(launcher: list[str] | None = None, env_extra: dict[str, str] | None = None,
                     started: list[subprocess.Popen] | None = None, workers: int = 1):
    """The app's server on a free port with a budget database of its own, started as ``./run`` starts it
    (``python -m ui.serve app.py``); yields (base URL, log path).  ``launcher``: another command before
    ``run app.py`` (``streamlit run`` without the freeze of ui.serve, or a profiling wrapper); ``env_extra``:
    more environment; ``started``: the server's process is appended to it (benchmarks/step_cpu.py);
    ``workers``: ``./run --workers N`` (N servers behind ui/front.py's front)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="map_draw_streamlit_", suffix=".log", delete=False)
    cmd = [*([*launcher, "run"] if launcher else [sys.executable, "-m", "ui.serve"]), "app.py", "--server.headless=true",
           f"--server.port={port}", "--server.address=127.0.0.1",
           "--browser.gatherUsageStats=false", "--server.fileWatcherType=none",
           *([f"--workers={workers}"] if not launcher else [])]  # stated: a $DPCORE_WORKERS of the shell is not used
    # a budget database of its own: the demo's budget is kept across sessions, and the user's is not touched
    db_dir = tempfile.TemporaryDirectory(prefix="map_draw_ledger_")
    env = dict(os.environ, DPCORE_LEDGER_DB=os.path.join(db_dir.name, "ledger.sqlite"), **(env_extra or {}))
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    if started is not None:
        started.append(proc)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read()}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not become healthy; log: {log.name}")
            time.sleep(0.3)
        yield base, log.name
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        db_dir.cleanup()


def wait_idle(page, timeout_ms: int = STEP_TIMEOUT_MS) -> None:
    """Wait until the app shows no 'Running...' status widget."""
    page.wait_for_function(
        "() => { const w = document.querySelector('[data-testid=\"stStatusWidget\"]');"
        " return !w || w.offsetParent === null; }",
        timeout=timeout_ms, polling=100,
    )


def nav(page, label: str) -> None:
    page.locator(NAV, has_text=label).first.click()


def set_grid(page, rows: int, cols: int) -> None:
    for label, value in (("Grid rows (north–south)", rows), ("Grid columns (west–east)", cols)):
        box = page.locator(f'input[aria-label="{label}"]')
        box.fill(str(value))
        box.press("Enter")
        wait_idle(page)
    # the caption under the grid inputs confirms the new grid
    page.get_by_text(f"{rows * cols:,} cells of about").wait_for(timeout=STEP_TIMEOUT_MS)
    wait_idle(page)


def choose_mechanism(page, title: str) -> None:
    box = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Mechanism", exact=True))
    box.wait_for(timeout=STEP_TIMEOUT_MS)
    box.click()
    page.get_by_role("option", name=re.compile("^" + re.escape(title) + " — ")).click()
    # the page reruns; wait until the selectbox shows the choice (the input's value)
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-testid=\"stSelectbox\"] input')]"
        ".some(i => i.value.startsWith(t + ' — '))",
        arg=title, timeout=STEP_TIMEOUT_MS, polling=100,
    )
    wait_idle(page)


def timed_draw(page) -> dict:
    """Wait for the map after a click made by the caller (the click clock is installed)."""
    r = page.wait_for_function(MAP_DRAWN, arg=MAP, timeout=DRAW_TIMEOUT_MS, polling=50).json_value()
    return {"draw": (r["done"] - r["click"]) / 1000.0, "confirmed": (r["confirmed"] - r["click"]) / 1000.0,
            "arrive": (r["chart"] - r["click"]) / 1000.0, "polygons": int(r["polygons"]),
            "images": int(r["images"]), "hover": int(r["hover"])}


def run_case(browser, base: str, mech_title: str, grid: tuple[int, int] | None) -> dict:
    ctx = browser.new_context(viewport=VIEWPORT)  # new context = new Streamlit session
    outside: list[str] = []
    local = urlparse(base).netloc
    try:
        page = ctx.new_page()
        page.on("request", lambda r: outside.append(r.url) if urlparse(r.url).netloc not in (local, "")
                and not r.url.startswith(("data:", "blob:")) else None)
        page.goto(base)
        page.get_by_text("Preview", exact=True).wait_for(timeout=STEP_TIMEOUT_MS)
        wait_idle(page)
        if grid is not None:
            set_grid(page, *grid)
        for attempt in range(3):
            nav(page, "Plan")
            choose_mechanism(page, mech_title)
            nav(page, "Release")
            button = page.get_by_role("button", name="Release with").first
            button.wait_for(timeout=STEP_TIMEOUT_MS)
            wait_idle(page)
            # the step names the planned mechanism: a choice the server never received (Streamlit merges a
            # widget's change with a page change sent before it took the change, and keeps the page's
            # widgets only) is made again, not released as the previous mechanism
            if page.get_by_test_id("stMain").get_by_text(f"{mech_title} with ", exact=False).count():
                break
            print(f"  the Plan step's choice of {mech_title} did not reach the server (try {attempt + 1})", flush=True)

        # 1. the Release button: release, confirmation and map on the same page
        page.evaluate(INSTALL_CLICK_CLOCK)
        button.click()
        first = timed_draw(page)
        cap = page.get_by_text(re.compile("released areas|areas at depth")).first.inner_text(timeout=STEP_TIMEOUT_MS)
        if mech_title not in cap:
            raise RuntimeError(f"map shows the wrong release: {cap!r}")
        wait_idle(page)  # the errors below the map are computed too

        # 2. back to the Plan step and to the Release step again: the map only
        nav(page, "Plan")
        page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Mechanism", exact=True)).wait_for(
            timeout=STEP_TIMEOUT_MS)
        page.wait_for_function("s => !document.querySelector(s)", arg=MAP, timeout=STEP_TIMEOUT_MS)
        wait_idle(page)
        page.evaluate(INSTALL_CLICK_CLOCK)
        nav(page, "Release")
        again = timed_draw(page)
        wait_idle(page)
        return first | {"redraw": again["draw"], "redraw_arrive": again["arrive"], "caption": cap,
                        "outside": outside}
    finally:
        ctx.close()


def leaves_from_caption(cap: str) -> int:
    # "<title>, ε = 0.5: 4,761 released areas[, drawn ...]"
    head = re.split(" released areas| areas at depth", cap)[0]
    return int(head.rsplit(" ", 1)[-1].replace(",", ""))


def server_figure_times(cases, repeats: int = REPEATS) -> dict[str, tuple[float, float, tuple[int, int] | None]]:
    """In-process: build the app's map figure and serialise it as st.plotly_chart does (best of 3)."""
    import plotly.io

    from dpcore import catalog, pipeline
    from dpcore.data import synthetic
    from dpcore.data.domain import Grid, aggregate_points
    from dpcore.points import viz
    from dpcore.points.unit import points_unit
    from dpcore.privacy import budget
    from dpcore.privacy.ledger import Ledger

    df = synthetic.demo_points()
    out = {}
    for label, mech, _title, grid in cases:
        rows, cols = grid or (1024, 1024)
        g = Grid(synthetic.DEMO_BOUNDS, rows, cols)
        agg = aggregate_points(df["lon"].to_numpy(), df["lat"].to_numpy(), g)
        plan = catalog.get("points", mech).plan(agg.grid, 0.5, None, unit=points_unit(agg.user_cap))
        rel = pipeline.release(plan, agg, ledger=Ledger(budget.pure(100.0))).inner
        best, size = float("inf"), 0
        for _ in range(repeats):
            t0 = time.perf_counter()
            fig, info = viz.release_map_figure(rel)
            spec = plotly.io.to_json(fig, validate=False)
            best = min(best, time.perf_counter() - t0)
            size = len(spec)
        out[label] = (best, size, info.get("image_shape"))
    return out


def loadavg() -> str:
    try:
        return " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def main() -> None:
    import argparse

    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=REPEATS, help="runs per case (default %(default)s)")
    ap.add_argument("--only", default=None, help="only the cases whose label contains this text")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write the results file")
    args = ap.parse_args()
    cases = [c for c in CASES if args.only is None or args.only.lower() in c[0].lower()]

    t_start = time.perf_counter()
    load_before = loadavg()
    results: dict[str, list[dict]] = {label: [] for label, *_ in cases}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        chromium_version = browser.version
        try:
            for label, _mech, title, grid in cases:
                for i in range(args.repeats):
                    # a server (and budget database) per run: the demo's default cap allows two releases
                    with streamlit_server() as (base, _log):
                        r = run_case(browser, base, title, grid)
                    results[label].append(r)
                    print(f"{label} run {i + 1}: release click → drawn {r['draw']:.2f} s (confirmation "
                          f"{r['confirmed']:.2f} s, chart {r['arrive']:.2f} s); revisit → drawn {r['redraw']:.2f} s "
                          f"(chart {r['redraw_arrive']:.2f} s); {r['polygons']:,} polygons, {r['images']} image "
                          f"strips, {r['hover']:,} hover points; load {loadavg()}", flush=True)
        finally:
            browser.close()

    server = server_figure_times(cases, args.repeats)

    def med(rs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    header = ("| case | released areas | drawn as | hover points | Release click → map drawn, median (min) (s) "
              "| confirmation shown, median (s) | chart in page, median (s) | revisit → map drawn, median (min) (s) "
              "| server figure build + JSON (s) | figure JSON (MB) |")
    lines = [header, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, *_ in cases:
        rs = results[label]
        polys = {r["polygons"] for r in rs}
        leaves = {leaves_from_caption(r["caption"]) for r in rs}
        shape = server[label][2] or dict((c[0], c[3]) for c in cases)[label] or (1024, 1024)
        drawn = (f"image {shape[0]:,} × {shape[1]:,} px ({max(r['images'] for r in rs)} strips)"
                 if any(r["images"] for r in rs) else
                 f"{'/'.join(f'{n:,}' for n in sorted(polys))} polygons")
        hover = "/".join(f"{n:,}" for n in sorted({r["hover"] for r in rs}))
        sb, size, _shape = server[label]
        lines.append(
            f"| {label} | {'/'.join(f'{n:,}' for n in sorted(leaves))} | {drawn} | {hover} "
            f"| {med(rs, 'draw'):.2f} ({min(r['draw'] for r in rs):.2f}) | {med(rs, 'confirmed'):.2f} "
            f"| {med(rs, 'arrive'):.2f} | {med(rs, 'redraw'):.2f} ({min(r['redraw'] for r in rs):.2f}) "
            f"| {sb:.2f} | {size / 1e6:.1f} |"
        )
    table = "\n".join(lines)
    runs = "\n".join(
        f"- {label}: Release click → drawn " + ", ".join(f"{r['draw']:.2f}" for r in results[label])
        + " s (confirmation " + ", ".join(f"{r['confirmed']:.2f}" for r in results[label])
        + "; chart " + ", ".join(f"{r['arrive']:.2f}" for r in results[label])
        + "); revisit → drawn " + ", ".join(f"{r['redraw']:.2f}" for r in results[label])
        + " s (chart " + ", ".join(f"{r['redraw_arrive']:.2f}" for r in results[label]) + ")"
        for label, *_ in cases
    )
    outside = sorted({u for rs in results.values() for r in rs for u in r["outside"]})
    elapsed = time.perf_counter() - t_start
    load_after = loadavg()

    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    cmd = "python benchmarks/map_draw.py" + "".join(f" {a}" for a in sys.argv[1:])
    md = f"""# Release step: click to drawn map, in a browser

- Date: {datetime.date.today().isoformat()}
- Machine: {os.cpu_count()} cores ({cpu}), {platform.machine()}, {platform.system()}, Python {platform.python_version()}; \
headless Chromium {chromium_version} (Debian, `--disable-gpu`), so WebGL is software-rendered by SwiftShader; \
streamlit {version('streamlit')}, plotly {version('plotly')}, playwright {version('playwright')}.
- Load average (1 / 5 / 15 min) before the run: {load_before}; after: {load_after} \
(other processes share the 2 cores and add noise; rerun on an idle machine for cleaner numbers).
- Data: the demo dataset (100,000 synthetic points over New York City), ε = 0.5 (the Plan step's default), \
viewport 1400x1000.
- **Release click → map drawn**: from the click on the Release button of the Release step (the release is \
made, charged and stored, the page shows the confirmation and draws the map under it) until the plotly map \
reports `map.loaded()` with the release drawn (the choropleth layer for polygons, every raster layer for an \
image), in the page's clock (polled every 50 ms). "Confirmation shown" and "chart in page" are the moments \
the "Released ..." message and the map's chart element appear, from the same click. Target: at most \
{TARGET_S} s.
- **Revisit → map drawn**: after the release, a click on "Plan" and then on "Release" in the sidebar; from that \
second click until the map is drawn again (nothing is released; the figure is kept with the release).
- Each run is a fresh server (with its own temporary budget database, removed afterwards) and browser session; \
{args.repeats} runs per case.
- "Server figure build + JSON": `viz.release_map_figure` plus `plotly.io.to_json` (what `st.plotly_chart` sends), \
timed in-process on the same data, best of {args.repeats}. Grid densities (a lattice of released cells, or \
more than 10,000 areas) are drawn as an image layer with one pixel per grid cell; trees and other partitions \
of at most 10,000 areas as polygons.
- Requests to hosts other than the local server: {', '.join(outside) if outside else '**none**'}.
- Command: `{cmd}` (total run time {elapsed:.0f} s)

{table}

Every run, in order:

{runs}
"""
    print()
    print(table)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(md, encoding="utf-8")
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
