"""The one record envelope of every release, and the one release id.

Every release, whatever its kind, is recorded as the same envelope: the software, the privacy
definition and cost, the unit of privacy, the budget it was spent from (or "not accounted"),
its release id and creation time, the data-free plan, and the kind's own body (the record the
kind already writes: levels, tables, files).  Nothing here reads data: the envelope holds only
public facts and outputs of a DP mechanism (``DESIGN.md``, privacy rules 3 and 5).

The parts every kind's record shares live here, once: the header (:func:`header`), the ledger
as of the charge (:func:`ledger_section`, at the record's top-level key ``ledger`` for every
kind), the approximate-DP reading of a zCDP cost (:func:`approx_dp_reading`, the conversion of
Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
Prop. 12 / Cor. 13), the JSON-able values (:func:`jsonable`), the schemas
(:func:`validate_record`) and the one writer of a release's files (:func:`write_files`: a
temporary folder renamed into place, so a folder never holds half a release).

The release id is random (a prefix of a uuid4), never a hash of the data or a timestamp, so
it says nothing about the data and two releases never share one.  The creation time is kept to
the minute in UTC.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import io
import json
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

import dpcore
from dpcore.data.csv_safe import append_constant_column, csv_bytes, pandas_csv
from dpcore.errors import InputError
from dpcore.privacy.budget import (
    APPROX_DP_DELTAS,
    PrivacyCost,
    zcdp_to_approx_dp,
    zcdp_to_approx_dp_classic,
)
from dpcore.privacy.ledger import Ledger, minute_now

__all__ = [
    "APPROX_DP_CONVERSION",
    "INTERVAL_COLUMNS",
    "approx_dp_reading",
    "build_record",
    "created_now",
    "stamp_created",
    "with_fields",
    "schema_of",
    "header",
    "jsonable",
    "ledger_section",
    "mark_not_accounted",
    "published_csv_bytes",
    "published_csv_frame",
    "new_release_id",
    "record_schema",
    "validate_record",
    "write_files",
]

#: The interval columns every kind's ``release.csv`` carries (empty where not defined): the
#: standard deviation of a released count's error from the noise and its 95 % interval.
INTERVAL_COLUMNS = ("noise_sd", "ci95_low", "ci95_high")

#: The one citation of the (ε, δ) reading of a zCDP cost, in every record.
APPROX_DP_CONVERSION = ("Canonne, Kamath & Steinke, The Discrete Gaussian for Differential Privacy, "
                        "NeurIPS 2020, Prop. 12 / Cor. 13; epsilon_classic (where given): "
                        "rho + 2 sqrt(rho ln(1/delta)) (Bun & Steinke, TCC 2016, Prop. 1.3)")

#: The keys of every record's shared top (:func:`build_record`); a kind's body holds none of them.
_SHARED_KEYS = frozenset({"schema", "software", "release_id", "created", "kind", "mechanism", "privacy",
                          "plan", "notes", "ledger"})

_DEFINITION = {"pure": "pure epsilon-DP", "zcdp": "rho-zCDP"}

#: What a release charged to no budget (``--no-budget``) says first: at the record's top
#: (``accounted``), in its privacy section, as its first note, in ``release.csv`` (the column
#: ``budget``) and in every GeoJSON file (the member ``budget``) (issue 26 item 16).
NOT_ACCOUNTED = ("NOT ACCOUNTED: this release was charged to no budget (--no-budget); its privacy cost was "
                 "counted against nobody's total, so it is a test or dry run, not a protected publication.")
#: The value of the ``accounted`` column of a release charged to no budget.
NOT_ACCOUNTED_CELL = "no (--no-budget: charged to no budget)"


def new_release_id() -> str:
    """A fresh release id: the first 12 hex digits of a random uuid4 (48 random bits).

    >>> rid = new_release_id()
    >>> len(rid), all(c in "0123456789abcdef" for c in rid), rid != new_release_id()
    (12, True, True)
    """
    return uuid.uuid4().hex[:12]


def with_fields(obj: Any, **values: Any) -> Any:
    """``obj`` with ``values`` set on the fields it has (a dataclass; anything else as it is).

    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class R:
    ...     created: str = ""
    >>> with_fields(R(), created="t", release_id="x"), with_fields(3, created="t")
    (R(created='t'), 3)
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    names = {f.name for f in dataclasses.fields(obj)}
    stamp = {k: v for k, v in values.items() if k in names}
    return dataclasses.replace(obj, **stamp) if stamp else obj


def stamp_created(obj: Any, created: str) -> Any:
    """``obj`` (a release, or an envelope with its kind's release as ``inner``) stamped with the
    time of its charge, the envelope and its ``inner`` alike: the one place a release's
    ``created`` is set after the charge (:class:`dpcore.core.session.Session`)."""
    obj = with_fields(obj, created=created)
    inner = getattr(obj, "inner", None)
    if inner is not None and dataclasses.is_dataclass(obj):
        obj = dataclasses.replace(obj, inner=with_fields(inner, created=created))
    return obj


def created_now(now: _dt.datetime | None = None) -> str:
    """The creation time, to the minute, in UTC (ISO 8601).

    >>> created_now(_dt.datetime(2024, 5, 1, 12, 34, 56, tzinfo=_dt.UTC))
    '2024-05-01T12:34+00:00'
    >>> created_now(_dt.datetime(2024, 5, 1, 14, 34, tzinfo=_dt.timezone(_dt.timedelta(hours=2))))
    '2024-05-01T12:34+00:00'
    """
    if now is None:
        return minute_now()  # the ledger's clock: a record and its ledger entry state one time
    return now.astimezone(_dt.UTC).replace(second=0, microsecond=0).isoformat(timespec="minutes")


def header(schema: str, kind: str, release_id: str, created: str) -> dict[str, Any]:
    """The first keys of every release record (one copy for every kind of data): the record's
    schema, the software that made it, the release id and the time the budget was charged.

    >>> sorted(header("dpcore-release/1", "points", "0123456789ab", "2024-05-01T12:34+00:00"))
    ['created', 'kind', 'release_id', 'schema', 'software']
    """
    return {"schema": schema, "software": {"name": "dpcore", "version": dpcore.__version__},
            "release_id": release_id, "created": created, "kind": kind}


def ledger_section(ledger: Ledger | None) -> dict[str, Any]:
    """The ledger part of every release record (one copy for every kind of data).

    The budget the release was charged to, with its unit of privacy, every entry and every cap
    change, but never the ledger's key (a keyed hash of the data); or, for a release charged to no
    budget (``--no-budget``), the statement that it was not accounted.

    >>> ledger_section(None)["accounted"]
    False
    >>> from dpcore.privacy.budget import pure
    >>> sorted(ledger_section(Ledger(pure(1.0), dataset="k1:abc")))[:4]
    ['accounted', 'cap', 'cap_changes', 'definition']
    """
    if ledger is None:
        return {"accounted": False, "note": "not accounted: this release was charged to no budget (--no-budget)"}
    d = ledger.to_dict()
    d.pop("dataset", None)  # the budget's key: a keyed hash of the data, never exported
    return {"accounted": True, **d}


def build_record(
    *,
    schema: str,
    kind: str,
    release_id: str,
    created: str,
    mechanism: Mapping[str, Any],
    cost: PrivacyCost | None,
    unit_of_privacy: Any,
    body: Mapping[str, Any],
    notes: Sequence[str],
    ledger: Ledger | None = None,
    privacy: Mapping[str, Any] | None = None,
    plan: Sequence[Mapping[str, Any]] | None = None,
    definition: str | None = None,
    approx_dp_at: float | None = None,
) -> dict[str, Any]:
    """The record of one release, for every kind: the shared top and the kind's ``body``.

    The shared top is the header (:func:`header`), the mechanism (``name``, ``title``,
    ``reference`` and the kind's other mechanism keys), the privacy section (``definition``,
    ``cost``, ``unit_of_privacy``, the kind's other privacy keys in ``privacy``, and the (ε, δ)
    reading of a zCDP cost from :func:`approx_dp_reading` with its one citation), the data-free
    plan rows (``Plan.rows_dict()``, where the release has its core plan), the notes and the
    ledger as of the charge (:func:`ledger_section`).  ``body`` holds what only the kind has
    (levels, tables, invariants, outputs) at the record's top level.  ``definition`` overrides
    the definition's name (a cost of None: an approximate-DP mechanism); ``approx_dp_at`` states
    the reading at one δ (``approx_dp``, with the classic bound) beside the table of every δ
    (``approx_dp_table``).  The result holds plain JSON values only, so it equals the
    ``release.json`` written from it.

    >>> from dpcore.privacy.budget import zcdp
    >>> rec = build_record(schema="dpcore-release/1", kind="points", release_id="0123456789ab",
    ...                    created="2024-05-01T12:34+00:00", cost=zcdp(0.5), unit_of_privacy="one record",
    ...                    mechanism={"name": "ug", "title": "Uniform grid", "reference": "Qardaji et al. 2013"},
    ...                    body={"levels": [(1, 2)]}, notes=["All counts are noisy."], plan=[{"level": 0}])
    >>> list(rec)  # doctest: +NORMALIZE_WHITESPACE
    ['schema', 'software', 'release_id', 'created', 'kind', 'accounted', 'mechanism', 'privacy', 'levels', 'plan',
     'notes', 'ledger']
    >>> rec["privacy"]["definition"], rec["levels"], rec["ledger"]["accounted"], len(rec["privacy"]["approx_dp"])
    ('rho-zCDP', [[1, 2]], False, 4)
    >>> rec["accounted"], rec["privacy"]["accounted"], rec["notes"][0][:13]  # charged to no ledger
    (False, False, 'NOT ACCOUNTED')
    """
    accounted = ledger is not None
    priv: dict[str, Any] = {
        "accounted": accounted,
        **({} if accounted else {"not_accounted": NOT_ACCOUNTED}),
        "definition": definition or _DEFINITION[cost.definition],  # type: ignore[union-attr]
        "cost": cost.to_dict() if cost is not None else None,
        "unit_of_privacy": unit_of_privacy,
        **(privacy or {}),
    }
    if cost is not None and cost.definition == "zcdp":
        if approx_dp_at is None:
            priv["approx_dp"] = approx_dp_reading(cost)
        else:
            reading = approx_dp_reading(cost, {*APPROX_DP_DELTAS, float(approx_dp_at)}, classic=True) or []
            priv["approx_dp"] = next(r for r in reading if r["delta"] == float(approx_dp_at))
            priv["approx_dp_table"] = [{"delta": r["delta"], "epsilon": r["epsilon"]} for r in reading]
        priv["approx_dp_conversion"] = APPROX_DP_CONVERSION
    shared = ("name", "title", "reference")
    rec: dict[str, Any] = {
        **header(schema, kind, release_id, created),
        "accounted": accounted,
        "mechanism": {**{k: mechanism.get(k) for k in shared}, **{k: v for k, v in mechanism.items() if k not in shared}},
        "privacy": priv,
    }
    clash = sorted(set(body) & _SHARED_KEYS)
    if clash:
        raise ValueError(f"A record body must not hold the shared keys {clash}.")
    rec.update(body)
    if plan is not None:
        rec["plan"] = [dict(r) for r in plan]
    rec["notes"] = ([] if accounted else [NOT_ACCOUNTED]) + list(notes)
    rec["ledger"] = ledger_section(ledger)
    return jsonable(rec)


def published_csv_frame(data: bytes) -> pd.DataFrame:
    """A published CSV read back as text, every cell as written (for post-processing that writes it
    back with :func:`published_csv_bytes`)."""
    return pd.read_csv(io.BytesIO(data), dtype=str, na_filter=False, keep_default_na=False)


def published_csv_bytes(frame: pd.DataFrame) -> bytes:
    """A frame of :func:`published_csv_frame` text written back: every cell is the published text
    (already escaped against formulas) or post-processing's own safe words, so it is written
    verbatim, quoted only where RFC 4180 needs it (:func:`dpcore.data.csv_safe.csv_bytes` checks again)."""
    return csv_bytes(frame, pandas_csv, numbers_as_text=True)


def mark_not_accounted(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files of a release charged to no budget, marked so in each table a data user opens:
    ``release.csv`` gains the column ``accounted`` (:data:`NOT_ACCOUNTED_CELL` on every row) and
    every GeoJSON file the top-level members ``accounted`` (false) and ``not_accounted``
    (:data:`NOT_ACCOUNTED`; foreign members, RFC 7946 §6.1).
    ``release.json`` says it itself (:func:`build_record`).

    >>> out = mark_not_accounted({"release.csv": b"cell,noisy\\n1,3\\n", "a.geojson": b'{"type":"FeatureCollection"}'})
    >>> out["release.csv"].decode().splitlines()
    ['cell,noisy,accounted', '1,3,no (--no-budget: charged to no budget)']
    >>> geo = json.loads(out["a.geojson"])
    >>> geo["accounted"], geo["not_accounted"][:13], geo["type"]
    (False, 'NOT ACCOUNTED', 'FeatureCollection')
    """
    out = dict(files)
    csv_head = bytes(out.get("release.csv", b"")[:4096]).split(b"\n", 1)[0].rstrip(b"\r")
    # a file its writer marked already (the O/D writer does, in its one write) is kept as it is
    if "release.csv" in out and out["release.csv"].strip() and b"accounted" not in csv_head.split(b","):
        # a plain file gains the column line by line (same bytes as the round trip through pandas);
        # any kind's file, possibly a stored one: not vouched for, so every field is checked
        quick = append_constant_column(bytes(out["release.csv"]), "accounted", NOT_ACCOUNTED_CELL, vouched=False)
        if quick is None:
            frame = published_csv_frame(out["release.csv"])
            frame["accounted"] = NOT_ACCOUNTED_CELL
            quick = published_csv_bytes(frame)
        out["release.csv"] = quick
    member = ('{"accounted":false,"not_accounted":' + json.dumps(NOT_ACCOUNTED) + ",").encode("utf-8")
    for name, data in files.items():
        if not name.endswith(".geojson") or b'"not_accounted"' in bytes(data[:400]):
            continue
        text = bytes(data).lstrip()
        if text.startswith(b"{") and b'"not_accounted"' not in text[:400]:
            rest = text[1:].lstrip()
            out[name] = member[:-1] + b"}" if rest.startswith(b"}") else member + rest
    return out


def approx_dp_reading(cost: PrivacyCost, deltas: Iterable[float] = APPROX_DP_DELTAS, *,
                      classic: bool = False) -> list[dict[str, float]] | None:
    """The (ε, δ)-DP reading of a zCDP cost at each δ (largest δ first), or None for a pure-ε cost.

    The one place a record converts ρ to (ε, δ) (Canonne, Kamath & Steinke, NeurIPS 2020,
    Cor. 13; :data:`APPROX_DP_CONVERSION`).  ``classic`` adds the looser classic bound
    ``epsilon_classic`` (Bun & Steinke 2016) that the O/D paper's budget inputs use.

    >>> from dpcore.privacy.budget import pure
    >>> approx_dp_reading(pure(1.0)) is None
    True
    >>> r = approx_dp_reading(PrivacyCost("zcdp", 0.5), (1e-6, 1e-5))
    >>> [row["delta"] for row in r], r[0]["epsilon"] < r[1]["epsilon"]
    ([1e-05, 1e-06], True)
    """
    if cost.definition != "zcdp":
        return None
    rho = float(cost.value)
    rows = []
    for d in sorted({float(d) for d in deltas}, reverse=True):
        row = {"delta": d, "epsilon": zcdp_to_approx_dp(rho, d)}
        if classic:
            row["epsilon_classic"] = zcdp_to_approx_dp_classic(rho, d)
        rows.append(row)
    return rows


def jsonable(obj: Any) -> Any:
    """Plain JSON values: tuples as lists, numpy scalars unwrapped, dates as ISO text, non-finite
    floats as null.

    >>> import numpy as np
    >>> jsonable({"a": (np.int64(2), float("nan")), 3: _dt.date(2024, 5, 1)})
    {'a': [2, None], '3': '2024-05-01'}
    """
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "shape", None) == ():
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    return obj


def record_schema(name: str = "envelope") -> dict[str, Any]:
    """The JSON Schema ``dpcore/schemas/<name>.schema.json``: ``envelope`` (the shared top of
    every record, which refers to the body schema of the record's kind and mechanism) or a body
    schema (``release``, ``hierarchy_release``, ``census_release``, ``census_marginals``,
    ``od_release``)."""
    text = resources.files("dpcore").joinpath(f"schemas/{name}.schema.json").read_text("utf-8")
    return json.loads(text)


#: The schema of each record ``kind`` (the release form), and of a ``(kind, mechanism)`` pair whose
#: body differs: the census marginal tables (the matrix mechanism) have a body of their own.
_SCHEMA_OF_KIND = {"points": "release", "hierarchy": "hierarchy_release", "census": "census_release",
                   "od": "od_release", ("census", "matrix"): "census_marginals"}


def schema_of(record: Mapping[str, Any]) -> str:
    """The name of the schema a record follows, chosen by its ``kind`` and mechanism.

    >>> schema_of({"kind": "census", "mechanism": {"name": "matrix"}}), schema_of({"kind": "od"})
    ('census_marginals', 'od_release')
    """
    kind = str(record.get("kind"))
    mech = record.get("mechanism")
    name = mech.get("name") if isinstance(mech, Mapping) else mech
    return _SCHEMA_OF_KIND.get((kind, str(name)), _SCHEMA_OF_KIND[kind])


#: The body schemas the envelope composes (and which refer back to its shared sections).
_BODY_SCHEMAS = ("release", "hierarchy_release", "census_release", "census_marginals", "od_release")
_SCHEMA_BASE = "https://dpcore.invalid/schemas/"


@functools.cache
def _registry() -> Any:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    return Registry().with_resources(
        (f"{_SCHEMA_BASE}{n}.schema.json", Resource.from_contents(record_schema(n), default_specification=DRAFT202012))
        for n in ("envelope", *_BODY_SCHEMAS)
    )


def validate_record(record: Mapping[str, Any], name: str | None = None) -> None:
    """Raise ``jsonschema.ValidationError`` if the record breaks its schema: by default the
    envelope (the shared top: header, mechanism, privacy, plan, notes, ledger) and, through it,
    the body schema of the record's kind and mechanism (:func:`schema_of`), which the envelope
    composes; or only the schema ``name`` (a body schema alone checks the kind's keys only).
    A key that neither the envelope nor the body declares is refused.

    >>> validate_record({"kind": "points"})
    Traceback (most recent call last):
    ...
    jsonschema.exceptions.ValidationError: 'schema' is a required property
    ...
    """
    import jsonschema

    def first_error(schema_name: str) -> Any:
        schema = record_schema(schema_name)
        cls = jsonschema.validators.validator_for(schema)
        return jsonschema.exceptions.best_match(cls(schema, registry=_registry()).iter_errors(dict(record)))

    error = first_error(name or "envelope")
    if error is not None and name is None and error.validator == "unevaluatedProperties":
        # a body that breaks its schema leaves its keys unevaluated in the envelope: name the cause
        try:
            body = schema_of(record)
        except KeyError:
            body = None
        error = (first_error(body) if body is not None else None) or error
    if error is not None:
        raise error


def write_files(files: Mapping[str, bytes], out_dir: str | Path) -> list[Path]:
    """Write a release's files into ``out_dir`` at once: into a temporary folder beside it, then
    moved into place, so a failure leaves no half-written release.  Files already in ``out_dir``
    under other names stay; those under these names are replaced.  Returns the paths, in order.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "out"
    >>> [p.name for p in write_files({"release.csv": b"a\\n", "release.json": b"{}"}, d)]
    ['release.csv', 'release.json']
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"The output '{out}' exists and is a file, not a folder. Choose another --out folder.")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, data in files.items():
            if Path(name).name != name:
                raise ValueError(f"A release file name must not hold a folder: {name!r}.")
            (tmp / name).write_bytes(bytes(data))
        if not out.exists():
            os.replace(tmp, out)  # the whole folder appears at once
            tmp = None
        else:
            _swap_in(tmp, out, files)
            tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return [out / name for name in files]


def _swap_in(tmp: Path, out: Path, files: Mapping[str, bytes]) -> None:
    """Put the complete folder ``tmp`` in the place of the existing ``out``, keeping ``out``'s files
    under other names (linked, not copied): the folder is never a mix of two releases' files.  A
    kill between the two renames leaves the new folder complete beside it (``.NAME.*``).  Where the
    folder cannot be renamed (the working directory, a mount point) or holds more than files (folders,
    links: never moved) the files are replaced one by one.
    An error in the second rename puts the earlier folder back; only a kill exactly between the two
    renames leaves the earlier folder at ``.NAME.old.*/NAME`` and the new one, complete, at ``.NAME.*``."""
    others = list(out.iterdir())
    if any(o.is_symlink() or not o.is_file() for o in others):  # folders, links: never moved, replace files
        for name in files:
            os.replace(tmp / name, out / name)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    for other in others:
        if other.name not in files and not (tmp / other.name).exists():
            try:
                os.link(other, tmp / other.name)
            except OSError:
                shutil.copy2(other, tmp / other.name)
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
    try:
        os.replace(out, old / out.name)
    except OSError:
        shutil.rmtree(old, ignore_errors=True)
        for name in files:
            os.replace(tmp / name, out / name)  # each file appears whole
        shutil.rmtree(tmp, ignore_errors=True)
        return
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old / out.name, out)  # put the earlier release back, whole
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
