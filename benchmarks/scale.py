"""Scale: raw Parquet points -> a 1024 x 1024 frequency matrix with each engine, 10 M to 1 B points.

Issue: "aggregates 10 million, 100 million and (DuckDB) one billion synthetic points from Parquet
into a 1024 x 1024 grid: time and peak memory per engine.  Peak memory for DuckDB must stay
under 4 GB whatever the input size, and DuckDB must be at least as fast as the in-memory path at
10 million points."

Data (generated once, outside the repository, reused when the row counts match)
    ``--data-dir`` (default ``/tmp/dpcore-scale``) holds one folder per size (``pts_10M``,
    ``pts_100M``, ``pts_1B``) of Parquet files of 10 M rows each (row groups of 1 M rows,
    snappy), so the engines read a *folder*.  Columns ``lon``, ``lat`` (float64) and ``uid``
    (int64, 1 M distinct persons, uniform; omitted from the 1 B set to save disk).  Points: 60 %
    from 12 Gaussian hotspots over New York (sd 0.004-0.03 degrees), 38 % uniform over the bounds
    ``(-74.06, 40.56, -73.70, 40.92)``, 2 % uniform over a box 0.5 degrees wider (outside the
    bounds); Gaussian draws falling outside the bounds stay (they count as outside).  numpy
    ``default_rng((seed, size, file))`` per file, so a file is the same whatever generated it.
Runs
    each (engine, size, cap) in a fresh subprocess (``--worker``) so that the peak memory is the
    run's own: numpy at 10 M and 100 M; DuckDB at 10 M, 100 M and 1 B; Spark (``local[2]``) at
    10 M and 100 M; with ``user="uid", user_cap=10`` numpy and DuckDB at 10 M and DuckDB at
    100 M.  10 M runs are repeated (``--repeat``, default 3) and the median time reported.
Measured
    ``seconds``: wall time of the ``engine.points(...)`` call (Spark: the session is started
    before, its start-up is reported as ``setup``); ``total``: the subprocess from start to exit
    (imports, session, teardown).  ``peak RSS``: the maximum over time of the summed VmRSS of the
    worker and all its descendants (the JVM for Spark), sampled every 50 ms by the parent from
    ``/proc``; beside it the worker's own ``ru_maxrss`` (Python process only; for Spark the JVM
    is not included).  The matrix hash is sha256 of ``counts.tobytes()`` (int64, C order); all
    engines at the same size and cap must give the same hash (and n_read and fingerprint).

Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/scale.py                   # everything (about 1 h)
    PYTHONPATH=. .venv/bin/python benchmarks/scale.py --sizes 10M,100M  # without the 1 B run
    PYTHONPATH=. .venv/bin/python benchmarks/scale.py --generate-only
    PYTHONPATH=. .venv/bin/python benchmarks/scale.py --runs duckdb:1B  # one run, merged
    PYTHONPATH=. .venv/bin/python benchmarks/scale.py --render-only     # rewrite scale.md

Results accumulate in ``results/scale.json`` (a run replaces the earlier one of the same engine,
size and cap) and ``results/scale.md`` is rewritten from it.  Synthetic public data: nothing
here is a release.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
BOUNDS = (-74.06, 40.56, -73.70, 40.92)  # west, south, east, north
GRID = 1024
SIZES = {"10M": 10_000_000, "100M": 100_000_000, "1B": 1_000_000_000}
FILE_ROWS = 10_000_000
ROW_GROUP = 1_000_000
N_USERS = 1_000_000
SEED = 20261123
CAP = 10
DUCKDB_LIMIT_GB = 4.0
# (engine, size, cap) in the order they run: small first, the 1 B run last
PLAN = [
    ("numpy", "10M", None), ("duckdb", "10M", None), ("spark", "10M", None),
    ("numpy", "10M", CAP), ("duckdb", "10M", CAP),
    ("numpy", "100M", None), ("duckdb", "100M", None), ("spark", "100M", None),
    ("duckdb", "100M", CAP),
    ("duckdb", "1B", None),
]
SPARK_MASTER = "local[2]"
# hotspots: (lon, lat, sd in degrees, weight)
HOTSPOTS = [
    (-73.985, 40.758, 0.008, 5), (-74.006, 40.713, 0.006, 4), (-73.968, 40.785, 0.010, 3),
    (-73.990, 40.735, 0.007, 4), (-73.944, 40.678, 0.020, 2), (-73.870, 40.773, 0.004, 2),
    (-73.790, 40.645, 0.006, 2), (-73.950, 40.650, 0.030, 2), (-73.830, 40.750, 0.025, 1),
    (-73.920, 40.820, 0.015, 2), (-74.030, 40.740, 0.010, 1), (-73.900, 40.700, 0.030, 2),
]


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------


def size_dir(data_dir: Path, size: str) -> Path:
    return data_dir / f"pts_{size}"


def rows_on_disk(folder: Path) -> int:
    import pyarrow.parquet as pq

    if not folder.is_dir():
        return -1
    files = sorted(folder.glob("*.parquet"))
    try:
        return sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    except Exception:  # noqa: BLE001 - a half-written file: regenerate
        return -1


def draw_points(rng: Any, n: int) -> tuple[Any, Any]:
    """``n`` synthetic points (lon, lat) from ``rng``: 60 % from the hotspots, 38 % uniform over the
    bounds, 2 % outside them (see the module docstring)."""
    import numpy as np

    w, s, e, nth = BOUNDS
    kind = rng.choice(3, size=n, p=[0.60, 0.38, 0.02])
    lon = np.empty(n)
    lat = np.empty(n)
    hot = np.flatnonzero(kind == 0)
    weights = np.array([h[3] for h in HOTSPOTS], dtype=float)
    which = rng.choice(len(HOTSPOTS), size=hot.size, p=weights / weights.sum())
    centre = np.array([(h[0], h[1], h[2]) for h in HOTSPOTS])[which]
    lon[hot] = centre[:, 0] + centre[:, 2] * rng.standard_normal(hot.size)
    lat[hot] = centre[:, 1] + centre[:, 2] * 1.3 * rng.standard_normal(hot.size)
    bg = np.flatnonzero(kind == 1)
    lon[bg] = rng.uniform(w, e, bg.size)
    lat[bg] = rng.uniform(s, nth, bg.size)
    # outside: uniform over the box 0.5 degrees wider, rejecting what falls inside the bounds
    out = np.flatnonzero(kind == 2)
    x = rng.uniform(w - 0.5, e + 0.5, out.size)
    y = rng.uniform(s - 0.5, nth + 0.5, out.size)
    inside = (x >= w) & (x <= e) & (y >= s) & (y <= nth)
    x[inside] = np.where(rng.random(int(inside.sum())) < 0.5, w - 0.25, e + 0.25)
    lon[out], lat[out] = x, y
    return lon, lat


def make_file(path: Path, size: str, index: int, n: int, with_uid: bool) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng((SEED, SIZES[size] // 1_000_000, index))
    lon, lat = draw_points(rng, n)
    cols = {"lon": pa.array(lon), "lat": pa.array(lat)}
    if with_uid:
        cols["uid"] = pa.array(rng.integers(0, N_USERS, size=n, dtype=np.int64))
    tmp = path.with_suffix(".tmp")
    pq.write_table(pa.table(cols), tmp, row_group_size=ROW_GROUP, compression="snappy")
    tmp.rename(path)


def ensure_data(data_dir: Path, size: str) -> dict[str, Any]:
    """The folder of ``size`` points (generated if missing or incomplete) and its facts."""
    folder = size_dir(data_dir, size)
    n = SIZES[size]
    with_uid = size != "1B"
    info: dict[str, Any] = {"size": size, "rows": n, "folder": str(folder), "uid": with_uid,
                            "files": -(-n // FILE_ROWS), "file_rows": FILE_ROWS, "row_group": ROW_GROUP}
    if rows_on_disk(folder) == n:
        info["generated_s"] = None
    else:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        t0 = time.perf_counter()
        for i in range(info["files"]):
            rows = min(FILE_ROWS, n - i * FILE_ROWS)
            make_file(folder / f"part-{i:04d}.parquet", size, i, rows, with_uid)
            print(f"  {size}: file {i + 1}/{info['files']} ({time.perf_counter() - t0:.0f} s)", flush=True)
        info["generated_s"] = round(time.perf_counter() - t0, 1)
        if rows_on_disk(folder) != n:
            raise SystemExit(f"generation of {folder} failed")
    info["bytes"] = sum(f.stat().st_size for f in folder.glob("*.parquet"))
    return info


# ---------------------------------------------------------------------------------------------
# one run (in a fresh subprocess)
# ---------------------------------------------------------------------------------------------


def worker(engine: str, folder: str, cap: int | None) -> None:
    t_start = time.perf_counter()
    import numpy as np

    from dpcore.data.domain import Bounds, Grid
    from dpcore.data.engines import Source, get_engine

    grid = Grid(Bounds(*BOUNDS), GRID, GRID)
    setup = 0.0
    if engine == "spark":
        from dpcore.data.engines import spark_engine

        t0 = time.perf_counter()
        spark_engine.session(SPARK_MASTER)
        setup = time.perf_counter() - t0
        eng = get_engine("spark", spark_master=SPARK_MASTER)
    else:
        eng = get_engine(engine)
    src = Source.from_path(folder)
    kw: dict[str, Any] = {"user": "uid", "user_cap": cap} if cap else {}
    t0 = time.perf_counter()
    pc = eng.points(src, grid, lat="lat", lon="lon", **kw)
    seconds = time.perf_counter() - t0
    counts = np.ascontiguousarray(pc.aggregate.counts, dtype=np.int64)
    out = {
        "seconds": seconds, "setup": setup,
        "hash": hashlib.sha256(counts.tobytes()).hexdigest(),
        "n_read": int(pc.n_read), "n_kept": int(pc.n_kept), "in_grid": int(counts.sum()),
        "dropped": {k: int(v) for k, v in pc.dropped.items()}, "fingerprint": pc.fingerprint,
        "ru_maxrss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "worker_s": time.perf_counter() - t_start,
    }
    if engine == "duckdb":
        out["duckdb_threads"] = eng.threads
        out["duckdb_memory_limit"] = eng.memory_limit
    print("RESULT " + json.dumps(out), flush=True)
    if engine == "spark":
        spark_engine.session(SPARK_MASTER).stop()


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree_rss(pid: int) -> int:
    """Summed VmRSS (bytes) of ``pid`` and all its descendants."""
    kids = _children()
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, []))
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total


def run_one(engine: str, size: str, cap: int | None, data_dir: Path, timeout: float) -> dict[str, Any]:
    folder = str(size_dir(data_dir, size))
    cmd = [sys.executable, __file__, "--worker", engine, folder, str(cap or 0)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    peak = 0
    samples = 0
    timed_out = False
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        samples += 1
        if time.perf_counter() - t0 > timeout:
            timed_out = True
            for p in _descendants(proc.pid):
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            proc.kill()
            break
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    total = time.perf_counter() - t0
    rec: dict[str, Any] = {"engine": engine, "size": size, "points": SIZES[size], "cap": cap,
                           "total_s": round(total, 2), "peak_rss_gb": peak / 2**30, "rss_samples": samples,
                           "when": datetime.datetime.now().isoformat(timespec="seconds")}
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if timed_out or line is None:
        rec["error"] = f"timed out after {timeout:.0f} s" if timed_out else (stderr.strip().splitlines() or ["?"])[-1]
        return rec
    rec.update(json.loads(line[len("RESULT "):]))
    return rec


def _descendants(pid: int) -> list[int]:
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


def key(r: dict[str, Any]) -> tuple[str, str, int]:
    return (r["engine"], r["size"], r.get("cap") or 0)


def summarise(reps: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in reps if "error" not in r]
    if not ok:
        return dict(reps[-1], repeats=len(reps))
    s = dict(ok[0])
    s["seconds_all"] = [round(r["seconds"], 2) for r in ok]
    s["seconds"] = statistics.median(r["seconds"] for r in ok)
    s["total_s"] = statistics.median(r["total_s"] for r in ok)
    s["peak_rss_gb"] = max(r["peak_rss_gb"] for r in ok)
    s["ru_maxrss_gb"] = max(r["ru_maxrss_gb"] for r in ok)
    s["repeats"] = len(ok)
    if len({r["hash"] for r in ok}) != 1:
        s["error"] = "repeats disagree"
    return s


def machine() -> dict[str, Any]:
    import duckdb
    import numpy
    import pandas
    import pyarrow

    try:
        import pyspark

        spark_v = pyspark.__version__
    except ImportError:
        spark_v = None
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    mem = next(int(x.split()[1]) for x in open("/proc/meminfo") if x.startswith("MemTotal"))
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    return {"cores": os.cpu_count(), "ram_gb": round(mem / 2**20, 1), "cpu": cpu,
            "python": platform.python_version(), "duckdb": duckdb.__version__, "numpy": numpy.__version__,
            "pandas": pandas.__version__, "pyarrow": pyarrow.__version__, "pyspark": spark_v,
            "java": java[0] if java else None, "duckdb_memory_limit": os.environ.get("DPCORE_DUCKDB_MEMORY", "2GB")}


def checks(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    agree: list[dict[str, Any]] = []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in ok:
        groups.setdefault((r["size"], r.get("cap") or 0), []).append(r)
    for (size, cap), rs in sorted(groups.items(), key=lambda kv: (SIZES[kv[0][0]], kv[0][1])):
        agree.append({"size": size, "cap": cap or None, "engines": [r["engine"] for r in rs],
                      "matrix": len({r["hash"] for r in rs}) == 1,
                      "n_read": len({(r["n_read"], r["n_kept"]) for r in rs}) == 1,
                      "fingerprint": len({r["fingerprint"] for r in rs}) == 1,
                      "fingerprints": {r["engine"]: r["fingerprint"][:16] for r in rs}})
    duck = sorted((r for r in ok if r["engine"] == "duckdb"), key=lambda r: (SIZES[r["size"]], r.get("cap") or 0))
    mem = {"limit_gb": DUCKDB_LIMIT_GB, "peaks": {f"{r['size']}{' cap' if r.get('cap') else ''}": round(r["peak_rss_gb"], 2)
                                                   for r in duck},
           "pass": bool(duck) and all(r["peak_rss_gb"] < DUCKDB_LIMIT_GB for r in duck)}
    speed: dict[str, Any] = {}
    for cap in (0, CAP):
        d = next((r for r in duck if r["size"] == "10M" and (r.get("cap") or 0) == cap), None)
        n = next((r for r in ok if r["engine"] == "numpy" and r["size"] == "10M" and (r.get("cap") or 0) == cap), None)
        if d and n:
            speed["cap" if cap else "plain"] = {"duckdb_s": round(d["seconds"], 2), "numpy_s": round(n["seconds"], 2),
                                                "ratio": round(n["seconds"] / d["seconds"], 2),
                                                "pass": d["seconds"] <= n["seconds"]}
    return {"agree": agree, "duckdb_memory": mem, "duckdb_vs_numpy_10M": speed}


def fmt_int(n: int) -> str:
    return f"{n:,}"


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    runs = sorted(res["runs"], key=lambda r: (SIZES[r["size"]], r.get("cap") or 0,
                                              ("numpy", "duckdb", "spark").index(r["engine"])))
    ck = res["checks"]
    out = [
        "# Scale: Parquet points to a 1024 x 1024 frequency matrix",
        "",
        f"Generated by `benchmarks/scale.py` ({res['updated']}). Machine: {m['cores']} cores ({m['cpu']}), "
        f"{m['ram_gb']} GB RAM; Python {m['python']}, duckdb {m['duckdb']} (memory_limit {m['duckdb_memory_limit']}, "
        f"threads = cores), numpy {m['numpy']}, pandas {m['pandas']}, pyarrow {m['pyarrow']}, "
        f"pyspark {m['pyspark']} (`{SPARK_MASTER}`, {m['java']}). Other jobs (tests) shared the 2 cores during "
        "the runs, so times carry noise.",
        "",
        "Input: a folder of Parquet files (10 M rows each, row groups of 1 M, snappy), columns `lon`, `lat` "
        "(float64) and `uid` (int64, 1 M persons; not in the 1 B set); 60 % Gaussian hotspots over New York, "
        "38 % uniform over the bounds (-74.06, 40.56, -73.70, 40.92), 2 % outside. Grid 1024 x 1024. "
        "Each run is a fresh subprocess.",
        "",
        "| engine | points | user cap | seconds | peak RSS GB | points/second | matrix hash | runs | total s | "
        "ru_maxrss GB |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in runs:
        cap = str(r["cap"]) if r.get("cap") else "-"
        if "error" in r and "hash" not in r:
            out.append(f"| {r['engine']} | {fmt_int(r['points'])} | {cap} | {r['error']} | "
                       f"{r['peak_rss_gb']:.2f} | | | | {r['total_s']:.0f} | |")
            continue
        secs = r["seconds"]
        extra = f" (setup {r['setup']:.1f})" if r.get("setup") else ""
        out.append(f"| {r['engine']} | {fmt_int(r['points'])} | {cap} | {secs:.1f}{extra} | {r['peak_rss_gb']:.2f} | "
                   f"{r['points'] / secs / 1e6:.1f} M | `{r['hash'][:12]}` | {r.get('repeats', 1)} | "
                   f"{r['total_s']:.1f} | {r['ru_maxrss_gb']:.2f} |")
    out += [
        "",
        "*seconds*: the `engine.points(...)` call (median of the runs at 10 M; Spark's session start-up, "
        "`setup`, is outside it). *peak RSS*: the maximum over time of the summed VmRSS of the worker process "
        "and all its descendants (Spark's JVM), sampled every 50 ms. *total s*: the whole subprocess (imports, "
        "session, exit). *ru_maxrss*: the worker's own peak (without the JVM). *matrix hash*: sha256 of "
        "`counts.tobytes()`.",
        "",
        "## Checks",
        "",
    ]
    mem = ck["duckdb_memory"]
    peaks = ", ".join(f"{k}: {v:.2f} GB" for k, v in mem["peaks"].items())
    out.append(f"* **DuckDB peak memory < {mem['limit_gb']:.0f} GB at every size: "
               f"{'yes' if mem['pass'] else 'NO'}** ({peaks}).")
    for label, s in ck["duckdb_vs_numpy_10M"].items():
        what = "no cap" if label == "plain" else f"user cap {CAP}"
        out.append(f"* **DuckDB at least as fast as numpy at 10 M ({what}): {'yes' if s['pass'] else 'NO'}** "
                   f"(DuckDB {s['duckdb_s']:.1f} s, numpy {s['numpy_s']:.1f} s: numpy / DuckDB = {s['ratio']:.2f}).")
    for a in ck["agree"]:
        what = f"user cap {a['cap']}" if a["cap"] else "no cap"
        if len(a["engines"]) == 1:
            out.append(f"* At {a['size']} ({what}) only {a['engines'][0]} ran: nothing to compare.")
            continue
        fps = "" if a["fingerprint"] else " (" + ", ".join(f"{e} `{f}`" for e, f in a["fingerprints"].items()) + ")"
        out.append(f"* Engines at {a['size']} ({what}; {', '.join(a['engines'])}): matrix "
                   f"{'identical' if a['matrix'] else '**DIFFERENT**'}, n_read/n_kept "
                   f"{'identical' if a['n_read'] else '**DIFFERENT**'}, fingerprint "
                   f"{'identical' if a['fingerprint'] else '**DIFFERENT**'}{fps}.")
    out += ["", "## Data", "", "| set | rows | files | bytes on disk | uid | generation s |", "|---|---:|---:|---:|---|---:|"]
    for size, d in sorted(res.get("data", {}).items(), key=lambda kv: SIZES[kv[0]]):
        g = f"{d['generated_s']:.0f}" if d.get("generated_s") else "(reused)"
        out.append(f"| {size} | {fmt_int(d['rows'])} | {d['files']} | {d['bytes'] / 1e9:.1f} GB | "
                   f"{'yes' if d['uid'] else 'no'} | {g} |")
    notes = res.get("notes") or []
    if notes:
        out += ["", "## Notes", ""] + [f"* {n}" for n in notes]
    return "\n".join(out) + "\n"


def save(res: dict[str, Any], stem: str) -> None:
    res["checks"] = checks(res["runs"])
    res["updated"] = datetime.date.today().isoformat()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(render(res))


def parse_runs(text: str | None, sizes: list[str]) -> list[tuple[str, str, int | None]]:
    if not text:
        return [p for p in PLAN if p[1] in sizes]
    plan = []
    for item in text.split(","):
        parts = item.strip().split(":")
        cap = int(parts[2]) if len(parts) > 2 and int(parts[2]) > 0 else None
        plan.append((parts[0], parts[1], cap))
    return plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="/tmp/dpcore-scale", help="where the Parquet folders live")
    ap.add_argument("--sizes", default="10M,100M,1B", help="sizes to run (10M, 100M, 1B)")
    ap.add_argument("--runs", help="explicit runs engine:size[:cap], comma separated (e.g. duckdb:1B,numpy:10M:10)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of each 10 M run (median time)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds before a run is killed")
    ap.add_argument("--spark-timeout", type=float, default=900, help="seconds before a Spark run is killed")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--stem", default="scale", help="results file name (results/STEM.md, .json)")
    ap.add_argument("--worker", nargs=3, metavar=("ENGINE", "FOLDER", "CAP"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker[0], a.worker[1], int(a.worker[2]) or None)
        return 0
    path = RESULTS / f"{a.stem}.json"
    res: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"runs": [], "data": {}}
    res["machine"] = machine()
    if a.render_only:
        save(res, a.stem)
        return 0
    data_dir = Path(a.data_dir)
    sizes = [s.strip() for s in a.sizes.split(",") if s.strip()]
    plan = parse_runs(a.runs, sizes)
    need = sizes if a.generate_only else sorted({p[1] for p in plan}, key=SIZES.get)
    print(f"disk free in {data_dir.parent}: {shutil.disk_usage(data_dir.parent).free / 1e9:.0f} GB", flush=True)
    for size in need:
        info = ensure_data(data_dir, size)
        if info["generated_s"] is None and size in res["data"]:
            info["generated_s"] = res["data"][size].get("generated_s")
        res["data"][size] = info
        print(f"data {size}: {info['folder']} ({info['bytes'] / 1e9:.1f} GB, generated in {info['generated_s']} s)",
              flush=True)
    save(res, a.stem)
    if a.generate_only:
        return 0
    for engine, size, cap in plan:
        reps = a.repeat if size == "10M" else 1
        timeout = a.spark_timeout if engine == "spark" else a.timeout
        done = []
        for i in range(reps):
            print(f"run {engine} {size} cap={cap} ({i + 1}/{reps}) ...", flush=True)
            rec = run_one(engine, size, cap, data_dir, timeout)
            done.append(rec)
            print("   " + (rec.get("error") or f"{rec['seconds']:.1f} s, peak {rec['peak_rss_gb']:.2f} GB, "
                                                f"hash {rec['hash'][:12]}"), flush=True)
            if "error" in rec:
                break
        s = summarise(done)
        res["runs"] = [r for r in res["runs"] if key(r) != key(s)] + [s]
        save(res, a.stem)
    bad = 0
    for a_ in res["checks"]["agree"]:
        if not (a_["matrix"] and a_["n_read"]):
            print(f"ENGINES DISAGREE: {a_}", flush=True)
            bad = 1
        elif not a_["fingerprint"]:
            print(f"warning: same matrix, different fingerprints: {a_}", flush=True)
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
