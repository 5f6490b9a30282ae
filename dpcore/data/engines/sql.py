"""The SQL that DuckDB and Spark both run, written once with small dialect hooks.

Each engine exposes its input as a view named ``src`` (DuckDB: ``read_parquet``/``read_csv``;
Spark: a temporary view over ``spark.read``) and runs the same statements; the rules they
implement are in :mod:`dpcore.data.engines.base`.  A hand-written query (rather than an ORM or a
DataFrame API) because the three engines must agree bit for bit, and one text is the easiest
thing to keep identical.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpcore.data import persons
from dpcore.data.domain import Bounds, Grid
from dpcore.data.engines import base
from dpcore.data.text import WHITESPACE

#: pandas' default missing-value strings (``pandas.read_csv(keep_default_na=True)``): the
#: numpy engine reads them as missing, so the SQL engines must as well.
PANDAS_NA = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
             "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


@dataclass(frozen=True)
class Dialect:
    name: str
    quote: str  # identifier quote

    def q(self, col: str) -> str:
        return f"{self.quote}{col.replace(self.quote, self.quote * 2)}{self.quote}"

    def full_match(self, expr: str, regex: str) -> str:
        if self.name == "duckdb":
            return f"regexp_full_match({expr}, '{regex}')"
        return f"({expr} RLIKE '^(?:{regex})$')"

    def is_inf(self, expr: str) -> str:
        if self.name == "duckdb":
            return f"isinf({expr})"
        return f"({expr} = double('inf') OR {expr} = double('-inf'))"

    def floor(self, expr: str) -> str:
        # Spark's floor of a double is a BIGINT; exact below 2^53, which every value here is
        return f"floor({expr})"

    def strip(self, expr: str) -> str:
        """``expr`` without leading/trailing ASCII whitespace (space, \\t, \\n, \\r, \\f, \\v): the
        characters :data:`dpcore.data.text.WHITESPACE` the numpy engine strips (SQL's plain trim() strips spaces
        only, so '7\\t' and '7' would be two people)."""
        chars = " || ".join(f"chr({ord(c)})" for c in WHITESPACE)
        if self.name == "duckdb":
            # trim with a set of characters costs about a microsecond a value: skipped when the
            # first and last characters are above the space (every WHITESPACE character is not)
            return (f"CASE WHEN ascii({expr}) > 32 AND ascii(right({expr}, 1)) > 32 THEN {expr} "
                    f"ELSE trim({expr}, {chars}) END")
        return f"trim(BOTH ({chars}) FROM {expr})"

    def num(self, x: float) -> str:
        """A double literal that parses to exactly ``x`` (repr is the shortest round trip)."""
        return f"CAST('{float(x)!r}' AS DOUBLE)"


DUCKDB = Dialect("duckdb", '"')
SPARK = Dialect("spark", "`")


def _na_list() -> str:
    return ", ".join("'" + s.replace("'", "''") + "'" for s in PANDAS_NA)


def number(d: Dialect, col: str, typ: str) -> tuple[str, str]:
    """``(value, bad)`` SQL of a coordinate column: value is a DOUBLE or NULL when missing, bad is
    true for text that is not a number.  ``typ`` is ``"text"`` or ``"number"``."""
    c = d.q(col)
    if typ in ("number", "integer"):
        v = f"CAST({c} AS DOUBLE)"
        return f"CASE WHEN isnan({v}) THEN NULL ELSE {v} END", "FALSE"
    if typ == "boolean":
        return "CAST(NULL AS DOUBLE)", f"({c} IS NOT NULL)"
    t = d.strip(c)
    missing = f"({c} IS NULL OR {c} IN ({_na_list()}) OR lower({t}) IN ('', 'nan', '+nan', '-nan'))"
    v = _to_double(t)
    value, bad = f"CASE WHEN {missing} THEN NULL ELSE {v} END", f"(NOT {missing} AND {v} IS NULL)"
    if d.name != "duckdb":
        return value, bad
    # Fast path, same answer: text DuckDB reads as a number that is not NaN and has no digit
    # separator is not missing, and its value is that of the stripped text (DuckDB's cast skips
    # exactly the WHITESPACE characters around a number); every other row takes the full test.
    fast = f"TRY_CAST({c} AS DOUBLE)"
    ok = f"({fast} IS NOT NULL AND NOT isnan({fast}) AND instr({c}, '_') = 0)"
    return f"CASE WHEN {ok} THEN {fast} ELSE {value} END", f"(CASE WHEN {ok} THEN FALSE ELSE {bad} END)"


def _to_double(t: str) -> str:
    """Text -> DOUBLE or NULL.  DuckDB reads digit separators ('4_0.25' as 40.25) where pandas and
    Spark refuse them, so text with an underscore is not a number here either."""
    return f"CASE WHEN instr({t}, '_') > 0 THEN NULL ELSE TRY_CAST({t} AS DOUBLE) END"


def person(d: Dialect, col: str, typ: str) -> str:
    """Canonical person id (:func:`dpcore.data.persons.canonical_id`) or NULL when missing."""
    c = d.q(col)
    if typ == "integer":
        return f"CAST({c} AS STRING)" if d.name == "spark" else f"CAST({c} AS VARCHAR)"
    s = "STRING" if d.name == "spark" else "VARCHAR"
    if typ == "boolean":
        return f"CASE WHEN {c} IS NULL THEN NULL WHEN {c} THEN 'true' ELSE 'false' END"
    if typ == "number":
        return (f"CASE WHEN {c} IS NULL OR isnan({c}) THEN NULL WHEN {c} = {d.floor(c)} AND abs({c}) < 1e18 "
                f"THEN CAST(CAST({c} AS BIGINT) AS {s}) ELSE CAST({c} AS {s}) END")
    t = d.strip(f"CAST({c} AS {s})")
    missing = f"({c} IS NULL OR {c} IN ({_na_list()}) OR {t} = '')"
    whole = d.full_match(t, persons.NUMERIC_ID)
    as_int = f"CAST(CAST(split_part({t}, '.', 1) AS BIGINT) AS {s})"
    # pandas reads True/true/TRUE as one boolean: one person
    return (f"CASE WHEN {missing} THEN NULL WHEN {whole} THEN {as_int} "
            f"WHEN lower({t}) IN ('true', 'false') THEN lower({t}) ELSE {t} END")


def code(d: Dialect, col: str, typ: str) -> str:
    """Canonical area code (:func:`dpcore.data.code_tables.code_text`) or NULL when missing."""
    c = d.q(col)
    s = "STRING" if d.name == "spark" else "VARCHAR"
    if typ == "integer":
        return f"CAST({c} AS {s})"
    if typ == "boolean":
        return f"CASE WHEN {c} IS NULL THEN NULL WHEN {c} THEN 'True' ELSE 'False' END"
    if typ == "number":
        return (f"CASE WHEN {c} IS NULL OR isnan({c}) THEN NULL WHEN {c} = {d.floor(c)} AND abs({c}) < 9.2e18 "
                f"THEN CAST(CAST({c} AS BIGINT) AS {s}) ELSE {d.strip(f'CAST({c} AS {s})')} END")
    t = d.strip(f"CAST({c} AS {s})")
    return f"CASE WHEN {c} IS NULL OR {c} IN ({_na_list()}) OR {t} = '' THEN NULL ELSE {t} END"


def count_value(d: Dialect, col: str, typ: str) -> tuple[str, str]:
    """``(value, bad)`` of a count column: a BIGINT, bad when missing, negative or not whole."""
    c = d.q(col)
    s = "STRING" if d.name == "spark" else "VARCHAR"
    v = f"CAST({c} AS DOUBLE)" if typ in ("number", "integer") else _to_double(d.strip(f"CAST({c} AS {s})"))
    bad = f"({v} IS NULL OR isnan({v}) OR {d.is_inf(v)} OR {v} < 0 OR {v} <> {d.floor(v)} OR {v} > 9e15)"
    return f"CASE WHEN {bad} THEN 0 ELSE CAST({v} AS BIGINT) END", bad


def _cell(d: Dialect, x: str, lo: float, hi: float, step: float, n: int) -> str:
    """Index of ``x`` among ``n`` cells: searchsorted on numpy.linspace(lo, hi, n + 1) edges."""
    st, w = d.num(step), d.num(lo)
    c0 = f"least(greatest(CAST({d.floor(f'({x} - {w}) / {st}')} AS BIGINT), 0), {n - 1})"
    # linspace's edges are fl(fl(i * step) + lo): the same two operations here
    return (f"(CASE WHEN {x} < CAST({c0} AS DOUBLE) * {st} + {w} THEN {c0} - 1 "
            f"WHEN {c0} + 1 <= {n - 1} AND {x} >= CAST({c0} + 1 AS DOUBLE) * {st} + {w} THEN {c0} + 1 "
            f"ELSE {c0} END)")


def linspace_step(lo: float, hi: float, n: int) -> float:
    return (hi - lo) / n


def _fp_hash(d: Dialect, a: float, b: float, x: str = "x", y: str = "y") -> str:
    """``floor(frac(x * a + y * b) * 2^31)``: one of the fingerprint's integer hashes."""
    v = f"{x} * {d.num(a)} + {y} * {d.num(b)}"
    return f"CAST({d.floor(f'({v} - {d.floor(v)}) * {d.num(base.FP_SCALE)}')} AS BIGINT)"


def _quantised(d: Dialect, v: str) -> str:
    """:func:`dpcore.data.engines.base.quantised` of ``v``: ``floor(v * 10^7 + 0.5) / 10^7``, the same
    three IEEE operations (Spark's floor is a BIGINT, exact here: |v| * 10^7 < 2^53)."""
    scale = d.num(10.0**base.KEY_DECIMALS)
    return f"(CAST({d.floor(f'{v} * {scale} + {d.num(0.5)}')} AS DOUBLE) / {scale})"


# status codes of a point row (cell >= 0 or -1 outside for a valid row)
ST_OK, ST_MISSING_COORD, ST_MISSING_USER, ST_BAD_RANGE, ST_BAD_TEXT, ST_INFINITE = 0, 1, 2, 3, 4, 5


def _point_rows(d: Dialect, lat: tuple[str, str], lon: tuple[str, str], user: tuple[str, str] | None) -> str:
    """The CTEs ``r`` (typed x, y, u) and ``s`` (with each row's status ``st``)."""
    xv, xbad = number(d, lon[0], lon[1])
    yv, ybad = number(d, lat[0], lat[1])
    uv = person(d, *user) if user is not None else "CAST(NULL AS STRING)" if d.name == "spark" else "CAST(NULL AS VARCHAR)"
    st = (f"CASE WHEN xb OR yb THEN {ST_BAD_TEXT} "
          f"WHEN x IS NULL OR y IS NULL THEN {ST_MISSING_COORD} "
          + (f"WHEN u IS NULL THEN {ST_MISSING_USER} " if user is not None else "")
          + f"WHEN {d.is_inf('x')} OR {d.is_inf('y')} THEN {ST_INFINITE} "
          f"WHEN x < -180 OR x > 180 OR y < -90 OR y > 90 THEN {ST_BAD_RANGE} ELSE {ST_OK} END")
    # the bad-text test reads the raw columns, so it is computed beside x and y
    raw = f"SELECT {xv} AS x, {yv} AS y, {uv} AS u, ({xbad}) AS xb, ({ybad}) AS yb FROM src"
    return f"WITH r AS ({raw}),\ns AS (SELECT x, y, u, {st} AS st FROM r)"


def points_query(d: Dialect, grid: Grid, lat: tuple[str, str], lon: tuple[str, str],
                 user: tuple[str, str] | None, cap: int | None) -> str:
    """One scan: ``(st, cell, kept, n)`` groups.

    ``lat``/``lon``/``user`` are ``(column, type)``; the result rows give the number of rows per
    status, and for valid rows per cell (-1 outside) and kept/capped.
    """
    b = grid.bounds
    has_user = user is not None
    key = f"x * {d.num(persons.CAP_A)} + y * {d.num(persons.CAP_B)}"
    rank = (f"row_number() OVER (PARTITION BY st, u ORDER BY {key} - {d.floor(key)}, x, y)"
            if has_user and cap is not None else "1")
    inside = (f"x >= {d.num(b.west)} AND x <= {d.num(b.east)} AND y >= {d.num(b.south)} "
              f"AND y <= {d.num(b.north)}")
    col = _cell(d, "x", b.west, b.east, linspace_step(b.west, b.east, grid.cols), grid.cols)
    row = _cell(d, "y", b.south, b.north, linspace_step(b.south, b.north, grid.rows), grid.rows)
    kept = f"(rk <= {int(cap)})" if has_user and cap is not None else "TRUE"
    return f"""
{_point_rows(d, lat, lon, user)},
k AS (SELECT x, y, u, st, {rank} AS rk FROM s)
SELECT st,
       CASE WHEN st <> {ST_OK} THEN -2 WHEN {inside} THEN {row} * {grid.cols} + {col} ELSE -1 END AS cell,
       CASE WHEN st = {ST_OK} THEN {kept} ELSE FALSE END AS kept,
       count(*) AS n
FROM k GROUP BY 1, 2, 3
"""


def point_rows_query(d: Dialect, lat: tuple[str, str], lon: tuple[str, str],
                     user: tuple[str, str] | None, cap: int | None) -> str:
    """Every row's ``(x, y, st)`` and, with a person column and a cap, ``kept``: the rows an engine
    streams to numpy, which bins them with :meth:`Grid.cell_index` itself (DuckDB).

    One light projection per row: the cell arithmetic of :func:`points_query` in SQL read each
    coordinate a dozen times inside CASE branches, which DuckDB evaluated again for each use.
    """
    has_cap = user is not None and cap is not None
    key = f"x * {d.num(persons.CAP_A)} + y * {d.num(persons.CAP_B)}"
    if not has_cap:
        return f"{_point_rows(d, lat, lon, user)}\nSELECT x, y, CAST(st AS TINYINT) AS st FROM s"
    return f"""
{_point_rows(d, lat, lon, user)},
k AS (SELECT x, y, st, row_number() OVER (PARTITION BY st, u ORDER BY {key} - {d.floor(key)}, x, y) AS rk FROM s)
SELECT x, y, CAST(st AS TINYINT) AS st, (st = {ST_OK} AND rk <= {int(cap)}) AS kept FROM k
"""


def fingerprint_query(d: Dialect, lat: tuple[str, str], lon: tuple[str, str], user: tuple[str, str] | None,
                      bounds: Bounds | None = None) -> str:
    """``(n, s1, s2)`` over the valid rows (with ``user``, rows without an id are not valid): the
    engine-independent budget key's sums; with ``bounds`` also ``(q1, q2)`` over the same rows with
    quantised coordinates and ``(ni, i1, i2)`` over those inside ``bounds`` (the tolerant keys of
    :func:`dpcore.data.engines.base.tolerant_points_fingerprints`, which numpy computes in memory).

    A query of its own: per-cell sums in the grouped scan made it 3-5 times slower (about 1 M
    groups of 128-bit sums), while these totals cost one light pass.
    """
    exact = f"count(*) AS n, sum({_fp_hash(d, base.FP_A1, base.FP_B1)}) AS s1, sum({_fp_hash(d, base.FP_A2, base.FP_B2)}) AS s2"
    if bounds is None:
        return f"""
{_point_rows(d, lat, lon, user)}
SELECT {exact}
FROM s WHERE st = {ST_OK}
"""
    inside = (f"x >= {d.num(bounds.west)} AND x <= {d.num(bounds.east)} AND y >= {d.num(bounds.south)} "
              f"AND y <= {d.num(bounds.north)}")
    h1, h2 = (_fp_hash(d, a, b, "qx", "qy") for a, b in ((base.FP_A1, base.FP_B1), (base.FP_A2, base.FP_B2)))
    return f"""
{_point_rows(d, lat, lon, user)},
q AS (SELECT x, y, {_quantised(d, "x")} AS qx, {_quantised(d, "y")} AS qy, ({inside}) AS inb FROM s WHERE st = {ST_OK})
SELECT {exact}, sum({h1}) AS q1, sum({h2}) AS q2,
       sum(CASE WHEN inb THEN 1 ELSE 0 END) AS ni, sum(CASE WHEN inb THEN {h1} ELSE 0 END) AS i1,
       sum(CASE WHEN inb THEN {h2} ELSE 0 END) AS i2,
       min(x) AS x0, min(y) AS y0, max(x) AS x1, max(y) AS y1
FROM q
"""


def point_examples_query(d: Dialect, lat: tuple[str, str], lon: tuple[str, str], which: str) -> str:
    """A few raw values of rows with a problem (``which``: text, infinite or range; comma: text that is
    a number written with a decimal comma, which the in-memory engine reads)."""
    xv, xbad = number(d, lon[0], lon[1])
    yv, ybad = number(d, lat[0], lat[1])
    s = "STRING" if d.name == "spark" else "VARCHAR"
    comma = "[-+]?([0-9]+,[0-9]*|,[0-9]+)"  # dpcore.data.points._DECIMAL_COMMA, of the stripped text
    cond = {
        "comma": " OR ".join(f"({bad} AND {d.full_match(d.strip(f'CAST({d.q(c)} AS {s})'), comma)})"
                             for c, bad in ((lon[0], xbad), (lat[0], ybad))),
        "text": f"{xbad} OR {ybad}",
        "infinite": f"{d.is_inf(xv)} OR {d.is_inf(yv)}",
        "range": f"{xv} < -180 OR {xv} > 180 OR {yv} < -90 OR {yv} > 90",
    }[which]
    return (f"SELECT CAST({d.q(lat[0])} AS {s}) AS lat, CAST({d.q(lon[0])} AS {s}) AS lon FROM src "
            f"WHERE {cond} LIMIT 3")


def code_counts_query(d: Dialect, keys: list[tuple[str, str]], count: tuple[str, str] | None,
                      user: tuple[str, str] | None, cap: int | None, distinct: bool) -> str:
    """``(k0.., count, count_all, bad_key, bad_count, bad_user, n)`` rows.

    Rows are first grouped by (person, codes) with their multiplicity; a person's groups are
    ordered by ``md5(person · codes)`` (then the codes), and the first ``cap`` trips kept
    (``distinct``: each group counts once).  Problem rows (a missing code, count or id) are
    grouped under flags so the caller can refuse the input with their number.
    """
    s = "STRING" if d.name == "spark" else "VARCHAR"
    ks = [f"k{i}" for i in range(len(keys))]
    kexpr = ", ".join(f"{code(d, c, t)} AS {k}" for (c, t), k in zip(keys, ks, strict=True))
    if count is not None:
        wv, wbad = count_value(d, *count)
        wsel = f"{wv} AS w, ({wbad}) AS wb"
    else:
        wsel = "CAST(1 AS BIGINT) AS w, FALSE AS wb"
    usel = f"{person(d, *user)} AS u" if user is not None else f"CAST(NULL AS {s}) AS u"
    bad_key = " OR ".join(f"{k} IS NULL" for k in ks)
    bad_user = "u IS NULL" if user is not None else "FALSE"
    klist = ", ".join(ks)
    if user is None or cap is None:
        return f"""
WITH r AS (SELECT {kexpr}, {wsel}, {usel} FROM src),
f AS (SELECT {", ".join(f"CASE WHEN {bad_key} OR wb OR {bad_user} THEN NULL ELSE {k} END AS {k}" for k in ks)},
             ({bad_key}) AS bk, wb AS bw, ({bad_user}) AS bu, CASE WHEN wb THEN 0 ELSE w END AS w FROM r)
SELECT {klist}, bk, bw, bu, sum(w) AS count, sum(w) AS count_all, count(*) AS n
FROM f GROUP BY {klist}, bk, bw, bu
"""
    cat = " || chr(31) || ".join(["u", *ks])  # base.SEP
    if distinct:
        kept = f"CASE WHEN rk <= {int(cap)} THEN 1 ELSE 0 END"
    else:
        kept = f"greatest(0, least(m, {int(cap)} - (cum - m)))"
    return f"""
WITH r AS (SELECT {kexpr}, {usel} FROM src),
f AS (SELECT {", ".join(f"CASE WHEN {bad_key} OR {bad_user} THEN NULL ELSE {k} END AS {k}" for k in ks)},
             CASE WHEN {bad_key} OR {bad_user} THEN NULL ELSE u END AS u,
             ({bad_key}) AS bk, ({bad_user}) AS bu FROM r),
g AS (SELECT u, {klist}, bk, bu, count(*) AS m FROM f GROUP BY u, {klist}, bk, bu),
o AS (SELECT *, row_number() OVER (PARTITION BY u ORDER BY md5({cat}), {klist}) AS rk,
             sum(m) OVER (PARTITION BY u ORDER BY md5({cat}), {klist}
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum
      FROM g WHERE NOT bk AND NOT bu)
SELECT {klist}, FALSE AS bk, FALSE AS bw, FALSE AS bu, sum({kept}) AS count, sum(m) AS count_all, sum(m) AS n
FROM o GROUP BY {klist}
UNION ALL
SELECT {klist}, bk, FALSE AS bw, bu, 0 AS count, 0 AS count_all, sum(m) AS n FROM g WHERE bk OR bu
GROUP BY {klist}, bk, bu
"""
