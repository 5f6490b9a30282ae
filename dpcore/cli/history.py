"""``history``: every dataset in the budget database, its releases and its charges not delivered;
``history --serve ID --out DIR`` writes a stored release's files again (issue 26, items 8 and 20).

Serving a stored release draws no noise and charges nothing: the files are the bytes kept when the
release was made (:mod:`dpcore.privacy.ledger_journal`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dpcore.errors import InputError, ParameterError

__all__ = ["add_history_parser", "cmd_history"]


def add_history_parser(sub: Any) -> argparse.ArgumentParser:
    h = sub.add_parser("history", help="every dataset in the budget database, its releases and undelivered charges; "
                                       "--serve writes a stored release's files again")
    h.add_argument("--budget-db", metavar="FILE", help="the budget database (default: the app's)")
    h.add_argument("--json", action="store_true", help="print the list as JSON")
    h.add_argument("--serve", metavar="RELEASE_ID",
                   help="write the stored files of this release (no new noise, no new charge) into --out")
    h.add_argument("--out", metavar="DIR", help="the folder --serve writes into")
    return h


def _pending_text(d: dict[str, Any]) -> str:
    where = d["target"].removeprefix("folder:") if d["target"] != "app" else "the app"
    if d["state"] == "stored":
        return (f"charge #{d['idx'] + 1}: charged, not delivered to {where}; stored as release {d['release_id']}: "
                f"python -m dpcore history --serve {d['release_id']} --out DIR")
    return (f"charge #{d['idx'] + 1}: charged, not delivered to {where}; the run stopped before its files were "
            "kept, so there is nothing to re-serve (the budget stays spent)")


def cmd_history(args: argparse.Namespace) -> int:
    from dpcore.core.record import write_files
    from dpcore.core.session import Session
    from dpcore.privacy import ledger_journal
    from dpcore.privacy.ledger_history import datasets

    store = Session.open(args.budget_db or None).store
    if args.serve:
        if not args.out:
            raise ParameterError("--serve writes a stored release's files: give the folder with --out DIR.")
        found = next((r for d in datasets(store) for r in _all_releases(d) if r["release_id"] == args.serve), None)
        if found is None:
            raise InputError(f"There is no stored release {args.serve!r} in the budget database {store.path}. "
                             "List them with 'python -m dpcore history'.")
        if not found["files"]:
            raise InputError(f"The files of release {args.serve} were removed from the budget database; its budget "
                             "entry stays, but it cannot be served again.")
        names = found["summary"].get("order") or found["files"]
        paths = write_files({n: store.release_file(args.serve, n) for n in names if n in found["files"]}, args.out)
        ledger_journal.delivered(store, args.serve)
        print(f"Wrote the stored release {args.serve} ({len(paths)} files) into {args.out}: the same files as "
              "released, no new noise and no new charge.")
        return 0
    rows = datasets(store)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print(f"No budgets yet in {store.path}.")
    for d in rows:
        name = "; ".join(d["names"]) or f"{d['kind']} data (unnamed)"
        cap = d["cap"]
        symbol = "ε" if cap["definition"] == "pure" else "ρ"
        print(f"{name}  [{d['kind']}]  opened {d['created'].replace('T', ' ')} UTC"
              + (f", last charge {d['last'][:16].replace('T', ' ')} UTC" if d["last"] else ""))
        print(f"    spent {symbol} = {d['spent']:.4g} of {cap['value']:g} in {d['charges']} charges; "
              f"{len(d['releases'])} releases stored")
        for r in d["releases"]:
            print(f"    release {r['release_id']} ({r['created'].replace('T', ' ')} UTC, {r['summary'].get('cost', '')}): "
                  + (", ".join(r["files"]) if r["files"] else "files removed"))
        for p in d["undelivered"]:
            print("    " + _pending_text(p))
        for sr in d.get("series", []):
            _print_series(sr)
    return 0


def _all_releases(d: dict[str, Any]) -> list[dict[str, Any]]:
    """A dataset's stored releases and those of its series over time."""
    return d["releases"] + [r for sr in d.get("series", []) for r in sr["releases"]]


def _named(sr: dict[str, Any]) -> str:
    return f" (population {sr['name']})" if sr["name"] else ""


def _print_series(sr: dict[str, Any]) -> None:
    """A series over time of a dataset: its budget, and each period's spend and release."""
    cap = sr["cap"]
    symbol = "ε" if cap["definition"] == "pure" else "ρ"
    per = "per period" if sr["per_period"] else "of the horizon"
    print(f"    over time{_named(sr)}: "
          f"{sr['unit']}; spent {symbol} = "
          f"{'(not countable in its unit)' if sr['spent'] is None else format(sr['spent'], '.4g')} "
          f"of {cap['value']:g} {per} in {sr['charges']} charges "
          f"over {len(sr['periods'])} periods; {len(sr['releases'])} releases stored")
    files = {r["release_id"]: r["files"] for r in sr["releases"]}
    for p in sr["periods"]:
        rels = ", ".join(f"release {rid}" + ("" if files.get(rid) else " (files removed)") for rid in p["release_ids"])
        print(f"        {p['period']}: spent {symbol} = {p['spent']:.4g} in {p['charges']} charges"
              + (f"; {rels}" if rels else ""))
    for r in sr["releases"]:
        if "period" not in r["summary"]:
            print(f"        the series' files: release {r['release_id']} ({r['created'].replace('T', ' ')} UTC): "
                  + (", ".join(r["files"]) if r["files"] else "files removed"))
