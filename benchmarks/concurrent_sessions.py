"""Ten browser sessions at once against one app server: each step's time against a single session's.

Issue 28 item 5: "With 10 browser sessions at once ... each step's median within 2x of a single
session's, and no lost click."  One server (``streamlit run app.py``, a budget database of its own),
one headless Chromium, one browser context per session (a Streamlit session each, empty cache);
every session walks the path on the demo points (100,000 synthetic points over New York City):

- **data**: open the app's root URL until the Data step's main content is shown (heading, "Rows
  read", "Preview") and the app has stopped running;
- **plan**: click "Plan" in the sidebar until the Plan step's heading and mechanism are shown, idle;
- **release page**: click "Release" in the sidebar until the Release button is shown, idle;
- **release**: click the Release button until the confirmation ("Released ...") is shown and the map
  reports ``loaded()``.

Times are wall-clock seconds from the click (or navigation) in this process.  A click after which
nothing happens within :data:`LOST_AFTER_S` seconds (neither the next step's heading or the
confirmation, nor the app running), after which the app ran and stopped without showing them, or
that cannot be made in that time (the sidebar's link stays disabled), is counted as **lost** and made
again (the step's time runs on from the first click); the results say why each was counted
(:data:`REASONS`: not made, no run in 20 s, a run that ended without the answer).  The single-session baseline walks the same path alone (``--single`` times, one after another); then
``--sessions`` sessions walk it at once (``--rounds`` times).

``--mode``: on a 2-core machine ten headless browsers take the cores the server needs (each fresh
page costs its browser several CPU-seconds), so the default ``browsers`` mode measures the machine
more than the server.  ``protocol`` puts every session on the server through Streamlit's own
websocket protocol without a browser (benchmarks/session_protocol.py: the server's side of each
step); ``mixed`` measures one real browser while the nine other sessions are protocol sessions, as
if the other users' browsers ran on their own machines.

``--workers N`` serves the app as ``./run --workers N`` does: N app servers behind ui/front.py's sticky
front (each warmed by one walk before the baseline); the baseline walks that same front alone
(benchmarks/results/concurrent_sessions_workers.md).

Run from the repository root (after ``python -m compileall dpcore ui``)::

    nice -n 10 .venv/bin/python benchmarks/concurrent_sessions.py --sessions 10 --single 3 --rounds 1

It prints a markdown table and writes benchmarks/results/concurrent_sessions.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import re
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session_protocol  # noqa: E402
from map_draw import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, loadavg, streamlit_server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "concurrent_sessions.md"
STEPS = ("data", "plan", "release page", "release")
LOST_AFTER_S = 20.0
#: why the clicks counted as lost were: "not made" (Playwright could not click in LOST_AFTER_S: the
#: element stayed disabled, covered or detached), "no run in 20 s", "run ended without it"
REASONS: dict[str, int] = {}
STEP_TIMEOUT_S = 300.0
NAV = '[data-testid="stSidebarNav"] a'
IDLE = ("() => { const w = document.querySelector('[data-testid=\"stStatusWidget\"]');"
        " return !w || w.offsetParent === null; }")
DATA_SHOWN = ("() => { const m = document.querySelector('[data-testid=\"stMain\"]'); const t = m ? m.innerText : '';"
              " return t.includes('Rows read') && t.includes('Preview'); }")
MAP_LOADED = ("() => [...document.querySelectorAll('.js-plotly-plot')].some(g => { const m = g._fullLayout"
              " && g._fullLayout.map && g._fullLayout.map._subplot && g._fullLayout.map._subplot.map;"
              " return !!(m && m.loaded()); })")


async def _until(page, js: str, timeout_s: float) -> bool:
    try:
        await page.wait_for_function(js, timeout=timeout_s * 1000, polling=50)
        return True
    except Exception:  # noqa: BLE001 - a timeout: the caller decides
        return False


async def _click_until(page, click, shown: str, lost: list[int]) -> float:
    """Click, wait until ``shown`` holds (then until idle); a click without effect in LOST_AFTER_S is
    counted in ``lost`` and made again.  Returns the seconds from the first click."""
    t0 = time.perf_counter()
    while True:
        made = await _try(click)
        why = (await _answered(page, shown)) if made else "not made"
        if why is True:
            break
        if time.perf_counter() - t0 > STEP_TIMEOUT_S:
            raise TimeoutError(f"step not shown in {STEP_TIMEOUT_S:.0f} s: {shown[:80]}")
        lost[0] += 1
        REASONS[why] = REASONS.get(why, 0) + 1
    await _until(page, IDLE, STEP_TIMEOUT_S)
    return time.perf_counter() - t0


async def _answered(page, shown: str) -> bool | str:
    """Whether a click was answered: ``shown`` holds, or the app starts running within LOST_AFTER_S
    and ``shown`` holds once it stops (a slow answer is not a lost click; a run that ends without it,
    or no run at all, is).  Not answered: why, for :data:`REASONS` ("no run in 20 s": neither shown
    nor running within LOST_AFTER_S; "run ended without it": the app ran and stopped without it)."""
    running = ("() => { const w = document.querySelector('[data-testid=\"stStatusWidget\"]');"
               " return !!w && w.offsetParent !== null; }")
    either = f"() => ({shown})() || ({running})()"
    if not await _until(page, either, LOST_AFTER_S):
        return f"no run in {LOST_AFTER_S:.0f} s"
    await _until(page, IDLE, STEP_TIMEOUT_S)  # the run the click started has ended
    if not await page.evaluate(shown):
        await _until(page, shown, 2.0)  # drawn just after the run
    return True if await page.evaluate(shown) else "run ended without it"


async def _try(click) -> bool:
    """Make a click; False when it could not be made in LOST_AFTER_S (the link stayed disabled)."""
    try:
        await click()
        return True
    except Exception:  # noqa: BLE001 - Playwright's timeout: counted as a lost click by the caller
        return False


def _heading(name: str) -> str:
    return ("() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
            f" return !!m && [...m.querySelectorAll('h1')].some(h => h.textContent.trim().startsWith('{name}')); }}")


async def walk(browser, base: str) -> dict:
    """One session's walk Data -> Plan -> Release -> the Release button; seconds per step, lost clicks."""
    ctx = await browser.new_context(viewport=VIEWPORT)
    lost = [0]
    try:
        page = await ctx.new_page()
        out: dict = {}
        t0 = time.perf_counter()
        await page.goto(base, wait_until="commit")
        if not await _until(page, DATA_SHOWN, STEP_TIMEOUT_S):
            raise TimeoutError("the Data step was not shown")
        await _until(page, IDLE, STEP_TIMEOUT_S)
        out["data"] = time.perf_counter() - t0
        out["plan"] = await _click_until(page, lambda: page.locator(NAV, has_text="Plan").first.click(timeout=LOST_AFTER_S * 1000),
                                         _heading("Plan"), lost)
        released_button = ("() => [...document.querySelectorAll('[data-testid=\"stMain\"] button')]"
                           ".some(b => b.innerText.startsWith('Release with'))")
        out["release page"] = await _click_until(
            page, lambda: page.locator(NAV, has_text="Release").first.click(timeout=LOST_AFTER_S * 1000), released_button, lost)
        button = page.get_by_test_id("stMain").get_by_role("button", name=re.compile("^Release with")).first
        confirmed = ("() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
                     " return !!m && m.innerText.includes('Released '); }")
        t_click = time.perf_counter()
        out["release"] = await _click_until(page, lambda: button.click(timeout=LOST_AFTER_S * 1000), confirmed, lost)
        await _until(page, MAP_LOADED, STEP_TIMEOUT_S)
        out["release drawn"] = time.perf_counter() - t_click
        out["lost"] = lost[0]
        return out
    finally:
        await ctx.close()


async def _protocol_walk(base: str) -> dict:
    """A session without a browser (benchmarks/session_protocol.py): the server's side of each step."""
    try:
        out = await asyncio.wait_for(session_protocol.walk(base), STEP_TIMEOUT_S)
    except (TimeoutError, StopIteration, KeyError) as e:
        return {"failed": f"protocol session: {type(e).__name__} {e}"}
    return out | {"release drawn": float("nan"), "lost": 0, "protocol": True}


async def run(sessions: int, single: int, rounds: int, mode: str = "browsers",
              workers: int = 1) -> tuple[list[dict], list[dict], str]:
    """``mode``: "browsers" (every session a browser), "protocol" (every session a protocol session: the
    server's side only), "mixed" (one browser measured while the other sessions are protocol sessions:
    the browser's steps as a user sees them, with the other users' browsers on their own machines)."""
    from playwright.async_api import async_playwright

    alone: list[dict] = []
    together: list[dict] = []

    async def safe(browser, base: str, i: int = 0) -> dict:
        if mode == "protocol" or (mode == "mixed" and i > 0):
            return await _protocol_walk(base)
        try:
            return await walk(browser, base)
        except TimeoutError as e:  # recorded, not fatal: a step that never came is a result too
            return {"failed": str(e)}

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        chromium = browser.version
        try:
            with streamlit_server(workers=workers) as (base, _log):
                await walk(browser, base)  # the server's first session imports the app: not counted
                if workers > 1:  # and every other server's: one walk each at once (the front spreads them)
                    await asyncio.gather(*[_protocol_walk(base) for _ in range(workers)])
                for i in range(single):
                    alone.append(await (_protocol_walk(base) if mode == "protocol" else walk(browser, base)))
                    print(f"single {i + 1}: " + _line(alone[-1]), flush=True)
                for r in range(rounds):
                    got = await asyncio.gather(*[safe(browser, base, i) for i in range(sessions)])
                    together += got
                    for g in got:
                        print(f"round {r + 1}: " + _line(g), flush=True)
        finally:
            await browser.close()
    return alone, together, chromium


def _line(r: dict) -> str:
    if "failed" in r:
        return f"did not finish: {r['failed']}"
    who = "protocol session: " if r.get("protocol") else ""
    steps = STEPS if r.get("protocol") else (*STEPS, "release drawn")
    return who + ", ".join(f"{k} {r[k]:.2f} s" for k in steps) + f", lost clicks {r['lost']}"


def _reasons() -> str:
    return "; ".join(f"{k}: {v}" for k, v in sorted(REASONS.items())) or "none"


def _cpu() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--single", type=int, default=3, help="single-session walks (the baseline)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of --sessions walks at once")
    ap.add_argument("--note", default="", help="a line about the machine's state, for the results file")
    ap.add_argument("--mode", choices=("browsers", "protocol", "mixed"), default="browsers",
                    help="browsers: every session a browser; protocol: every session a browserless protocol "
                         "session (the server's side of each step); mixed: one browser measured, the other "
                         "sessions protocol sessions")
    ap.add_argument("--workers", type=int, default=1, help="app servers behind the front (./run --workers N)")
    ap.add_argument("--out", default=str(RESULTS), help="the results file")
    a = ap.parse_args()
    t_start, load_before = time.perf_counter(), loadavg()
    alone, together, chromium = asyncio.run(run(a.sessions, a.single, a.rounds, a.mode, a.workers))
    rows = []
    # the medians are over the measured kind of session: protocol ones in "protocol", browsers otherwise
    done = [r for r in together if "failed" not in r and bool(r.get("protocol")) == (a.mode == "protocol")]
    for s in (*STEPS, "release drawn") if a.mode != "protocol" else STEPS:
        m1 = statistics.median(r[s] for r in alone)
        mn = statistics.median(r[s] for r in done) if done else float("nan")
        worst = max((r[s] for r in done), default=float("nan"))
        rows.append(f"| {s} | {m1:.2f} | {mn:.2f} | {worst:.2f} | {mn / m1:.1f}x |")
    lost = sum(r["lost"] for r in done)
    failed = sum("failed" in r for r in together)
    table = "\n".join(["| step | single session, median (s) | "
                       f"{a.sessions} sessions at once, median (s) | {a.sessions} at once, slowest (s) | ratio |",
                       "|---|---:|---:|---:|---:|", *rows])
    served = "one server" if a.workers == 1 else f"{a.workers} servers behind one front (`./run --workers {a.workers}`)"
    md = f"""# {a.sessions} browser sessions at once against {served}

- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M')} UTC
- Machine: {os.cpu_count()} cores ({_cpu()}), Python {platform.python_version()}; headless Chromium {chromium} \
(`--disable-gpu`); streamlit {version('streamlit')}, playwright {version('playwright')}. Bytecode compiled.
- Load average (1 / 5 / 15 min) before: {load_before}; after: {loadavg()}. {a.note}
- Path: the demo points, Data → Plan → Release → the Release button (see the script's docstring for what \
each step waits for). Times are wall-clock seconds from the click. "release drawn": from the click on \
the Release button until the map reports loaded().
- Target (issue 28 item 5): each step's median at most 2x a single session's, no lost click. \
Lost clicks (no effect within {LOST_AFTER_S:.0f} s, clicked again): **{lost}** of \
{len(done) * 3} clicks of the walks that finished (why, every walk: {_reasons()}); walks that did not finish (a \
step not shown in {STEP_TIMEOUT_S:.0f} s): **{failed}** of {len(together)} (not in the medians).
- Mode: **{a.mode}** (see `--mode`); the medians are over the {'protocol' if a.mode == 'protocol' else 'browser'} \
sessions.
- Command: `python benchmarks/concurrent_sessions.py --mode {a.mode} --sessions {a.sessions} --single {a.single} \
--rounds {a.rounds}{f' --workers {a.workers}' if a.workers > 1 else ''}` (total run time {time.perf_counter() - t_start:.0f} s)

{table}

Every walk:

""" + "\n".join(f"- single: {_line(r)}" for r in alone) + "\n" + \
        "\n".join(f"- together: {_line(r)}" for r in together) + "\n"
    print(table)
    Path(a.out).write_text(md, encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
