"""Where the browser's time goes between the Release click and the drawn map (issue 28 item 5).

Runs one case of ``benchmarks/map_draw.py`` (a fresh server and browser session) with a Chromium
performance trace (CDP, through Playwright) around the Release click, and prints, from the click to
``map.loaded()``: the renderer main thread's busy time by kind of event (script, style and layout,
paint, image decoding, ...), the JavaScript self time by function and script (the V8 sampling
profiler), and the busiest threads of every process (the GPU process's software WebGL included).

Run from the repository root::

    python benchmarks/map_draw_trace.py --only "UG, 4096"
    python benchmarks/map_draw_trace.py --only "UG, 4096" --trace /tmp/ug.json   # keep the trace

The trace can be opened in Chromium's DevTools (Performance panel, "Load profile").
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import map_draw as md  # noqa: E402

CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink",
              "disabled-by-default-v8.cpu_profiler", "toplevel", "gpu", "cc", "viz", "loading",
              "disabled-by-default-devtools.timeline.frame", "blink.user_timing"]

# renderer main-thread events, by kind (the rest of a task's time is "other")
KINDS = {
    "script": ("FunctionCall", "EvaluateScript", "v8.compile", "v8.run", "TimerFire", "FireAnimationFrame",
               "EventDispatch", "RunMicrotasks", "v8.evaluateModule", "V8.GCScavenger", "MajorGC", "MinorGC"),
    "style+layout": ("UpdateLayoutTree", "Layout", "RecalculateStyles", "UpdateLayerTree", "PrePaint"),
    "paint": ("Paint", "PaintImage", "Commit", "Layerize", "CompositeLayers"),
    "decode": ("Decode Image", "ImageDecodeTask", "Decode LazyPixelRef"),
}


def thread_names(events: list[dict]) -> dict[tuple[int, int], str]:
    names = {}
    procs = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
    return {k: f"{procs.get(k[0], k[0])}/{v}" for k, v in names.items()}


def busy_by_thread(events: list[dict], t0: float, t1: float, names: dict) -> list[tuple[str, float]]:
    """Wall time inside top-level tasks (ThreadControllerImpl::RunTask and the like) per thread."""
    busy: dict[str, float] = collections.Counter()
    for e in events:
        if e.get("ph") != "X" or e.get("name") not in ("ThreadControllerImpl::RunTask", "ThreadPool_RunTask"):
            continue
        s, d = e["ts"], e.get("dur", 0)
        lo, hi = max(s, t0), min(s + d, t1)
        if hi > lo:
            busy[names.get((e["pid"], e["tid"]), f"{e['pid']}/{e['tid']}")] += (hi - lo) / 1e6
    return sorted(busy.items(), key=lambda kv: -kv[1])


def main_thread_kinds(events: list[dict], main: tuple[int, int], t0: float, t1: float) -> dict[str, float]:
    out: dict[str, float] = collections.Counter()
    depth_spans: list[tuple[float, float, str]] = []
    for e in events:
        if (e["pid"], e["tid"]) != main or e.get("ph") != "X":
            continue
        for kind, names in KINDS.items():
            if e["name"] in names:
                depth_spans.append((e["ts"], e["ts"] + e.get("dur", 0), kind))
    depth_spans.sort()
    # count each kind's outermost spans only (a FunctionCall inside a TimerFire is counted once)
    ends: dict[str, float] = {}
    for s, f, kind in depth_spans:
        if s < ends.get(kind, -1):
            continue
        ends[kind] = f
        lo, hi = max(s, t0), min(f, t1)
        if hi > lo:
            out[kind] += (hi - lo) / 1e6
    return out


def js_profile(events: list[dict], main: tuple[int, int], t0: float, t1: float) -> list[tuple[str, float]]:
    """Self time by function from the V8 sampling profiler's ProfileChunk events (main thread)."""
    nodes: dict[int, dict] = {}
    samples: list[tuple[float, int]] = []
    prof = next((e for e in events if e.get("name") == "Profile" and (e.get("pid"), e.get("tid")) == main), None)
    if prof is None:
        return []
    start = prof["args"]["data"]["startTime"]
    for e in events:
        if e.get("name") != "ProfileChunk" or e.get("pid") != main[0] or e.get("id") != prof.get("id"):
            continue
        data = e["args"]["data"]
        cp = data.get("cpuProfile", {})
        for n in cp.get("nodes", []):
            nodes[n["id"]] = n
        ts = start
        for nid, dt in zip(cp.get("samples", []), data.get("timeDeltas", []), strict=False):
            ts += dt
            samples.append((ts, nid))
        start = ts
    by_fn: dict[str, float] = collections.Counter()
    for (ts, nid), nxt in zip(samples, samples[1:] + [(samples[-1][0] if samples else 0, 0)], strict=True):
        if not (t0 <= ts < t1):
            continue
        n = nodes.get(nid)
        if n is None:
            continue
        cf = n["callFrame"]
        url = cf.get("url", "").rsplit("/", 1)[-1][:40]
        by_fn[f"{cf.get('functionName') or '(anonymous)'} {url}:{cf.get('lineNumber', -1)}"] += (nxt[0] - ts) / 1e6
    return sorted(by_fn.items(), key=lambda kv: -kv[1])


def timeline(events: list[dict], names: dict, renderer: int, t0: float, t1: float, step_us: int = 100_000) -> None:
    """Per 100 ms from the click: how busy (%) the renderer's main thread, MapLibre's worker, V8's compile
    and GC pool, the GPU process's main thread (software WebGL) and the compositors were."""
    groups = {"main": "CrRendererMain", "worker": "DedicatedWorker thread", "pool": "ThreadPoolForegroundWorker",
              "gpu": "CrGpuMain", "viz": "VizCompositorThread", "comp": "Compositor"}
    bins: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("ph") != "X" or e.get("name") not in ("ThreadControllerImpl::RunTask", "ThreadPool_RunTask"):
            continue
        thread = names.get((e["pid"], e["tid"]), "").split("/", 1)[-1]
        g = next((k for k, v in groups.items() if v == thread), None)
        if g is None or (g in ("main", "worker", "pool", "comp") and e["pid"] != renderer):
            continue
        s, f = e["ts"], e["ts"] + e.get("dur", 0)
        while s < f:
            b = int((s - t0) // step_us)
            end = min(f, t0 + (b + 1) * step_us)
            if b >= 0:
                bins[b][g] += end - s
            s = end
    print("\nbusy per 100 ms after the click (% of the bin; pool sums several threads):")
    print("  from (s) " + " ".join(f"{g:>6}" for g in groups))
    for b in range(int((t1 - t0) // step_us) + 1):
        print(f"  {b * step_us / 1e6:7.1f} " + " ".join(f"{bins[b][g] / step_us * 100:6.0f}" for g in groups))


def main() -> None:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="UG, 4096", help="the case whose label contains this text")
    ap.add_argument("--trace", default=None, help="keep the trace JSON at this path")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--analyse", default=None, help="only analyse a trace kept before (its path)")
    args = ap.parse_args()
    if args.analyse:
        report(args.analyse, args.top)
        return
    label, _mech, title, grid = next(c for c in md.CASES if args.only.lower() in c[0].lower())
    path = args.trace or tempfile.mktemp(prefix="map_draw_trace_", suffix=".json")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=md.CHROMIUM, args=md.CHROMIUM_ARGS)
        try:
            with md.streamlit_server() as (base, _log):
                ctx = browser.new_context(viewport=md.VIEWPORT)
                page = ctx.new_page()
                page.goto(base)
                page.get_by_text("Preview", exact=True).wait_for(timeout=md.STEP_TIMEOUT_MS)
                md.wait_idle(page)
                if grid is not None:
                    md.set_grid(page, *grid)
                md.nav(page, "Plan")
                md.choose_mechanism(page, title)
                md.nav(page, "Release")
                button = page.get_by_role("button", name="Release with").first
                button.wait_for(timeout=md.STEP_TIMEOUT_MS)
                md.wait_idle(page)
                browser.start_tracing(page=page, path=path, categories=CATEGORIES)
                page.evaluate(md.INSTALL_CLICK_CLOCK)
                page.evaluate("() => performance.mark('bench-start')")
                button.click()
                r = md.timed_draw(page)
                page.evaluate("() => performance.mark('bench-drawn')")
                page.wait_for_timeout(300)
                browser.stop_tracing()
                ctx.close()
        finally:
            browser.close()
    print(f"{label}: click → drawn {r['draw']:.2f} s (confirmation {r['confirmed']:.2f}, chart {r['arrive']:.2f}); "
          f"load {md.loadavg()}; trace {path}")
    report(path, args.top)


def report(path: str, top: int) -> None:
    events = json.loads(Path(path).read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = thread_names(events)
    marks = {e["name"]: e["ts"] for e in events if e.get("name") in ("bench-start", "bench-drawn")}
    clicks = [e for e in events if e.get("name") == "EventDispatch"
              and e.get("args", {}).get("data", {}).get("type") == "click"]
    t0 = clicks[0]["ts"] if clicks else marks["bench-start"]
    t1 = marks["bench-drawn"]
    main_thr = next(k for k, v in names.items() if v.endswith("/CrRendererMain")
                    and any(e.get("pid") == k[0] and e.get("name") == "bench-start" for e in events))
    print(f"\nwindow {(t1 - t0) / 1e6:.2f} s (click → drawn seen by the poll)\n\nbusy per thread (s):")
    for name, s in busy_by_thread(events, t0, t1, names)[:12]:
        print(f"  {s:6.3f}  {name}")
    print("\nrenderer main thread by kind (s):")
    for k, s in sorted(main_thread_kinds(events, main_thr, t0, t1).items(), key=lambda kv: -kv[1]):
        print(f"  {s:6.3f}  {k}")
    print("\nJS self time by function, renderer main thread (s):")
    for fn, s in js_profile(events, main_thr, t0, t1)[:top]:
        print(f"  {s:6.3f}  {fn}")
    for thr, name in names.items():
        if thr[0] == main_thr[0] and name.endswith("DedicatedWorker thread"):
            prof = js_profile(events, thr, t0, t1)
            if prof:
                print(f"\nJS self time by function, {name} {thr[1]} (MapLibre's worker) (s):")
                for fn, s in prof[:top // 2]:
                    print(f"  {s:6.3f}  {fn}")
    timeline(events, names, main_thr[0], t0, t1)
    # the main thread's long tasks
    print("\nmain-thread tasks over 30 ms (start after click, duration, s):")
    for e in sorted((e for e in events if (e["pid"], e["tid"]) == main_thr and e.get("ph") == "X"
                     and e.get("name") == "ThreadControllerImpl::RunTask"
                     and e.get("dur", 0) > 30_000 and t0 <= e["ts"] < t1), key=lambda e: e["ts"]):
        inner = collections.Counter()
        for c in events:
            if (c["pid"], c["tid"]) == main_thr and c.get("ph") == "X" and e["ts"] <= c["ts"] < e["ts"] + e["dur"] \
                    and c.get("name") not in ("ThreadControllerImpl::RunTask", "RunTask"):
                inner[re.sub(r"\s+", " ", c["name"])] += c.get("dur", 0) / 1e6
        top = ", ".join(f"{n} {d:.2f}" for n, d in inner.most_common(5))
        print(f"  {(e['ts'] - t0) / 1e6:6.2f}  {e['dur'] / 1e6:5.2f}  {top}")


if __name__ == "__main__":
    main()
