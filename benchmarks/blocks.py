"""Census blocks at national scale: every consistent hierarchy mechanism from the CLI against the floor.

Issue 28, item 1: "every consistent hierarchy mechanism (exact, topdown_l2, topdown_linf, hay,
bottom_up) releases end to end from the CLI in at most 3x the floor (pandas read + one noisy sum
per level + CSV write, same rows, same run) and within 4 GB peak".

Data
    :mod:`benchmarks.blocks_data` (seeded, block-shaped: STATE / COUNTY / TRACT / BLOCK codes
    nested by prefix, skewed sizes, about 30 % empty blocks), Parquet, generated once into
    ``--data-dir`` and reused.
Runs (each a fresh process under ``/usr/bin/time -v``: wall seconds and peak RSS)
    * floor: ``python -c`` reading the Parquet file with pandas, one noisy sum per level
      (``groupby(...).sum()`` plus integer noise from numpy's seeded generator: a stand-in of the
      cost of a noisy sum, not a release) and writing every level's rows with ``to_csv``;
    * each mechanism: ``python -m dpcore release hierarchy --input FILE --levels
      STATE,COUNTY,TRACT,BLOCK --count POP --mechanism M --epsilon 1 --input-lists-all-areas``
      with a fresh ``--budget-db`` (the budget database and its gzip'd copy of the release count).
Measured
    wall seconds and peak RSS (``Maximum resident set size``) per run, the ratio to the floor, and
    the machine's load average before each run.  Bytecode is compiled first (``compileall``).

Run from the repository root (under ``nice`` on a shared machine)::

    nice -n 10 .venv/bin/python benchmarks/blocks.py --rows 1000000
    nice -n 10 .venv/bin/python benchmarks/blocks.py --rows 8000000     # all five mechanisms, then a table
    nice -n 10 .venv/bin/python benchmarks/blocks.py --rows 8000000 --mechanisms exact,topdown_l2

Results accumulate in ``results/blocks.json`` (a run replaces the earlier one of the same rows
and mechanism) and ``results/blocks.md`` is rewritten from it.  Synthetic public data.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
MECHANISMS = ["exact", "topdown_l2", "topdown_linf", "hay", "bottom_up"]
LEVELS = "STATE,COUNTY,TRACT,BLOCK"

FLOOR = """
import sys, numpy as np, pandas as pd
df = pd.read_parquet(sys.argv[1])
rng = np.random.default_rng(0)
parts = []
for lv in ["STATE", "COUNTY", "TRACT", "BLOCK"]:
    s = df.groupby(lv, sort=True)["POP"].sum()
    noisy = s.to_numpy() + rng.geometric(0.5, s.size) - rng.geometric(0.5, s.size)
    parts.append(pd.DataFrame({"level": lv, "code": s.index.to_numpy(), "noisy_count": noisy}))
pd.concat(parts).to_csv(sys.argv[2], index=False)
"""


def timed(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd`` under /usr/bin/time -v: wall seconds, peak RSS (GB), exit code, load before."""
    load = os.getloadavg()[0]
    p = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", p.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    secs = sum(float(x) * 60**i for i, x in enumerate(reversed(wall.group(1).split(":")))) if wall else None
    cpu = [re.search(rf"{w} time \(seconds\): ([0-9.]+)", p.stderr) for w in ("User", "System")]
    out = {"seconds": secs, "peak_gb": int(rss.group(1)) / 2**20 if rss else None, "rc": p.returncode,
           "cpu_s": round(sum(float(m.group(1)) for m in cpu), 1) if all(cpu) else None,
           "load_before": round(load, 1), "when": datetime.datetime.now().isoformat(timespec="seconds")}
    if p.returncode:
        lines = p.stderr.split("\tCommand being timed")[0].strip().splitlines()
        out["error"] = lines[-1] if lines else f"exit code {p.returncode}"
    return out


def machine() -> dict[str, Any]:
    import numpy
    import pandas
    import pyarrow

    mem = next(int(x.split()[1]) for x in open("/proc/meminfo") if x.startswith("MemTotal"))
    cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
    return {"cores": os.cpu_count(), "ram_gb": round(mem / 2**20, 1), "cpu": cpu, "python": platform.python_version(),
            "numpy": numpy.__version__, "pandas": pandas.__version__, "pyarrow": pyarrow.__version__}


def run(rows: int, mechanisms: list[str], data_dir: Path,
        save: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    from benchmarks.blocks_data import write

    data = data_dir / f"blocks_{rows}.parquet"
    if not data.exists():
        write(rows, data)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "dpcore"], cwd=ROOT, check=True)
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=data_dir) as tmp:
        floor = timed([sys.executable, "-c", FLOOR, str(data), f"{tmp}/floor.csv"])
        floor.update(rows=rows, mechanism="floor")
        print(f"floor: {floor['seconds']} s, {floor['peak_gb']:.2f} GB, CPU {floor['cpu_s']} s "
              f"(load {floor['load_before']})", flush=True)
        out.append(floor)
        for m in mechanisms:
            r = timed([sys.executable, "-m", "dpcore", "release", "hierarchy", "--input", str(data), "--levels", LEVELS,
                       "--count", "POP", "--mechanism", m, "--epsilon", "1", "--input-lists-all-areas",
                       "--out", f"{tmp}/{m}", "--budget-db", f"{tmp}/{m}.sqlite"])
            r.update(rows=rows, mechanism=m, floor_s=floor["seconds"])
            r["ratio"] = r["seconds"] / floor["seconds"] if r["seconds"] and floor["seconds"] else None
            r["cpu_ratio"] = r["cpu_s"] / floor["cpu_s"] if r["cpu_s"] and floor["cpu_s"] else None
            print(f"{m}: {r['seconds']} s, {r['peak_gb']:.2f} GB, {r['ratio']:.2f}x the floor, CPU {r['cpu_s']} s "
                  f"(load {r['load_before']}){' ERROR ' + r['error'] if 'error' in r else ''}", flush=True)
            out.append(r)
            if save is not None:
                save(out)  # each run kept as soon as it is measured
            shutil.rmtree(f"{tmp}/{m}", ignore_errors=True)
    return out


def table(runs: list[dict[str, Any]]) -> str:
    """This run's results as a plain-text table (the targets: 3x the floor, 4 GB peak)."""
    def num(v: Any, fmt: str) -> str:
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    lines = [f"{'run':<13}{'wall s':>8}{'x floor':>9}{'CPU s':>8}{'CPU x floor':>13}{'peak GB':>9}{'load':>6}  target"]
    for r in runs:
        ok = r["mechanism"] == "floor" or (bool(r.get("ratio")) and r["ratio"] <= 3 and r["peak_gb"] <= 4)
        lines.append(f"{r['mechanism']:<13}{num(r['seconds'], '.1f'):>8}{num(r.get('ratio'), '.2f'):>9}"
                     f"{num(r['cpu_s'], '.1f'):>8}{num(r.get('cpu_ratio'), '.2f'):>13}{num(r['peak_gb'], '.2f'):>9}"
                     f"{r['load_before']:>6}  {'-' if r['mechanism'] == 'floor' else 'met' if ok else 'NOT met'}"
                     f"{' ERROR ' + r['error'] if 'error' in r else ''}")
    return "\n".join(lines)


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        "# Census blocks at national scale (issue 28 item 1)", "",
        f"Generated by `benchmarks/blocks.py` ({res['updated']}). Machine: {m['cores']} cores ({m['cpu']}), "
        f"{m['ram_gb']} GB RAM, shared with other jobs (the load average before each run is in the table); "
        f"Python {m['python']}, numpy {m['numpy']}, pandas {m['pandas']}, pyarrow {m['pyarrow']}. Bytecode "
        "compiled before the runs (`compileall`). Each run is a fresh process under `/usr/bin/time -v`, run "
        "under `nice -n 10`.", "",
        "Input: `benchmarks/blocks_data.py` (seeded; STATE / COUNTY / TRACT / BLOCK codes nested by prefix, "
        "skewed sizes, 30 % empty blocks), Parquet. Floor: pandas read + one noisy sum per level + CSV write, "
        "in the same run. Mechanisms: `python -m dpcore release hierarchy ... --epsilon 1 "
        "--input-lists-all-areas` with a fresh budget database (every file written, the release stored).", "",
        "| rows | run | seconds | × floor | CPU s (user+sys) | peak RSS GB | load before | when |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(res["runs"], key=lambda r: (r["rows"], r["when"])):
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") else "-"
        secs = f"{r['seconds']:.1f}" if r.get("seconds") else "-"
        gb = f"{r['peak_gb']:.2f}" if r.get("peak_gb") else "-"
        cpu = f"{r['cpu_s']:.1f}" if r.get("cpu_s") else "-"
        lines.append(f"| {r['rows']:,} | {r['mechanism']}{' (error)' if 'error' in r else ''} | {secs} | {ratio} | "
                     f"{cpu} | {gb} | {r['load_before']} | {r['when']} |")
    notes = res.get("notes") or []
    if notes:
        lines += ["", "## Notes", ""] + [f"* {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--mechanisms", default=",".join(MECHANISMS))
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/dpcore-blocks"))
    ap.add_argument("--render-only", action="store_true")
    a = ap.parse_args()
    path = RESULTS / "blocks.json"
    res: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"runs": []}
    res["machine"] = machine()
    earlier = list(res["runs"])

    def save(new: list[dict[str, Any]]) -> None:
        done = {(r["rows"], r["mechanism"]) for r in new}
        res["runs"] = [r for r in earlier if (r["rows"], r["mechanism"]) not in done] + new
        res["updated"] = datetime.date.today().isoformat()
        RESULTS.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1) + "\n")
        (RESULTS / "blocks.md").write_text(render(res))

    if not a.render_only:
        a.data_dir.mkdir(parents=True, exist_ok=True)
        new = run(a.rows, [m.strip() for m in a.mechanisms.split(",") if m.strip()], a.data_dir, save)
        print(table(new))
    else:
        new = []
    save(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
