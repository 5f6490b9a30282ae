"""How long the first page of a fresh session takes to show, in a real (headless) browser.

Starts the app (``streamlit run app.py``) on a free local port and drives it with
Playwright + Debian's chromium.  Each run opens a fresh browser context (a new
Streamlit session, empty browser cache) and times, in the page's own clock from
navigation start (``performance.timeOrigin``):

- **title**: the page's heading ("Data") is visible;
- **content**: the first page's main content is visible: the heading, the
  dataset's row counts ("Rows read") and the "Preview" section, and the app
  shows no "Running..." status any more (the page script has finished);
- **map**: the preview map (the public extent, a MapLibre map) reports ``loaded()``.

Two kinds of run:

- **cold**: the first session of a freshly started server (the server imports the
  app's modules in that session's first script run); one per server start;
- **warm**: a fresh session of a server that already served one.

Every request the browser makes to a host other than the local server is
recorded: the app must work offline.

Run from the repository root::

    .venv/bin/python benchmarks/first_page.py            # 3 server starts, 3 warm sessions each
    .venv/bin/python benchmarks/first_page.py --starts 5

It prints a markdown table and writes benchmarks/results/first_page.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from map_draw import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, loadavg, streamlit_server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "first_page.md"
TARGET_S = 2.0
TIMEOUT_MS = 60_000

# Polled from navigation: notes the first time each milestone holds (ms since navigation start).
MILESTONES = """() => {
  const b = window.__fp || (window.__fp = {title: null, content: null, map: null});
  const now = performance.now();
  const main = document.querySelector('[data-testid="stMain"]');
  const visible = el => el && el.offsetParent !== null;
  const h1 = main && [...main.querySelectorAll('h1')].find(h => h.textContent.trim().startsWith('Data'));
  if (b.title === null && visible(h1)) b.title = now;
  if (b.content === null && b.title !== null) {
    const txt = main.innerText;
    const w = document.querySelector('[data-testid="stStatusWidget"]');
    const idle = !w || w.offsetParent === null;
    if (idle && txt.includes('Rows read') && txt.includes('Preview')) b.content = now;
  }
  if (b.map === null) {
    const g = main && main.querySelector('.js-plotly-plot');
    const m = g && g._fullLayout && g._fullLayout.map && g._fullLayout.map._subplot
              && g._fullLayout.map._subplot.map;
    if (m && m.loaded()) b.map = now;
  }
  return (b.title !== null && b.content !== null && b.map !== null) ? b : false;
}"""


def one_session(browser, base: str) -> dict:
    ctx = browser.new_context(viewport=VIEWPORT)
    outside: list[str] = []
    local = urlparse(base).netloc
    try:
        page = ctx.new_page()
        page.on("request", lambda r: outside.append(r.url) if urlparse(r.url).netloc not in (local, "")
                and not r.url.startswith(("data:", "blob:")) else None)
        page.goto(base, wait_until="commit")
        r = page.wait_for_function(MILESTONES, timeout=TIMEOUT_MS, polling=25).json_value()
        return {k: r[k] / 1000.0 for k in ("title", "content", "map")} | {"outside": outside}
    finally:
        ctx.close()


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=3, help="server starts (one cold session each)")
    ap.add_argument("--warm", type=int, default=3, help="warm sessions per server start")
    args = ap.parse_args()

    t_start = time.perf_counter()
    load_before = loadavg()
    cold: list[dict] = []
    warm: list[dict] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        chromium_version = browser.version
        try:
            for i in range(args.starts):
                with streamlit_server() as (base, _log):
                    r = one_session(browser, base)
                    cold.append(r)
                    print(f"start {i + 1} cold: title {r['title']:.2f} s, content {r['content']:.2f} s, "
                          f"map {r['map']:.2f} s", flush=True)
                    for _ in range(args.warm):
                        r = one_session(browser, base)
                        warm.append(r)
                        print(f"  warm: title {r['title']:.2f} s, content {r['content']:.2f} s, "
                              f"map {r['map']:.2f} s", flush=True)
        finally:
            browser.close()

    def row(label: str, rs: list[dict]) -> str:
        med = {k: statistics.median(r[k] for r in rs) for k in ("title", "content", "map")}
        worst = max(r["content"] for r in rs)
        return (f"| {label} | {len(rs)} | {med['title']:.2f} | {med['content']:.2f} | {worst:.2f} "
                f"| {med['map']:.2f} |")

    table = "\n".join([
        "| session | runs | heading visible, median (s) | main content visible, median (s) "
        "| main content, slowest (s) | preview map drawn, median (s) |",
        "|---|---:|---:|---:|---:|---:|",
        row("cold (first session after the server starts)", cold),
        row("warm (a new session of a running server)", warm),
    ])
    outside = sorted({u for r in cold + warm for u in r["outside"]})
    runs = "\n".join(
        f"- {kind}: " + "; ".join(f"{r['title']:.2f} / {r['content']:.2f} / {r['map']:.2f}" for r in rs)
        for kind, rs in (("cold", cold), ("warm", warm))
    )
    content_med = statistics.median(r["content"] for r in cold + warm)
    elapsed = time.perf_counter() - t_start
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    md = f"""# First page of a fresh session, in a browser

- Date: {datetime.date.today().isoformat()}
- Machine: {os.cpu_count()} cores ({cpu}), {platform.machine()}, {platform.system()}, Python \
{platform.python_version()}; headless Chromium {chromium_version} (Debian, `--disable-gpu`); streamlit \
{version('streamlit')}, plotly {version('plotly')}, playwright {version('playwright')}.
- Load average (1 / 5 / 15 min) before the run: {load_before}; after: {loadavg()} \
(other processes on the machine add noise).
- Each run is a fresh browser context (a new Streamlit session, empty browser cache) opening the app's \
root URL; times are in the page's clock from navigation start. "Main content visible": the Data page's \
heading, its row counts and its Preview section are shown and the app is no longer running the script. \
"Cold": the first session after `streamlit run` reports healthy (the server imports the app in that run); \
"warm": later sessions of the same server.
- Target: main content in at most {TARGET_S:.0f} s. Median over all runs: **{content_med:.2f} s**.
- Requests to hosts other than the local server: {', '.join(outside) if outside else '**none**'}.
- Command: `.venv/bin/python benchmarks/first_page.py --starts {args.starts} --warm {args.warm}` \
(total run time {elapsed:.0f} s)

{table}

Every run (heading / main content / map, s):

{runs}
"""
    print()
    print(table)
    print(f"outside requests: {outside or 'none'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(md, encoding="utf-8")
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
