"""The review record of every release (issue 25, item 7): ``deployment.yaml`` and ``review.html``.

``deployment.yaml`` states the release in the fields of the OpenDP Deployments Registry
(``opendp/deployments-registry-data``, ``schemas/deployments-schema.yaml``: ``url_slug``, ``status``,
``tier`` and ``deployment`` with ``basic``, ``dp_variant``, ``privacy_loss``, ``deployment_model``,
``accounting``, ``implementation`` and ``administrative``; the schema's research basis: Ghazi,
Nanayakkara & Vadhan, arXiv 2509.13509).  It is built from the record (``release.json``) alone
(:func:`deployment`), so any kind's record gives one.  The fields a curator alone knows (the
curator's name, intended use, region, the registry's authors) are left for the curator to fill and
say so; ``status`` is ``Draft``.

``review.html`` is a one-page summary a disclosure officer can sign: what was released, the budget
and what it has been spent on, the errors per level and the finest level fit for use
(:func:`level_guidance`: the finest level whose median coefficient of variation is under a threshold,
0.3 by default, the Census "aggregate blocks" advice made per release), the reliability rule if any,
what is not protected, and a sign-off block.  Both are written with the other files of the release
(:func:`with_review`, called by :meth:`dpcore.core.mechanism.KindRelease.files` and by the
reliability rule's file editor).  Nothing here reads data: the inputs are the record and the
published table.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from dpcore.core import review_words as words

__all__ = ["CV_THRESHOLD", "REVIEW_FILES", "deployment", "deployment_yaml", "level_guidance", "review_html",
           "to_yaml", "with_guidance", "with_review", "without_review"]

#: The review files every release gets.
REVIEW_FILES = ("deployment.yaml", "review.html")

#: The default threshold on a level's median coefficient of variation (noise SD / published count).
CV_THRESHOLD = 0.3

_TO_FILL = "(to be filled in by the curator)"
_VARIANT = {"pure epsilon-DP": "Pure DP", "rho-zCDP": "Zero-concentrated DP",
            "approximate (epsilon, delta)-DP": "Approximate DP"}


def _find(obj: Any, keys: frozenset[str]) -> Iterator[tuple[str, Any]]:
    """Every (key, value) under ``obj`` whose key is in ``keys`` (depth first)."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if k in keys:
                yield k, v
            if isinstance(v, dict | list | Mapping):  # a leaf (most of a record) has nothing under it
                yield from _find(v, keys)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, dict | list | Mapping):
                yield from _find(v, keys)


def _parameters(rec: Mapping[str, Any]) -> dict[str, float]:
    """The privacy parameters of the registry (epsilon, delta, rho) from the record's privacy section."""
    priv = rec.get("privacy", {})
    cost = priv.get("cost") or {}
    if cost.get("definition") == "pure":
        return {"epsilon": float(cost["value"])}
    out: dict[str, float] = {}
    if cost.get("definition") == "zcdp":
        out["rho"] = float(cost["value"])
        reading = priv.get("approx_dp")
        row = reading[-1] if isinstance(reading, list) and reading else reading
        if isinstance(row, Mapping):
            out.update(epsilon=float(row["epsilon"]), delta=float(row["delta"]))
    for k in ("epsilon", "delta"):
        if k not in out and isinstance(priv.get(k), (int, float)):
            out[k] = float(priv[k])
    return out


def unprotected(rec: Mapping[str, Any]) -> list[str]:
    """The quantities of a release that DP does not protect or that were chosen outside its budget.

    >>> unprotected({"kind": "od", "privacy": {"unit_of_privacy": "one person, at most 3 trips"},
    ...              "total_public": True, "ledger": {"accounted": False}})[:2]
    ['The public domain (grid, area hierarchy or O/D tree) and every parameter set by the curator.', 'The contribution cap of the unit of privacy: one person, at most 3 trips.']
    """
    return [code for code, _words in _unprotected_items(rec)]


def _unprotected_items(rec: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """Each quantity DP does not protect, once: the record's own text (:func:`unprotected`, the
    deployment entry) and its plain words (review.html, :func:`_unprotected_words`; an exact total
    said once, however many of the record's keys state it)."""
    unit = rec.get("privacy", {}).get("unit_of_privacy")
    items = [("The public domain (grid, area hierarchy or O/D tree) and every parameter set by the curator.",
              ["The public geography (the map's extent and grid, the list of areas, or the tree of trips between "
               "areas) and every setting the curator chose."])]
    if unit:
        items.append((f"The contribution cap of the unit of privacy: "
                      f"{unit if isinstance(unit, str) else json.dumps(unit)}.",
                      [f"How much one unit of privacy may contribute: {words.unit_sentence(unit)}."]))
    said_total = False
    for key, val in _find(rec, frozenset({"invariants", "total_public", "public_total"})):
        if val in (None, False, [], {}):
            continue
        lines = []
        for total, line in words.invariant_words(key, val):
            if not (total and said_total):
                lines.append(line)
            said_total = said_total or total
        items.append((f"Held exactly (invariant, not noisy): {key} = {json.dumps(val)[:300]}.", lines))
    if rec.get("data_users", {}).get("conditional_on_partition"):
        text = ("The partition was chosen from the data, paid for from the budget; the published counts are "
                "unbiased only given that partition.")
        items.append((text, [text]))
    if rec.get("reliability"):
        items.append(("The reliability rule's suppression pattern (post-processing of noisy values; protected, but "
                      "it hides cells).",
                      ["Which cells the reliability rule hid (it reads only noisy values: protected, but it hides "
                       "cells)."]))
    if not rec.get("ledger", {}).get("accounted", True):
        # no words: review.html says so once, where it states the budget (review_words.budget_sentence)
        items.append(("This release was charged to no budget (--no-budget): its cost is not recorded in any ledger.",
                      []))
    return items


def deployment(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The registry entry of one release record (``release.json`` as a dict), as a dict.

    >>> d = deployment({"kind": "points", "release_id": "0123456789ab", "created": "2024-05-01T12:34+00:00",
    ...                 "software": {"name": "dpcore", "version": "1.0"},
    ...                 "mechanism": {"name": "ug", "title": "Uniform grid", "reference": "Qardaji 2013"},
    ...                 "privacy": {"definition": "pure epsilon-DP", "cost": {"definition": "pure", "value": 1.0},
    ...                             "unit_of_privacy": "one record (point)"}, "notes": [], "ledger": {"accounted": False}})
    >>> d["deployment"]["privacy_loss"]["privacy_parameters"], d["deployment"]["basic"]["publication_date"]
    ({'epsilon': 1.0}, '2024-05-01')
    """
    priv = rec.get("privacy", {})
    mech = rec.get("mechanism", {})
    kind = rec.get("kind", "")
    ledger = rec.get("ledger", {})
    sw = rec.get("software", {})
    composition = priv.get("composition") or "sequential: the costs of the release's measurements add up to its cost"
    if ledger.get("accounted"):
        composition += (f"; charged to a budget of {json.dumps(ledger.get('cap'))} ({ledger.get('definition')}), "
                        f"spent {ledger.get('spent')} over {len(ledger.get('entries', []))} release(s) as of this one")
    post = ["Every published value is computed from the noisy measurements only (post-processing, no budget)."]
    post += [str(n) for n in rec.get("notes", [])]
    if rec.get("reliability"):
        post.append(f"Reliability rule: {json.dumps(rec['reliability'].get('rule'))}.")
    return {
        "url_slug": f"dpcore-{kind}-{rec.get('release_id', '')}",
        "status": "Draft",
        "tier": 3,
        "deployment": {
            "basic": {
                "name": f"{mech.get('title') or mech.get('name')} release of {kind} ({rec.get('release_id')})",
                "data_curators": [_TO_FILL],
                "description": f"Differentially private {kind} counts made with dpcore ({mech.get('name')}).",
                "intended_use": _TO_FILL,
                "data_product_type": "Summary statistics",
                "data_product_region": _TO_FILL,
                "publication_date": str(rec.get("created", "1900-01-01"))[:10],
            },
            "dp_variant": {
                "variant_name": _VARIANT.get(str(priv.get("definition")), "Custom"),
                "data_domain": f"Records of the curator's {kind} table within the public domain stated in release.json.",
                "unprotected_quantities": "\n".join(f"- {u}" for u in unprotected(rec)),
            },
            "privacy_loss": {
                "privacy_unit": str(priv.get("unit_of_privacy")),
                "privacy_unit_details": str(priv.get("neighbouring_relation", "add or remove one unit of privacy")),
                "privacy_parameters": _parameters(rec),
                "privacy_parameters_details": str(priv.get("approx_dp_conversion", "")) or "As stated in release.json.",
            },
            "deployment_model": {
                "model_name": "Central",
                "release_type": "Many releases" if len(ledger.get("entries", [])) > 1 else "One release",
                "release_type_details": "Releases of the same data are charged to one budget (release.json: ledger).",
                "data_source_type": "Static",
                "access_type": "Non-interactive",
            },
            "accounting": {"post_processing": "\n".join(f"- {p}" for p in post), "composition": composition},
            "implementation": {
                "preprocessing_and_hyperparameter_tuning": "Parameters are set from public inputs in a data-free "
                "plan before the data are read; data-dependent choices inside a mechanism are paid for from its "
                "budget (release.json: plan, mechanism.params).",
                "mechanisms": f"- {mech.get('title') or mech.get('name')}: {mech.get('reference', '')}\n"
                              f"- Noise: {priv.get('noise', 'exact discrete samplers')}; "
                              f"{priv.get('randomness', 'the operating system CSPRNG')}.\n"
                              f"- Software: {sw.get('name', 'dpcore')} {sw.get('version', '')}.",
                "justification": "See the expected errors per level in release.json and review.html.",
            },
            "administrative": {
                "sources": "release.json (the machine-readable record of this release)",
                "notes": f"Generated by {sw.get('name', 'dpcore')} {sw.get('version', '')} from release "
                         f"{rec.get('release_id')}; fields marked '{_TO_FILL}' need the curator.",
                "registry_authors": [_TO_FILL],
            },
        },
    }


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v), ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def to_yaml(obj: Any, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists, strings (multi-line ones as literal blocks) and numbers.

    >>> print(to_yaml({"a": 1, "b": ["x"], "c": {"d": "two\\nlines"}}), end="")
    a: 1
    b:
      - "x"
    c:
      d: |-
        two
        lines
    """
    pad = " " * indent
    lines: list[str] = []
    items = obj.items() if isinstance(obj, Mapping) else [(None, v) for v in obj]
    for k, v in items:
        head = f"{pad}{k}:" if k is not None else f"{pad}-"
        if isinstance(v, (Mapping, list)) and v:
            lines.append(head + "\n" + to_yaml(v, indent + 2).rstrip("\n"))
        elif isinstance(v, str) and "\n" in v:
            body = "\n".join(f"{pad}  {ln}" if ln else "" for ln in v.split("\n"))
            lines.append(f"{head} |-\n{body}")
        else:
            lines.append(f"{head} {_scalar(v) if not isinstance(v, (Mapping, list)) else json.dumps(v)}")
    return "\n".join(lines) + "\n"


def deployment_yaml(rec: Mapping[str, Any]) -> bytes:
    """``deployment.yaml``: :func:`deployment` as YAML."""
    return _yaml_of(deployment(rec))


def _yaml_of(dep: Mapping[str, Any]) -> bytes:
    head = "# OpenDP Deployments Registry entry (schemas/deployments-schema.yaml), generated by dpcore.\n"
    return (head + to_yaml(dep)).encode("utf-8")


#: Tables up to this many bytes are read by the csv module: pyarrow's reader costs a millisecond to
#: start, more than a series' daily table takes to read (365 of them a year).
_SMALL = 1 << 16
#: Bytes of a large published table parsed at a time (:func:`_arrow_columns`).
_BLOCK = 1 << 24
#: The guidance's numeric columns (:func:`level_guidance`), read with ``level``.
_NUMBERS = ("noisy_count", "noise_sd")
#: A points table's rectangle columns: its levels' cell sizes (:func:`_cell_sizes`).
_RECT = ("west", "south", "east", "north")
#: A published table as read: level codes, their names, and numeric columns by name.
_Table = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # empty or a missing-value word: not a number
        return float("nan")


def _small_columns(data: bytes, wanted: tuple[str, ...] = _NUMBERS) -> _Table | None:
    """The level codes, level names and the ``wanted`` numeric columns the table has (name -> values,
    NaN where empty or not a number) of a small published table (the codes index the names, which
    come in the order the table lists them), or None without a ``level`` column."""
    rows = csv.reader(io.StringIO(data.decode("utf-8")))
    head = next(rows, None)
    if head is None or "level" not in head:
        return None
    have = [c for c in wanted if c in head]
    at = [head.index(c) for c in ("level", *have)]
    try:
        parsed = [[r[i] for i in at] for r in rows if r]
    except IndexError:  # a short row: not a table of this kind
        return None
    names = list(dict.fromkeys(p[0] for p in parsed))  # in the order the table lists them
    code = {name: i for i, name in enumerate(names)}
    return (np.array([code[p[0]] for p in parsed], dtype=np.int64), np.array(names, dtype=object),
            {c: np.array([_number(p[j]) for p in parsed], dtype=np.float64) for j, c in enumerate(have, 1)})


def _arrow_columns(data: bytes, wanted: tuple[str, ...] = _NUMBERS) -> _Table | None:
    """:func:`_small_columns` of a large table, read by pyarrow a block at a time (the rows of 8 M
    census blocks are never parsed into one table: only the level codes and the columns' numbers are
    kept)."""
    import pyarrow.csv as pacsv

    end = data.find(b"\n")
    head = next(csv.reader([(data if end < 0 else data[:end]).decode("utf-8").rstrip("\r")]), [])
    if "level" not in head:
        return None
    have = [c for c in wanted if c in head]
    names: dict[Any, int] = {}  # the levels in the order the file lists them
    codes: list[np.ndarray] = []
    parts: dict[str, list[np.ndarray]] = {c: [] for c in have}
    try:
        reader = pacsv.open_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(block_size=_BLOCK),
                                convert_options=pacsv.ConvertOptions(
            include_columns=["level", *have], column_types={"level": "string", **dict.fromkeys(have, "float64")}))
        for batch in reader:
            # the levels as codes into their names: no text object per row
            enc = batch.column("level").dictionary_encode(null_encoding="encode")
            local = np.array([names.setdefault(v, len(names)) for v in enc.dictionary.to_pylist()], dtype=np.int64)
            codes.append(local[enc.indices.to_numpy(zero_copy_only=False)])
            for c in have:
                parts[c].append(batch.column(c).to_numpy(zero_copy_only=False))
    except (KeyError, ValueError, OSError):  # not a table of this kind (pyarrow's ArrowInvalid)
        return None
    return (np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64), np.asarray(list(names), dtype=object),
            {c: np.asarray(np.concatenate(v) if v else [], dtype=np.float64) for c, v in parts.items()})


def _read(data: bytes | None, rec: Mapping[str, Any] | None = None) -> _Table | None:
    """The published table's levels and the numbers the review reads from it, parsed once: the
    guidance's columns, and a points release's rectangles (:func:`_cell_sizes`)."""
    if not data:
        return None
    wanted = _NUMBERS + (_RECT if isinstance(rec, Mapping) and rec.get("kind") == "points" else ())
    return _small_columns(data, wanted) if len(data) <= _SMALL else _arrow_columns(data, wanted)


def level_guidance(release_csv: bytes | None, threshold: float = CV_THRESHOLD) -> dict[str, Any] | None:
    """Per level of ``release.csv`` (in the order the file lists them, coarse to fine): the number of
    cells, the median noise SD and the median coefficient of variation ``noise_sd / max(count, 1)`` at
    the expected count (read as the published count, its unbiased estimate: the guidance uses no data
    beyond the release); and ``use_level``, the finest level whose median CV is under ``threshold``
    (None when no level is).  None when the table has no ``level``, ``noisy_count`` and ``noise_sd``.
    Every release's ``release.json`` carries it as ``level_guidance`` (:func:`with_review`).

    >>> g = level_guidance(b"level,noisy_count,noise_sd\\nstate,100,3\\ncounty,20,3\\ncounty,4,3\\n")
    >>> g["use_level"], [r["median_cv"] for r in g["levels"]]
    ('state', [0.03, 0.45])
    """
    return _guidance(_read(release_csv), threshold)


def _guidance(table: _Table | None, threshold: float) -> dict[str, Any] | None:
    """:func:`level_guidance` of a table read by :func:`_read`."""
    if table is None or not set(_NUMBERS) <= set(table[2]):
        return None
    codes, names, cols = table
    count, sd = cols["noisy_count"], cols["noise_sd"]
    finite = np.isfinite(sd) & np.isfinite(count)
    rows, use = [], None
    for i, name in enumerate(names.tolist()):
        m = (codes == i) & finite
        if not m.any():
            continue
        cv = float(np.median(sd[m] / np.maximum(count[m], 1.0)))
        rows.append({"level": str(name), "cells": int(m.sum()), "median_noise_sd": float(np.median(sd[m])),
                     "median_cv": round(cv, 6), "under_threshold": cv < threshold})
        if cv < threshold:
            use = str(name)
    return {"threshold": threshold, "levels": rows, "use_level": use,
            "statement": (f"Use at level {use} or coarser: the finest level whose median coefficient of variation "
                          f"is under {threshold:g}." if use is not None else
                          f"No level has a median coefficient of variation under {threshold:g}: use sums of cells.")}


#: The style of a table cell (inline: the page has no style sheet, so no brace in it).
_CELL = ' style="border:1px solid #999;padding:2px 6px;text-align:left"'
_SIGN = ' style="border:1px solid #999;height:2em;min-width:16em"'


def _table(rows: list[list[Any]], head: list[str]) -> str:
    cells = "".join(f"<th{_CELL}>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td{_CELL}>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table style="border-collapse:collapse"><tr>{cells}</tr>{body}</table>'


def _cell_sizes(rec: Mapping[str, Any], table: _Table | None) -> dict[str, tuple[float, float]]:
    """Per level of a points ``release.csv`` (as :func:`_read` read it): the median east-west and
    north-south size (km) of its rectangles, in the record's own km per degree (``domain``); {}
    without rectangles."""
    if rec.get("kind") != "points" or table is None or not set(_RECT) <= set(table[2]):
        return {}
    code, names, cols = table
    dom = rec.get("domain") or {}
    b, g, km = dom.get("bounds") or {}, dom.get("grid") or {}, dom.get("cell_size_km") or {}
    try:
        kx = km["east_west"] * g["cols"] / (b["east"] - b["west"])
        ky = km["north_south"] * g["rows"] / (b["north"] - b["south"])
    except (KeyError, TypeError, ZeroDivisionError):
        mid = math.radians((float(b.get("south", 0.0)) + float(b.get("north", 0.0))) / 2.0)
        kx, ky = 111.32 * math.cos(mid), 110.57
    w = (cols["east"] - cols["west"]) * kx
    h = (cols["north"] - cols["south"]) * ky
    return {str(name): (float(np.nanmedian(w[code == i])), float(np.nanmedian(h[code == i])))
            for i, name in enumerate(names.tolist()) if (code == i).any()}


def _percent(x: float) -> str:
    return f"{words.number(100.0 * x)} %"


def _levels_html(rec: Mapping[str, Any], g: Mapping[str, Any] | None, table: _Table | None) -> str:
    """The errors per level (by name) and the finest level fit for use, in words."""
    if not g:
        return "<p>No table of errors per level could be made from the published table; see release.json.</p>"
    e = html.escape
    t = float(g["threshold"])
    names = words.level_names(rec, [str(r["level"]) for r in g["levels"]], _cell_sizes(rec, table))
    rows = [[names[str(r["level"])], words.number(int(r["cells"])), f"± {words.number(r['median_noise_sd'])}",
             _percent(r["median_cv"]), "yes" if r["under_threshold"] else "no"] for r in g["levels"]]
    out = _table(rows, ["level", "number of published values", "typical error (median noise SD)",
                        "typical error as a share of the value (median coefficient of variation)",
                        f"reliable on its own (under {_percent(t)})?"])
    use = g.get("use_level")
    if use is not None:
        advice = (f"Use at {words.advice_level(rec, names.get(str(use), str(use)))} or coarser: at that level the typical error is under "
                  f"{_percent(t)} of the published value (median coefficient of variation under {t:g}). Values "
                  "at finer levels are best used added up over several of them.")
    else:
        advice = (f"No level is reliable on its own: at every level the typical error is {_percent(t)} of the "
                  f"published value or more (median coefficient of variation {t:g} or more). Use sums of cells.")
    return out + f"<p><b>{e(advice)}</b></p>"


def _unprotected_words(rec: Mapping[str, Any]) -> list[str]:
    """:func:`unprotected` in words (the deployment entry keeps the record's own text)."""
    return [line for _code, lines in _unprotected_items(rec) for line in lines]


def review_html(rec: Mapping[str, Any], release_csv: bytes | None = None, threshold: float = CV_THRESHOLD,
                dep: Mapping[str, Any] | None = None) -> bytes:
    """``review.html``: the one-page summary a disclosure officer signs (see the module's docstring),
    every line in plain words (:mod:`dpcore.core.review_words`): the record's codes are said, never
    printed; ``dep``: :func:`deployment` of ``rec``, when already made."""
    return _review_page(rec, _read(release_csv, rec), threshold, dep)


def _review_page(rec: Mapping[str, Any], table: _Table | None, threshold: float,
                 dep: Mapping[str, Any] | None) -> bytes:
    """:func:`review_html` of the published table as :func:`_read` read it."""
    d = (dep if dep is not None else deployment(rec))["deployment"]
    priv, ledger, mech, sw = rec.get("privacy", {}), rec.get("ledger", {}), rec.get("mechanism", {}), rec.get("software", {})
    g = rec.get("level_guidance") or _guidance(table, threshold)
    e = html.escape
    params = d["privacy_loss"]["privacy_parameters"]
    cost = priv.get("cost") if isinstance(priv.get("cost"), Mapping) else None
    approx: Mapping[str, Any] | None = params if "epsilon" in params else None
    reading = priv.get("approx_dp")  # an (ε, δ) mechanism's own reading, where the cost is no pure or zCDP one
    reading = reading[-1] if isinstance(reading, list) and reading else reading
    if approx is None and isinstance(reading, Mapping) and "epsilon" in reading:
        approx = reading
    guarantee = words.cost_words(cost, approx)
    budget = e(words.budget_sentence(ledger))
    horizon = next((words.horizon_words(k, v) for k, v in _find(rec, frozenset({"horizon", "periods", "n_periods"}))
                    if v not in (None, [], {})), None)
    budget += f" Horizon: {e(horizon)}." if horizon else " Horizon: one release (no series of periods is stated)."
    rel = rec.get("reliability")
    reliability = (f"Rule {e(str(rel.get('rule')))}: {e(str(rel.get('description') or ''))}. "
                   f"{words.number(rel.get('suppressed'))} cells suppressed, {words.number(rel.get('flagged'))} "
                   f"flagged; every noisy value is kept in {e(str(rel.get('values_in')))}."
                   if rel else "No reliability rule was applied.")
    created = str(rec.get("created") or "at a time not stated").replace("T", " ").replace("+00:00", " UTC")
    title = mech.get("title") or mech.get("name") or "A method not named in release.json"
    rid = rec.get("release_id") or "—"
    what = f"{title}, a release of {words.kind_words(rec.get('kind'))} (release {rid})"
    ref = f" ({mech['reference']})" if mech.get("reference") else ""
    made = " ".join(str(x) for x in (sw.get("name"), sw.get("version")) if x) or "dpcore"
    sign = "".join(f"<tr><th{_CELL}>{k}</th><td{_SIGN}></td></tr>" for k in ("Reviewer", "Approval id", "Date", "Signature"))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Disclosure review: release {e(str(rid))}</title></head>
<body style="font-family:sans-serif;max-width:50em;margin:1em auto;font-size:14px"><h1>Disclosure review</h1>
<h2>What was released</h2><p>{e(what)}, created {e(created)} by
{e(made)}.
Method: {e(str(title))}{e(ref)}.
Files: {e(', '.join(map(str, rec.get('outputs', {}).get('files', []))))}.</p>
<h2>Privacy and budget</h2><p>Privacy guarantee of this release: {e(guarantee)}.</p>
<p>Unit of privacy (whom the guarantee protects): {e(words.unit_sentence(priv.get('unit_of_privacy')))}. Two data
sets count as neighbours when {e(words.neighbour_words(priv.get('neighbouring_relation')))}.</p>
<p>{budget}</p>
<h2>Errors per level</h2>{_levels_html(rec, g, table)}
<h2>Reliability</h2><p>{reliability}</p>
<h2>What is not protected</h2><ul>{''.join(f'<li>{e(u)}</li>' for u in _unprotected_words(rec))}</ul>
<h2>Sign-off</h2><table style="border-collapse:collapse">{sign}</table>
</body></html>
"""
    return page.encode("utf-8")


def with_guidance(files: Mapping[str, bytes], threshold: float = CV_THRESHOLD) -> dict[str, bytes]:
    """``files`` with ``release.json``'s ``level_guidance`` (:func:`level_guidance` of the published
    table, ``release_full.csv`` where a reliability rule blanked ``release.csv``): the "use at level L
    or coarser" line every kind's record carries.  Unchanged without a ``release.json`` or a table
    with ``level``, ``noisy_count`` and ``noise_sd`` (a large points release whose tables come later).

    >>> out = with_guidance({"release.json": b'{"kind": "hierarchy"}',
    ...                      "release.csv": b"level,noisy_count,noise_sd\\nstate,100,3\\ncounty,5,3\\n"})
    >>> json.loads(out["release.json"])["level_guidance"]["use_level"]
    'state'
    """
    return _guided(files, threshold)[0]


def _guided(files: Mapping[str, bytes], threshold: float) -> tuple[dict[str, bytes], dict[str, Any] | None,
                                                                   _Table | None]:
    """:func:`with_guidance`'s files, their record (None without a ``release.json``) and their
    published table as :func:`_read` read it, once, for the guidance and the review page alike."""
    out = dict(files)
    if "release.json" not in out:
        return out, None, None
    rec = json.loads(out["release.json"])
    table = _read(out.get("release_full.csv") or out.get("release.csv"), rec)
    g = _guidance(table, threshold)
    if g is not None and rec.get("level_guidance") != g:
        import orjson

        rec["level_guidance"] = g
        out["release.json"] = orjson.dumps(rec, option=orjson.OPT_INDENT_2)
        rec = json.loads(out["release.json"])  # the record as written
    return out, rec, table


def without_review(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """``files`` without what :func:`with_review` adds (``deployment.yaml``, ``review.html`` and
    ``release.json``'s ``level_guidance``): stored files to apply a reliability rule to, then review
    once, as :meth:`dpcore.core.mechanism.KindRelease.files` does with ``suppress=``.

    >>> out = without_review({"release.json": b'{"kind": "points", "level_guidance": {}}', "review.html": b""})
    >>> list(out), json.loads(out["release.json"])
    (['release.json'], {'kind': 'points'})
    """
    out = {k: v for k, v in files.items() if k not in REVIEW_FILES}
    if "release.json" in out:
        rec = json.loads(out["release.json"])
        if rec.pop("level_guidance", None) is not None:
            import orjson

            out["release.json"] = orjson.dumps(rec, option=orjson.OPT_INDENT_2)
    return out


def with_review(files: Mapping[str, bytes], threshold: float = CV_THRESHOLD) -> dict[str, bytes]:
    """``files`` (a release's, name -> bytes) with ``release.json``'s ``level_guidance``
    (:func:`with_guidance`), ``deployment.yaml`` and ``review.html`` made (again) from its
    ``release.json`` and published table (``release_full.csv`` where a reliability rule blanked
    ``release.csv``).  Files without a ``release.json`` are returned unchanged."""
    out, rec, table = _guided(files, threshold)
    if rec is None:
        return out
    try:
        dep = deployment(rec)
        out["deployment.yaml"] = _yaml_of(dep)
        out["review.html"] = _review_page(rec, table, threshold, dep)
    except (KeyError, TypeError, ValueError, AttributeError) as err:  # made after the charge: never refuse
        out.pop("deployment.yaml", None)
        out["review.html"] = (f"<!DOCTYPE html><html><body><p>The review record could not be built from "
                              f"release.json ({html.escape(repr(err))}); review release.json itself.</p>"
                              "</body></html>\n").encode()
    return out
