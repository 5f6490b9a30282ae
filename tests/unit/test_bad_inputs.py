"""The bad-input suite: malformed files, generated here (never stored), against every reader and the CLI.

Every case must end in a :class:`~dpcore.errors.DPCoreError` whose message names the problem
and the fix (or in a valid result where the input is merely unusual), never in another
exception, and quickly: bombs and pathological lines are refused from a small sample,
before the heavy work.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcore.areas import area_sets
from dpcore.cli import main
from dpcore.data.boundaries import read_boundaries
from dpcore.data.code_tables import read_code_table
from dpcore.data.domain import MAX_SIDE, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.data.points import load_points_file
from dpcore.data.tables import read_table
from dpcore.data.text import UPLOAD_LIMIT_MB, gunzip_limited
from dpcore.errors import DPCoreError, InputError, ParameterError
from dpcore.flows.counts import ODCounts
from dpcore.flows.tree import hierarchy_from_prefixes
from dpcore.points import workload_io

REPO = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ the corpus (generated)


def gzip_bomb(expanded_mb: int = 1024) -> bytes:
    """A valid CSV.gz that expands ~1000x: one compressed 1 MB member repeated (multi-member gzip)."""
    line = b"40.7,-73.9\n"
    member = gzip.compress(line * ((1 << 20) // len(line)), compresslevel=9)
    return gzip.compress(b"lat,lon\n") + member * expanded_mb


def zip_bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("areas.geojson", b" " * (300 << 20))
    return buf.getvalue()


def traversal_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for ext in ("shp", "shx", "dbf"):
            z.writestr(f"../evil.{ext}", b"x")
    return buf.getvalue()


def lying_zip() -> bytes:
    """A zip whose member header claims 10 bytes but which holds 5 MB (sizes patched after writing)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.geojson", b"{" + b" " * (5 << 20))
    raw = bytearray(buf.getvalue())
    size = (5 << 20) + 1
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        pos = raw.find(sig)
        off = 22 if sig == b"PK\x03\x04" else 24
        assert int.from_bytes(raw[pos + off:pos + off + 4], "little") == size
        raw[pos + off:pos + off + 4] = (10).to_bytes(4, "little")
    return bytes(raw)


def feature_collection(*geoms: dict) -> bytes:
    feats = [{"type": "Feature", "properties": {"id": str(i)}, "geometry": g} for i, g in enumerate(geoms)]
    return json.dumps({"type": "FeatureCollection", "features": feats}).encode()


BOWTIE = {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}

class _Corpus(dict):
    """The cases by name; a case given as a function (the bombs, the lying zip and the huge lines: the
    zip bomb alone is 300 MB deflated, 2 s of CPU) is made on first use, so that the workers that only
    collect these tests (every worker collects every file) do not pay for it."""

    def __getitem__(self, case: str) -> tuple[str, bytes]:
        name, data = super().__getitem__(case)
        if callable(data):
            data = data()
            self[case] = (name, data)
        return name, data


CORPUS: dict[str, tuple[str, bytes]] = _Corpus({
    "empty": ("empty.csv", b""),
    "blank lines": ("blank.csv", b"\n\n  \n"),
    "header only": ("header.csv", b"lat,lon\n"),
    "wrong delimiter": ("spaces.csv", b"lat lon\n40.7 -73.9\n40.8 -73.8\n"),
    "mixed types": ("mixed.csv", b"lat,lon\n40.7,-73.9\nabc,x\n"),
    "nan and inf": ("naninf.csv", b"lat,lon\nnan,inf\n40.7,-inf\n"),
    "out of range": ("range.csv", b"lat,lon\n140.7,-73.9\n"),
    "swapped lat/lon": ("swapped.csv", b"lat,lon\n-122.4,37.7\n-122.3,37.8\n"),
    "huge line": ("huge.csv", lambda: b"a" * (20 << 20)),
    "huge line of commas": ("commas.csv", lambda: b"a," * (10 << 20)),
    "latin-1": ("latin1.csv", "lat,lon,name\n40.7,-73.9,caf\xe9\n".encode("latin-1")),
    "invalid utf-8": ("bad_utf8.csv", b"lat,lon\n40.7,-73.9\xff\xfe\x80\n"),
    "utf-16": ("utf16.csv", "lat,lon\n40.7,-73.9\n".encode("utf-16")),
    "binary": ("binary.csv", bytes(range(256)) * 64),
    "png renamed csv": ("picture.csv", b"\x89PNG\r\n\x1a\n" + bytes(64)),
    "damaged gzip": ("cut.csv.gz", gzip.compress(b"lat,lon\n1,2\n")[:15]),
    "gzip bomb": ("bomb.csv.gz", gzip_bomb),
    "zip bomb": ("bomb.zip", zip_bomb),
    "zip lying about sizes": ("liar.zip", lying_zip),
    "path traversal zip": ("evil.zip", traversal_zip()),
    "invalid json": ("broken.geojson", b'{"type": "FeatureCollection", "features": [}'),
    "json, not geojson": ("other.geojson", b'{"a": 1}'),
    "point without coordinates": ("nocoords.geojson",
                                  feature_collection({"type": "Point"})),
    "self-intersecting polygon": ("bowtie.geojson", feature_collection(BOWTIE)),
    "unclosed quote": ("quote.csv", b'lat,lon\n"40.7,-73.9\n1,2\n'),
    "ragged rows": ("ragged.csv", b"lat,lon\n1,2\n1,2,3,4\n"),
})

_H = Hierarchy.from_frame(pd.DataFrame({"s": ["01", "01", "02"], "c": ["001", "002", "003"]}), ["s", "c"])

READERS = {
    "read_table": lambda d, n: read_table(d, n),
    "load_points_file": lambda d, n: load_points_file(d, n),
    "read_boundaries": lambda d, n: read_boundaries(d, n),
    "read_census_file": lambda d, n: read_code_table(d, n),
    "read_hierarchy_table": lambda d, n: Hierarchy.from_frame(read_code_table(d, n), ["lat", "lon"]),
    "read_rectangles": lambda d, n: workload_io.read_rectangles(d, n),
    "read_area_sets": lambda d, n: area_sets.read_area_sets(d, _H, n),
}

#: Where a valid result is right (the rest must raise a DPCoreError).
VALID = {
    ("read_table", c) for c in ("mixed types", "nan and inf", "out of range", "swapped lat/lon", "latin-1",
                                "invalid utf-8", "utf-16", "point without coordinates")
} | {
    ("load_points_file", "latin-1"), ("load_points_file", "utf-16"),
    ("read_boundaries", "self-intersecting polygon"),
} | {
    (r, c) for r in ("read_census_file", "read_hierarchy_table")
    for c in ("mixed types", "out of range", "swapped lat/lon", "invalid utf-8", "utf-16", "latin-1")
} | {("read_census_file", "nan and inf")}

#: Words each refusal must contain: the problem, and where it matters the fix.
EXPECT: dict[tuple[str, str], tuple[str, ...]] = {
    **{(r, "gzip bomb"): ("expands to more than", "it was not read further")
       for r in ("read_table", "load_points_file", "read_census_file", "read_hierarchy_table", "read_area_sets")},
    **{(r, "huge line of commas"): ("longer than 64 KB", "header row")
       for r in ("read_table", "load_points_file", "read_census_file", "read_hierarchy_table",
                 "read_rectangles", "read_area_sets")},
    **{(r, "damaged gzip"): ("damaged",) for r in ("read_table", "read_census_file", "read_area_sets")},
    ("read_table", "empty"): ("empty",),
    ("read_table", "header only"): ("header but no data rows",),
    ("read_census_file", "header only"): ("header but no data rows",),
    ("read_table", "wrong delimiter"): ("only one column", "comma"),
    ("read_table", "binary"): ("not a text CSV", "binary"),
    ("read_table", "png renamed csv"): ("PNG image",),
    ("load_points_file", "mixed types"): ("'lat'", "not a number", "data row 2", "abc"),
    ("load_points_file", "nan and inf"): ("infinite",),
    ("load_points_file", "out of range"): ("outside -90..90", "swapped"),
    ("load_points_file", "swapped lat/lon"): ("outside -90..90", "not swapped", "choose 'lon' as latitude"),
    ("load_points_file", "invalid utf-8"): ("not a number",),
    ("read_boundaries", "zip bomb"): ("would expand to", "it was not opened"),
    ("read_boundaries", "zip lying about sizes"): ("could not be unzipped",),
    ("read_boundaries", "path traversal zip"): ("unsafe path", "../evil.shp"),
    ("read_boundaries", "invalid json"): ("not valid JSON", "line 1"),
    ("read_boundaries", "json, not geojson"): ("not GeoJSON",),
    ("read_table", "invalid json"): ("not valid JSON",),
    ("read_boundaries", "point without coordinates"): ("none has a geometry",),
    ("read_census_file", "ragged rows"): ("data row 2 has 4 values",),
    ("read_area_sets", "ragged rows"): ("data row 2 has 4 values",),
}


def _run(reader: str, case: str):
    name, data = CORPUS[case]
    t0 = time.perf_counter()
    try:
        out = READERS[reader](data, name)
        err = None
    except DPCoreError as e:
        out, err = None, e
    return out, err, time.perf_counter() - t0


@pytest.mark.parametrize("case", list(CORPUS))
@pytest.mark.parametrize("reader", list(READERS))
def test_reader_gives_a_result_or_a_clear_error(reader: str, case: str) -> None:
    out, err, took = _run(reader, case)  # any other exception fails the test
    assert took < 5.0, f"{reader} took {took:.1f} s on {case!r}: refuse before the heavy work"
    if (reader, case) in VALID:
        assert err is None, f"{reader} refused {case!r}: {err}"
        assert out is not None
        return
    assert err is not None, f"{reader} accepted {case!r}: {out!r}"
    msg = str(err)
    assert 30 < len(msg) < 600, msg
    assert "Traceback" not in msg and "/vsimem/" not in msg, msg
    # a fix: every refusal tells the person what to do
    assert any(w in msg for w in ("Upload", "upload", "Export", "export", "Save", "save", "Check", "check",
                                  "Give", "give", "Fix", "fix", "Choose", "choose", "Zip", "Replace", "Add",
                                  "Rename", "Use", "Re-export", "Name", "delete", "Split", "keep", "fill", "drop")), msg
    for frag in EXPECT.get((reader, case), ()):
        assert frag in msg, (frag, msg)


def test_gzip_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    bomb = gzip_bomb(4096)  # 4 GB once expanded, a few MB compressed
    assert len(bomb) < 16 << 20
    for read in (lambda: read_table(bomb, "b.csv.gz"), lambda: read_code_table(bomb, "b.csv.gz"),
                 lambda: load_points_file(bomb, "b.csv.gz", progress=lambda f, m: None)):
        t0 = time.perf_counter()
        with pytest.raises(InputError, match="expands to more than"):
            read()
        assert time.perf_counter() - t0 < 3.0
    path = tmp_path / "bomb.csv.gz"
    path.write_bytes(bomb)
    with pytest.raises(InputError, match="expands to more than"):
        read_table(path)


def test_a_well_compressed_real_table_is_still_read() -> None:
    rng = np.random.default_rng(0)
    lines = "lat,lon\n" + "".join(f"{a:.5f},{b:.5f}\n" for a, b in rng.uniform(40, 41, (50_000, 2)))
    gz = gzip.compress(lines.encode())
    assert len(read_table(gz, "p.csv.gz")) == 50_000
    assert len(read_code_table(gz, "p.csv.gz")) == 50_000
    assert gunzip_limited(gz, "x") == lines.encode()


def test_traversal_zip_writes_nothing_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(InputError, match="unsafe path"):
        read_boundaries(traversal_zip(), "evil.zip")
    assert not list(tmp_path.rglob("evil.*"))
    assert not (tmp_path.parent / "evil.shp").exists()


def test_self_intersecting_polygon_is_repaired() -> None:
    import shapely

    gdf = read_boundaries(feature_collection(BOWTIE), "bowtie.geojson")
    assert shapely.is_valid(gdf.geometry.to_numpy()).all()
    assert set(gdf.geom_type) <= {"Polygon", "MultiPolygon"}
    assert shapely.area(gdf.geometry.to_numpy()).sum() == pytest.approx(0.5)


# ------------------------------------------------------------------ hierarchies and O/D codes


def test_child_with_two_parents_is_named() -> None:
    df = pd.DataFrame({"state": ["01", "01", "02", "02"], "county": ["01001", "01003", "01003", "02005"]})
    with pytest.raises(InputError, match=r"two or more parents.*'01003' under '01' and '02'"):
        Hierarchy.from_frame(df, ["state", "county"], codes="global")
    df = pd.DataFrame({"state": ["01"] * 4 + ["02"] * 4,
                       "county": ["01001", "01003", "01005", "01007", "01003", "02005", "02007", "02009"]})
    with pytest.raises(InputError, match="A child must have one parent"):
        Hierarchy.from_frame(df, ["state", "county"])  # auto: a few repeats are a typo, not local codes


def test_levels_in_the_wrong_order_are_refused() -> None:
    """A 'cycle' in a table of level columns: the finer level listed above the coarser one."""
    df = pd.DataFrame({"state": ["01", "01", "02"], "county": ["01001", "01003", "02005"]})
    with pytest.raises(InputError, match="do not nest in this order"):
        Hierarchy.from_frame(df, ["county", "state"])


def test_missing_and_control_codes_name_the_rows() -> None:
    df = pd.DataFrame({"s": ["01", None, "02"], "c": ["1", "2", "3"]})
    with pytest.raises(InputError, match=r"missing code.*data row 2"):
        Hierarchy.from_frame(df, ["s", "c"])
    df = pd.DataFrame({"s": ["01", "0\x1f2"], "c": ["1", "2"]})
    with pytest.raises(InputError, match="control characters"):
        Hierarchy.from_frame(df, ["s", "c"])


def test_tree_over_the_size_limit_is_refused_before_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcore.data import hierarchy

    monkeypatch.setattr(hierarchy, "MAX_AREA_ROWS", 100)
    df = pd.DataFrame({"s": ["01"] * 101, "c": [f"{i:03d}" for i in range(101)]})
    with pytest.raises(InputError, match="more than the 100 a hierarchy is built from.*aggregate"):
        Hierarchy.from_frame(df, ["s", "c"])


def test_od_codes_not_in_the_hierarchy_name_the_rows() -> None:
    trips = pd.DataFrame({"o": ["001", "002", "999"], "d": ["003", "777", "001"]})
    with pytest.raises(InputError, match=r"1 row of the trips \(data row 3\).*origin.*999.*Fix the codes"):
        ODCounts.from_frame(trips, _H, origin="o", destination="d")
    trips = pd.DataFrame({"o": ["001", None], "d": ["003", "001"]})
    with pytest.raises(InputError, match="missing code"):
        ODCounts.from_frame(trips, _H, origin="o", destination="d")


def test_prefix_hierarchy_with_codes_of_the_wrong_length() -> None:
    with pytest.raises(InputError, match="do not have 5 characters"):
        hierarchy_from_prefixes(["01001", "1003"], [2, 5])


def test_area_sets_with_unknown_codes() -> None:
    with pytest.raises(InputError, match=r"not in the hierarchy \(e.g. '999'\)"):
        area_sets.read_area_sets(b"query,area\nA,001\nA,999\n", _H, "q.csv")


def test_grid_over_the_largest_grid_is_refused_before_aggregation() -> None:
    b = Bounds(-74.0, 40.5, -73.5, 41.0)
    with pytest.raises(ParameterError, match="coarser grid"):
        Grid(b, MAX_SIDE + 1, 10)
    with pytest.raises(ParameterError, match="between 1 and 4096"):
        Grid.parse(b, "4097,1")


def test_upload_limit_matches_the_streamlit_config() -> None:
    import tomllib

    cfg = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["maxUploadSize"] == UPLOAD_LIMIT_MB


# ------------------------------------------------------------------ the CLI


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dpcore", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                           "DPCORE_LEDGER_DB": str(cwd / "ledger.sqlite")})


def _points(path: Path, data: bytes, tmp: Path) -> list[str]:
    path.write_bytes(data)
    return ["release", "points", "--input", str(path), "--bounds=-74.06,40.56,-73.70,40.92", "--grid", "8,8",
            "--mechanism", "identity", "--epsilon=1", "--out", str(tmp / "out")]


CLI_CASES = {
    "gzip bomb": lambda tmp: _points(tmp / "bomb.csv.gz", gzip_bomb(), tmp),
    "huge line": lambda tmp: _points(tmp / "commas.csv", CORPUS["huge line of commas"][1], tmp),
    "binary": lambda tmp: _points(tmp / "binary.csv", CORPUS["binary"][1], tmp),
    "two parents": lambda tmp: (
        (tmp / "h.csv").write_bytes(b"state,county,n\n01,01001,3\n01,01003,4\n02,01003,5\n02,02005,1\n"),
        ["release", "hierarchy", "--input", str(tmp / "h.csv"), "--levels", "state,county", "--count", "n",
         "--codes", "global", "--input-lists-all-areas", "--epsilon", "1", "--out", str(tmp / "out")])[1],
    "od code not in hierarchy": lambda tmp: (
        (tmp / "areas.csv").write_bytes(b"s,c\n01,001\n01,002\n02,003\n"),
        (tmp / "trips.csv").write_bytes(b"origin,destination\n001,003\n002,999\n"),
        ["release", "od", "--input", str(tmp / "trips.csv"), "--hierarchy", str(tmp / "areas.csv"),
         "--levels", "s,c", "--epsilon", "1", "--pure", "--out", str(tmp / "out")])[2],
    "od hierarchy not geojson": lambda tmp: (
        (tmp / "areas.geojson").write_bytes(b'{"type": "FeatureCollection", "features": [}'),
        (tmp / "trips.csv").write_bytes(b"origin,destination\n001,003\n"),
        ["release", "od", "--input", str(tmp / "trips.csv"), "--hierarchy", str(tmp / "areas.geojson"),
         "--levels", "s,c", "--epsilon", "1", "--pure", "--out", str(tmp / "out")])[2],
    "census gzip bomb": lambda tmp: (
        (tmp / "c.csv.gz").write_bytes(gzip_bomb()),
        ["release", "census", "--input", str(tmp / "c.csv.gz"), "--levels", "lat", "--count", "lon",
         "--epsilon", "1", "--out", str(tmp / "out")])[1],
}
CLI_EXPECT = {"od hierarchy not geojson": "not valid JSON", "census gzip bomb": "expands to more than", "gzip bomb": "expands to more than", "huge line": "longer than 64 KB", "binary": "not a text CSV",
              "two parents": "two or more parents", "od code not in hierarchy": "999"}


#: One case per kind runs a real ``python -m dpcore`` process (its exit status and stderr are what a
#: shell sees); the others call the same ``main(argv)`` in this process, as ``__main__`` does (each
#: process paid about 1.5 s of CPU for its imports; test_suite_profile.md).
IN_ITS_OWN_PROCESS = {"gzip bomb", "two parents", "od code not in hierarchy", "census gzip bomb"}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_cli_refuses_with_one_line_and_status_2(case: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = CLI_CASES[case](tmp_path)
    if case in IN_ITS_OWN_PROCESS:
        res = _cli(*argv, cwd=tmp_path)
        returncode, stderr = res.returncode, res.stderr
    else:
        returncode, stderr = main(argv), capsys.readouterr().err
    assert returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert CLI_EXPECT[case] in lines[0]
    assert not (tmp_path / "out").exists()
