"""Reliability rules for published cells: suppress (or flag) noisy values that are too unreliable.

A statistics office does not publish a count whose error is larger than the count itself; it
suppresses it, or prints it with a warning flag.  When the released cells are public (a grid, a
public list of areas, a public O/D hierarchy), such a rule reads only the noisy values and their
noise SDs, which are outputs of the mechanism and public parameters, so applying it is
**post-processing** and costs no budget (Dwork & Roth 2014, Prop. 2.1).  Two rules, alone or
together:

* **floor** ``F`` (Google's mobility reports: 100; Apple's analytics: 5): a cell is unreliable when
  its noisy value ``ŷ < F``; a value equal to the floor is published;
* **coefficient of variation** ``C`` with a normal quantile ``z`` (default 1.645, a 90 % margin):
  a cell is unreliable when ``z·σ/ŷ > C``, i.e. it is published only if ``ŷ ≥ z·σ/C`` (the ACS's
  reliability reading of a margin of error; King, "Data release rules for the ACS", Census working
  paper 2011).  The CV of a value ``ŷ ≤ 0`` is infinite, so such a cell is always unreliable under
  a CV rule; a cell whose SD is not stated (an empty ``noise_sd``) cannot be shown reliable and is
  unreliable too.  A CV exactly equal to ``C`` is published.

The text of a rule (``--suppress RULE`` on the command line, ``suppress = "RULE"`` in a config):
comma-separated ``key=value`` items, ``floor=5``, ``cv=0.3``, ``cv=0.3,z=1.96``,
``floor=5,cv=0.3``, optionally after a mode: ``suppress:`` (the default) withholds an unreliable
value, ``flag:`` keeps it and marks it (``flag:cv=0.3``).

Exactness.  The decision is made on the numbers as they are written in ``release.csv`` (their
shortest decimal form) and on the rule's decimals as typed: the comparison runs in floats and any
case within a relative 1e-9 of the threshold is decided again exactly with
:class:`fractions.Fraction`, so ``ŷ = 16.45`` with ``σ = 3`` passes ``cv=0.3`` (``1.645 × 3 / 0.3
= 16.45`` exactly) although the float product is ``16.450000000000003``.

What the data users keep.  Dropping the suppressed cells' values would bias every sum of the
published cells (Census Bureau, noisy measurement files), so :func:`apply_to_files` writes the
withheld values into ``release_full.csv`` (the data users' file: every column of ``release.csv``
with every noisy value, plus the rule's columns), and ``release.csv`` keeps every row with the
value and its interval blanked.  ``release.json`` gains a ``reliability`` section: the rule, how
many cells it suppressed or flagged (per reason) and which file keeps the values.

>>> rule = parse_rule("cv=0.3")
>>> rule.describe()
'suppress a cell if its noisy value is <= 0 or its CV 1.645·SD/value exceeds 0.3'
>>> assess(rule, [100.0, 16.45, 10.0, 0.0, -4.0], [3.0, 3.0, 3.0, 3.0, 3.0]).reasons.tolist()
['', '', 'cv', 'cv_nonpositive', 'cv_nonpositive']
>>> assess(parse_rule("flag:floor=5"), [5, 4.5, None], [1, 1, 1]).hit.tolist()
[False, True, False]
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpcore.core.record import published_csv_bytes, published_csv_frame
from dpcore.errors import ParameterError

__all__ = ["DEFAULT_Z", "FULL_FILE", "REASONS", "Assessment", "ReliabilityRule", "apply_to_files", "apply_to_frame",
           "assess", "check_rule_fits", "parse_rule", "reliability_section"]

#: The normal quantile of a 90 % margin of error (the ACS's), used when a CV rule names no ``z``.
DEFAULT_Z = Fraction("1.645")
#: The data users' file that keeps every noisy value, the suppressed ones included.
FULL_FILE = "release_full.csv"
#: The value and SD columns every kind's ``release.csv`` carries, and the interval columns that
#: would give a withheld value away (blanked with it).
VALUE_COLUMN, SD_COLUMN = "noisy_count", "noise_sd"
_INTERVAL = ("ci95_low", "ci95_high")
#: The reason codes (joined with ``;`` when a cell breaks several rules).
REASONS = {
    "floor": "the noisy value is below the floor",
    "cv": "the coefficient of variation z·SD/value exceeds the threshold",
    "cv_nonpositive": "the noisy value is <= 0, so its coefficient of variation is infinite",
    "cv_no_sd": "the cell has no stated noise SD, so its coefficient of variation is unknown",
}
_MODES = ("suppress", "flag")
_KEYS = ("floor", "cv", "z")
_TIE_RTOL = 1e-9


@dataclass(frozen=True)
class ReliabilityRule:
    """A reliability rule: a ``floor`` on the noisy value and/or a ``cv`` threshold with its ``z``,
    and what to do with an unreliable cell (``mode``: ``"suppress"`` or ``"flag"``).  The numbers
    are exact :class:`~fractions.Fraction` of the decimals typed.

    >>> ReliabilityRule(floor=Fraction(5), mode="flag").text
    'flag:floor=5'
    """

    floor: Fraction | None = None
    cv: Fraction | None = None
    z: Fraction = DEFAULT_Z
    mode: str = "suppress"

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ParameterError(f"A reliability rule either suppresses or flags, not {self.mode!r}; "
                                 "write e.g. 'cv=0.3' or 'flag:cv=0.3'.")
        if self.floor is None and self.cv is None:
            raise ParameterError("A reliability rule needs a floor or a CV threshold, e.g. 'floor=5' or 'cv=0.3'.")
        if self.cv is not None and self.cv <= 0:
            raise ParameterError(f"The CV threshold must be > 0 (got {_dec(self.cv)}), e.g. cv=0.3.")
        if self.z <= 0:
            raise ParameterError(f"z must be > 0 (got {_dec(self.z)}), e.g. z=1.645 (90 %) or z=1.96 (95 %).")

    @property
    def text(self) -> str:
        """The rule as it is typed (the canonical form of :func:`parse_rule`'s input)."""
        items = ([f"floor={_dec(self.floor)}"] if self.floor is not None else []) + (
            [f"cv={_dec(self.cv)}", f"z={_dec(self.z)}"] if self.cv is not None else [])
        if self.cv is not None and self.z == DEFAULT_Z:
            items.pop()
        return ("flag:" if self.mode == "flag" else "") + ",".join(items)

    @property
    def column(self) -> str:
        """The yes/no column the rule adds: ``suppressed`` or ``flagged``."""
        return "suppressed" if self.mode == "suppress" else "flagged"

    @property
    def reason_column(self) -> str:
        return "suppression_reason" if self.mode == "suppress" else "flag_reason"

    def describe(self) -> str:
        parts = []
        if self.floor is not None:
            parts.append(f"its noisy value is below {_dec(self.floor)}")
        if self.cv is not None:
            parts.append(f"its noisy value is <= 0 or its CV {_dec(self.z)}·SD/value exceeds {_dec(self.cv)}")
        return f"{self.mode} a cell if " + " or ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.text, "mode": self.mode, "floor": _num(self.floor), "cv": _num(self.cv),
                "z": _num(self.z) if self.cv is not None else None, "description": self.describe()}


def _dec(q: Fraction | None) -> str:
    """A Fraction of a typed decimal written back as that decimal (``3/10`` -> ``0.3``)."""
    if q is None:
        return ""
    from decimal import Decimal

    return format(Decimal(q.numerator) / Decimal(q.denominator), "f")


def _num(q: Fraction | None) -> float | None:
    return None if q is None else float(q)


def parse_rule(text: str | ReliabilityRule | None) -> ReliabilityRule | None:
    """The rule a ``--suppress`` text states (None for an empty text).

    >>> parse_rule("floor=5,cv=0.3,z=1.96").to_dict()["z"], parse_rule(" flag: cv=0.25 ").text
    (1.96, 'flag:cv=0.25')
    >>> parse_rule("cv=30%").cv
    Fraction(3, 10)
    >>> parse_rule("cv=0.3,ceiling=4")
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: Unknown key 'ceiling' in the reliability rule 'cv=0.3,ceiling=4'; use floor=F, \
cv=C and z=Z, e.g. 'floor=5', 'cv=0.3,z=1.96' or 'flag:cv=0.3'.
    """
    if text is None or isinstance(text, ReliabilityRule):
        return text
    raw = str(text).strip()
    if not raw:
        return None
    mode = "suppress"
    head, colon, rest = raw.partition(":")
    if colon and head.strip().lower() in _MODES:
        mode, raw = head.strip().lower(), rest
    how = "use floor=F, cv=C and z=Z, e.g. 'floor=5', 'cv=0.3,z=1.96' or 'flag:cv=0.3'"
    values: dict[str, Fraction] = {}
    for item in (i.strip() for i in raw.split(",")):
        key, eq, value = (s.strip().lower() for s in item.partition("="))
        if not eq or not value:
            raise ParameterError(f"'{item}' in the reliability rule '{text}' is not key=value; {how}.")
        if key not in _KEYS:
            raise ParameterError(f"Unknown key '{key}' in the reliability rule '{text}'; {how}.")
        if key in values:
            raise ParameterError(f"'{key}' is given twice in the reliability rule '{text}'; give it once.")
        values[key] = _fraction(value, key, text)
    if "z" in values and "cv" not in values:
        raise ParameterError(f"z belongs to a CV rule: add cv=C to the reliability rule '{text}' (e.g. cv=0.3,z=1.96).")
    return ReliabilityRule(floor=values.get("floor"), cv=values.get("cv"), z=values.get("z", DEFAULT_Z), mode=mode)


def _fraction(value: str, key: str, text: str) -> Fraction:
    pct = value.endswith("%")
    try:
        q = Fraction(value[:-1].strip() if pct else value)
    except (ValueError, ZeroDivisionError):
        raise ParameterError(f"{key}={value} in the reliability rule '{text}' is not a number; "
                             f"write e.g. {key}={'5' if key == 'floor' else '0.3'}.") from None
    return q / 100 if pct else q


# ---------------------------------------------------------------------------------------------
# the decision
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assessment:
    """The rule's verdict per cell: ``hit`` (unreliable: suppressed or flagged) and the reason
    codes of :data:`REASONS` (``""`` for a reliable cell; several joined with ``;``)."""

    hit: np.ndarray
    reasons: np.ndarray

    def counts(self) -> dict[str, int]:
        """How many cells each reason hit (a cell with two reasons counts under both)."""
        out: dict[str, int] = {}
        texts, n = np.unique(self.reasons[self.hit].astype(str), return_counts=True)
        for r, k in zip(texts.tolist(), n.tolist(), strict=True):
            for code in r.split(";"):
                out[code] = out.get(code, 0) + k
        return dict(sorted(out.items()))


def _exact(x: float) -> Fraction:
    """The decimal as written (the shortest repr of the float, which is what a CSV holds)."""
    return Fraction(repr(float(x)))


def _greater(lhs: np.ndarray, rhs: np.ndarray, lhs_exact: Any, rhs_exact: Any, where: np.ndarray) -> np.ndarray:
    """``lhs > rhs`` where ``where`` (False elsewhere), near-ties decided exactly by the two callables
    (index -> Fraction)."""
    out = where & (lhs > rhs)
    with np.errstate(invalid="ignore"):
        close = np.abs(lhs - rhs) <= _TIE_RTOL * np.maximum(np.abs(lhs), np.abs(rhs))
    near = np.flatnonzero(where & close)
    for i in near:
        out[i] = lhs_exact(i) > rhs_exact(i)
    return out


def _floats(values: Any) -> np.ndarray:
    """Numbers as float64, anything that is not a number (None, "") as NaN."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
        return values.astype(np.float64, copy=False)
    return np.asarray(pd.to_numeric(pd.Series(values, dtype=object), errors="coerce"), dtype=np.float64)


def assess(rule: ReliabilityRule, values: Sequence[float | None] | np.ndarray,
           sds: Sequence[float | None] | np.ndarray) -> Assessment:
    """Which cells ``rule`` finds unreliable, from their noisy ``values`` and noise ``sds`` alone.

    A missing value (None or NaN: nothing was published) is never hit.  Vectorised; only cells
    within a relative 1e-9 of a threshold are decided one by one, exactly.

    >>> r = parse_rule("floor=5,cv=0.5,z=2")
    >>> a = assess(r, [12, 11.99, 4, 20, 6], [3, 3, 0.5, float("nan"), 0])
    >>> a.hit.tolist(), a.reasons.tolist(), a.counts()
    ([False, True, True, True, False], ['', 'cv', 'floor', 'cv_no_sd', ''], {'cv': 1, 'cv_no_sd': 1, 'floor': 1})
    """
    y, sd = _floats(values), _floats(sds)
    if y.shape != sd.shape:
        raise ParameterError(f"{y.size} values but {sd.size} SDs: give one SD per value.")
    has = ~np.isnan(y)
    codes: list[tuple[str, np.ndarray]] = []
    if rule.floor is not None:
        f = float(rule.floor)
        below = _greater(np.full_like(y, f), y, lambda i: rule.floor, lambda i: _exact(y[i]), has)
        codes.append(("floor", below))
    if rule.cv is not None:
        nonpos = has & (y <= 0)
        no_sd = has & ~nonpos & (np.isnan(sd) | (sd < 0))
        ok = has & ~nonpos & ~no_sd
        z, c = float(rule.z), float(rule.cv)
        with np.errstate(invalid="ignore"):
            lhs, rhs = np.where(ok, z * sd, 0.0), np.where(ok, c * y, 0.0)
        cv_hit = _greater(lhs, rhs, lambda i: rule.z * _exact(sd[i]), lambda i: rule.cv * _exact(y[i]), ok)
        codes += [("cv", cv_hit), ("cv_nonpositive", nonpos), ("cv_no_sd", no_sd)]
    hit = np.zeros(y.shape, dtype=bool)
    reasons = np.full(y.shape, "", dtype=object)
    for code, mask in codes:
        reasons[mask] = np.where(hit[mask], reasons[mask] + ";" + code, code)
        hit |= mask
    return Assessment(hit, reasons)


# ---------------------------------------------------------------------------------------------
# the files
# ---------------------------------------------------------------------------------------------


def apply_to_frame(frame: pd.DataFrame, rule: ReliabilityRule) -> tuple[pd.DataFrame, pd.DataFrame, Assessment]:
    """``(published, full, assessment)`` from a ``release.csv`` read as text (every column ``str``).

    ``full`` is ``frame`` with the rule's two columns (``suppressed``/``flagged`` as
    ``true``/``false``, and the reason codes); ``published`` equals it under ``flag:``, and under
    ``suppress`` has the value and its interval blanked in the suppressed rows.

    >>> f = pd.DataFrame({"code": ["a", "b"], "noisy_count": ["9", "2"], "noise_sd": ["1", "1"],
    ...                   "ci95_low": ["7", "0"], "ci95_high": ["11", "4"]})
    >>> pub, full, _ = apply_to_frame(f, parse_rule("floor=5"))
    >>> pub.values.tolist()
    [['a', '9', '1', '7', '11', 'false', ''], ['b', '', '1', '', '', 'true', 'floor']]
    >>> full["noisy_count"].tolist()
    ['9', '2']
    """
    check_rule_fits(rule, list(frame.columns))
    a = assess(rule, frame[VALUE_COLUMN].replace("", None), frame[SD_COLUMN].replace("", None))
    full = frame.copy()
    full[rule.column] = np.where(a.hit, "true", "false")
    full[rule.reason_column] = a.reasons
    published = full.copy()
    if rule.mode == "suppress":
        for c in (VALUE_COLUMN, *(c for c in _INTERVAL if c in frame.columns)):
            published.loc[a.hit, c] = ""
    return published, full, a


_csv_frame = published_csv_frame
_csv_bytes = published_csv_bytes


def _key_text(columns: Sequence[Sequence[Any]]) -> list[str]:
    """One text key per row: the columns' values as text (None -> "") joined by a unit separator."""
    texts = [["" if v is None else str(v) for v in col] for col in columns]
    return ["\x1f".join(parts) for parts in zip(*texts, strict=True)] if len(texts) > 1 else (texts or [[]])[0]


def _mark(props: list[dict[str, Any]], rule: ReliabilityRule, hit_keys: set[str], key_cols: list[str]) -> None:
    """Give every feature's properties the rule's yes/no property; blank the withheld values."""
    keys = _key_text([[p.get(k) for p in props] for k in key_cols])
    hit = np.fromiter((k in hit_keys for k in keys), dtype=bool, count=len(keys))
    for p, h in zip(props, hit.tolist(), strict=True):
        p[rule.column] = h
    if rule.mode == "suppress":
        for i in np.flatnonzero(hit):
            for c in (VALUE_COLUMN, *_INTERVAL):
                if c in props[i]:
                    props[i][c] = None


_FEATURE = b'{"type":"Feature"'


def _geojson_arrow(data: bytes, rule: ReliabilityRule, hit_keys: set[str], key_cols: list[str]) -> bytes | None:
    """:func:`_geojson` vectorised in Arrow for a file of one feature per line ending ``}}``, whose
    key properties are numbers (the points writer's form); None for any other file."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if not data.endswith(b"\n") or b"\x1e" in data:
        return None
    try:
        arr = pacsv.read_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(column_names=["line"],
                                                                               block_size=1 << 24),
                             parse_options=pacsv.ParseOptions(delimiter="\x1e", quote_char=False),
                             convert_options=pacsv.ConvertOptions(column_types={"line": pa.large_string()},
                                                                  strings_can_be_null=False)
                             ).column("line").combine_chunks()
    except pa.ArrowInvalid:
        return None
    is_feat = pc.starts_with(arr, _FEATURE.decode())
    feats = pc.filter(arr, is_feat)
    if len(arr) != data.count(b"\n") or len(feats) < 2:
        return None
    parts = []
    for k in key_cols:  # a number-valued member of the (flat) properties object
        m = pc.extract_regex(feats, f'"properties":\\{{(?:[^{{}}]*,)?"{k}":(?P<v>-?[0-9][^,}}]*)')
        if m.null_count:
            return None
        parts.append(pc.struct_field(m, [0]))
    comma = pc.ends_with(feats, "}},")
    if not pc.all(pc.or_(comma, pc.ends_with(feats, "}}"))).as_py():
        return None
    ends = (pc.if_else(comma, pc.utf8_slice_codeunits(feats, 0, -3), pc.utf8_slice_codeunits(feats, 0, -2)),
            pc.if_else(comma, pa.scalar("}},", pa.large_string()), pa.scalar("}}", pa.large_string())))
    sep = pa.scalar("\x1f", pa.large_string())
    key = pc.binary_join_element_wise(*parts, sep) if len(parts) > 1 else parts[0]
    hit = pc.is_in(pc.cast(key, pa.large_string()), value_set=pa.array(list(hit_keys), pa.large_string()))
    flag = pc.if_else(hit, pa.scalar(f',"{rule.column}":true', pa.large_string()),
                      pa.scalar(f',"{rule.column}":false', pa.large_string()))
    new = pc.binary_join_element_wise(ends[0], flag, ends[1], pa.scalar("", pa.large_string()))
    if rule.mode == "suppress":
        names = "|".join((VALUE_COLUMN, *_INTERVAL))
        withheld = pc.replace_substring_regex(pc.filter(new, hit), pattern=f'("(?:{names})":)[^,}}]*',
                                              replacement="\\1null")
        new = pc.replace_with_mask(new, hit, withheld)
    out = pc.replace_with_mask(arr, is_feat, new)
    return _joined(b"", out)[1:]


def _geojson(data: bytes, rule: ReliabilityRule, hit_keys: set[str], key_cols: list[str]) -> bytes:
    """A GeoJSON whose features of withheld cells lose their value and interval (matched on the
    CSV's key columns), and every feature gets the rule's yes/no property.  A file with one
    feature per line and numeric keys (the points writer's) is edited in Arrow without parsing a
    geometry (:func:`_geojson_arrow`); any other file is parsed whole."""
    import orjson

    fast = _geojson_arrow(data, rule, hit_keys, key_cols)
    if fast is not None:
        return fast
    doc = orjson.loads(data)
    feats = doc.get("features") or []
    for f in feats:
        if not isinstance(f.get("properties"), dict):
            f["properties"] = {}
    _mark([f["properties"] for f in feats], rule, hit_keys, key_cols)
    return orjson.dumps(doc) + b"\n"


def _lines(data: bytes) -> Any:
    """The lines after the header as one Arrow string column (read by Arrow's CSV reader with a
    delimiter the file does not hold, so a line is one value)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    tbl = pacsv.read_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(column_names=["line"], skip_rows=1),
                         parse_options=pacsv.ParseOptions(delimiter="\x1e", quote_char=False),
                         convert_options=pacsv.ConvertOptions(column_types={"line": pa.large_string()},
                                                              strings_can_be_null=False))
    return tbl.column("line").combine_chunks()


def _joined(head: bytes, rows: Any) -> bytes:
    """``head`` and the Arrow string rows as one text, a line each (the rows' buffer, not a Python list)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(rows) == 0:
        return head + b"\n"
    arr = pc.binary_join_element_wise(rows, pa.scalar("\n", pa.large_string()), pa.scalar("", pa.large_string()))
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    body = arr.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return b"".join((head, b"\n", memoryview(body)))


def _plain_csv(data: bytes, rule: ReliabilityRule) -> tuple[bytes, bytes, Assessment, pd.DataFrame]:
    """The rule on a CSV with no quoted field (no ``"``) and ``\\n`` line ends, vectorised in Arrow:
    ``(published, full, assessment, the key and value columns as text)``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    head = data.split(b"\n", 1)[0]
    header = next(csv.reader([head.decode("utf-8")]))
    check_rule_fits(rule, header)
    want = [c for c in header if c in (VALUE_COLUMN, SD_COLUMN, *_KEY_COLUMNS)]
    tbl = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
        include_columns=want, column_types={c: pa.string() for c in want}, strings_can_be_null=False))
    rows = _lines(data)
    if len(rows) != tbl.num_rows or len(set(header)) != len(header):
        raise ValueError("not a plain CSV")
    a = assess(rule, _numbers(tbl.column(VALUE_COLUMN)), _numbers(tbl.column(SD_COLUMN)))
    hit = pa.array(a.hit)
    flags = pc.if_else(hit, pa.scalar(",true,", pa.large_string()), pa.scalar(",false,", pa.large_string()))
    sep = pa.scalar("", pa.large_string())
    full_rows = pc.binary_join_element_wise(rows, flags, pa.array(a.reasons.tolist(), pa.large_string()), sep)
    quote = '"' if head.startswith(b'"') else ""  # Arrow's writer quotes the header's names
    head += f",{quote}{rule.column}{quote},{quote}{rule.reason_column}{quote}".encode()
    full = _joined(head, full_rows)
    cols = pd.DataFrame({c: tbl.column(c).to_pylist() for c in want if c in _KEY_COLUMNS or c == VALUE_COLUMN})
    if rule.mode == "flag":
        return full, full, a, cols
    withheld = pc.filter(full_rows, hit)
    for j in (header.index(c) for c in (VALUE_COLUMN, *_INTERVAL) if c in header):
        withheld = pc.replace_substring_regex(withheld, pattern=f"^((?:[^,]*,){{{j}}})[^,]*", replacement="\\1")
    return _joined(head, pc.replace_with_mask(full_rows, hit, withheld)), full, a, cols


def _numbers(col: Any) -> np.ndarray:
    """An Arrow text column as float64 (empty text -> NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)
    return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)


#: Columns that name a released cell in some kind's ``release.csv`` (the GeoJSON join keys).
_KEY_COLUMNS = ("id", "level", "code", "parent", "origin", "destination")


def apply_to_files(files: Mapping[str, bytes], rule: ReliabilityRule | str | None, *,
                   marked: Collection[str] = ()) -> dict[str, bytes]:
    """A release's files (name -> bytes, as every kind's ``*_files`` makes them) with ``rule`` applied.

    ``release.csv`` gets the rule's columns (and, under ``suppress``, blank values and intervals in
    the suppressed rows); ``release_full.csv`` (:data:`FULL_FILE`, data users' file) keeps every
    noisy value with the same columns; GeoJSON files get the same withholding, matched on the
    cell's key properties; ``release.json`` gains the ``reliability`` section and the new file in
    ``outputs.files``.  Post-processing of published values only: no budget, no data.  A ``None``
    rule returns the files unchanged.  ``marked``: GeoJSON files the kind already wrote with the rule
    applied (the points writer, in its one pass), kept as they are.  The review record (``deployment.yaml``, ``review.html``)
    is not made here: :meth:`dpcore.core.mechanism.KindRelease.files` (``suppress=``) makes it once,
    after the rule.

    >>> import orjson
    >>> files = {"release.csv": b"level,code,noisy_count,noise_sd\\n0,a,3,1.5\\n0,b,30,1.5\\n",
    ...          "release.json": orjson.dumps({"outputs": {"files": ["release.csv", "release.json"]}})}
    >>> out = apply_to_files(files, "cv=0.3")
    >>> print(out["release.csv"].decode(), end="")
    level,code,noisy_count,noise_sd,suppressed,suppression_reason
    0,a,,1.5,true,cv
    0,b,30,1.5,false,
    >>> print(out["release_full.csv"].decode().splitlines()[1])
    0,a,3,1.5,true,cv
    >>> rec = orjson.loads(out["release.json"])
    >>> rec["reliability"]["suppressed"], rec["reliability"]["values_in"], rec["outputs"]["files"]
    (1, 'release_full.csv', ['release.csv', 'release_full.csv', 'release.json'])
    """
    rule = parse_rule(rule)
    if rule is None:
        return dict(files)
    if "release.csv" not in files:
        raise ParameterError("A reliability rule is applied to release.csv, and this release has none.")
    data = files["release.csv"]
    try:
        if b'"' in data[data.find(b"\n"):] or b"\r" in data:
            raise ValueError("quoted fields")
        pub_b, full_b, a, frame = _plain_csv(data, rule)
    except ValueError:  # quoted fields or odd line ends: the CSV reader's round trip
        frame = _csv_frame(data)
        published, full, a = apply_to_frame(frame, rule)
        pub_b, full_b = _csv_bytes(published), _csv_bytes(full)
    keys = [c for c in _KEY_COLUMNS if c in frame.columns]
    # one feature per row (points, hierarchy counts, flows); a group-size release has several rows
    # (sizes) per feature, whose GeoJSON values are left as they are and the record says so
    per_row = bool(keys) and not bool(frame.duplicated(keys).any())
    hit_keys = {k for k, h in zip(_key_text([frame[k].tolist() for k in keys]), a.hit.tolist(), strict=True)
                if h} if per_row else set()
    out: dict[str, bytes] = {}
    for name, data in files.items():
        if name == "release.csv":
            out[name], out[FULL_FILE] = pub_b, full_b
        elif name.endswith(".geojson") and per_row and name not in marked:
            out[name] = _geojson(data, rule, hit_keys, keys)
        elif name != "release.json":
            out[name] = data
    if "release.json" in files:
        cells = int(np.count_nonzero(frame[VALUE_COLUMN].ne("")))
        geo = [n for n in files if n.endswith(".geojson")]
        note = None if per_row or not geo else (
            f"{', '.join(geo)} unchanged: each feature holds several rows of release.csv, so its values are not "
            "withheld there; read release.csv for the rule")
        out["release.json"] = _record(files["release.json"], rule, a, cells, note)
    return out


def reliability_section(rule: ReliabilityRule, a: Assessment, cells: int) -> dict[str, Any]:
    """The ``reliability`` section of ``release.json``: the rule, the counts and where the values are.

    >>> r = parse_rule("floor=5")
    >>> reliability_section(r, assess(r, [1, 9], [1, 1]), 2)["suppressed"]
    1
    """
    n = int(np.count_nonzero(a.hit))
    withheld = rule.mode == "suppress"
    return {
        **rule.to_dict(),
        "cells": int(cells),
        "suppressed": n if withheld else 0,
        "flagged": 0 if withheld else n,
        "by_reason": a.counts(),
        "reasons": {k: v for k, v in REASONS.items()
                    if (k == "floor" and rule.floor is not None) or (k.startswith("cv") and rule.cv is not None)},
        "columns": [rule.column, rule.reason_column],
        "values_in": FULL_FILE,
        "post_processing": ("The rule reads only the noisy values and their noise SDs (public parameters): it is "
                            "post-processing of the release and costs no budget."),
        "note": (f"{FULL_FILE} is the data users' file: it keeps every noisy value, the {rule.column} ones included "
                 "(dropping them would bias any sum of cells); release.csv " +
                 ("withholds the suppressed values and their intervals." if withheld
                  else "keeps every value and marks the flagged ones.")),
    }


def _record(data: bytes, rule: ReliabilityRule, a: Assessment, cells: int, geojson_note: str | None) -> bytes:
    import orjson

    rec = orjson.loads(data)
    rec["reliability"] = reliability_section(rule, a, cells)
    if geojson_note:
        rec["reliability"]["geojson"] = geojson_note
    files = rec.get("outputs", {}).get("files") if isinstance(rec.get("outputs"), dict) else None
    if isinstance(files, list) and FULL_FILE not in files:
        at = files.index("release.csv") + 1 if "release.csv" in files else len(files)
        files.insert(at, FULL_FILE)
    return orjson.dumps(rec, option=orjson.OPT_INDENT_2)


def check_rule_fits(rule: ReliabilityRule | None, columns: Sequence[str]) -> None:
    """Refuse a rule on a ``release.csv`` whose header (``columns``) has no value or no SD column.

    It is called where the rule is applied (:func:`apply_to_files`, :func:`apply_to_frame`), i.e. on
    the published table after the release is made and charged; every kind's ``release.csv`` has
    both columns, and the CLI refuses the one table without them (census marginals) before any
    data is read.

    >>> check_rule_fits(parse_rule("floor=5"), ["noisy_total"])
    Traceback (most recent call last):
    ...
    dpcore.errors.ParameterError: A reliability rule needs the columns noisy_count and noise_sd in release.csv; this \
release has no noisy_count, noise_sd. Release without --suppress.
    """
    if rule is None:
        return
    missing = [c for c in (VALUE_COLUMN, SD_COLUMN) if c not in columns]
    if missing:
        raise ParameterError(f"A reliability rule needs the columns {VALUE_COLUMN} and {SD_COLUMN} in release.csv; "
                             f"this release has no {', '.join(missing)}. Release without --suppress.")
