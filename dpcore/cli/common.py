"""Helpers shared by the command line's commands: the engine options and the routing of --input
through an engine, progress on stderr, ``key=value`` and comma-separated arguments, the budget given
with --epsilon/--rho, and the budget ledger (a --ledger file or the app's budget database): loading
and checking it, charging a release against it and saving it as soon as it was charged."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from dpcore.errors import DPCoreError, ParameterError


def engine_args(p: argparse.ArgumentParser) -> None:
    """Add --engine and --spark-master to a command's parser."""
    p.add_argument("--engine", default="auto", choices=["auto", "numpy", "duckdb", "spark"],
                   help="where the rows are aggregated: numpy (in memory), duckdb (streaming, out of core) or spark "
                        "(a cluster); auto (default) takes duckdb for inputs above 200 MB. --input may then be a "
                        "folder or glob of CSV/Parquet files")
    p.add_argument("--spark-master", help="Spark master URL with --engine spark (default local[*]), "
                                          "e.g. spark://host:7077 or yarn")


def cli_progress(what: str) -> Any:
    """Progress on stderr: a live percentage on a terminal, nothing in a pipeline's log."""
    if not sys.stderr.isatty():
        return None
    last = [-1]

    def show(frac: float, msg: str) -> None:
        pct = int(frac * 100)
        if pct != last[0]:
            last[0] = pct
            print(f"\r  {msg[:90]:<90} {pct:3d} %", end="" if pct < 100 else "\n", file=sys.stderr, flush=True)

    return show


def engine_for(args: argparse.Namespace, path_text: str) -> tuple[Any, Any] | None:
    """``(engine, source)`` when --input goes through an engine, None for the in-memory readers
    (a single file of a format only they read, e.g. GeoJSON, with --engine auto or numpy)."""
    from dpcore.data import engines

    p = Path(path_text)
    single = p.is_file() and not any(ch in path_text for ch in "*?[")
    if single and engines.base._fmt(p) is None and args.engine in ("auto", "numpy"):  # noqa: SLF001
        return None
    if not single and not p.is_dir() and not any(ch in path_text for ch in "*?["):
        raise DPCoreError(f"Input file '{p}' does not exist. Check the path given to --input.")
    src = engines.Source.from_path(path_text)
    name = engines.choose(args.engine, src.n_bytes)
    if name == "numpy" and single:
        return None  # the in-memory readers (they also read GeoJSON and detect more)
    if args.spark_master and name != "spark":
        raise ParameterError("--spark-master is for --engine spark.")
    eng = engines.get_engine(name, spark_master=args.spark_master)
    if name != args.engine:
        print(f"Aggregating with {name} ({src.n_bytes / 1e6:,.0f} MB of input).", file=sys.stderr)
    return eng, src


def parse_params(items: list[str]) -> dict[str, Any]:
    """``{key: value}`` (text) from repeated ``KEY=VALUE`` arguments (--param, --name, --boundaries ...)."""
    out: dict[str, Any] = {}
    for it in items:
        if "=" not in it:
            raise ParameterError(f"--param '{it}' must look like key=value, e.g. --param c=10.")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def split_list(text: str, flag: str, kind: type, example: str) -> list[Any]:
    """The comma-separated values of ``flag`` as ``kind``; a one-line error quoting ``example`` if not."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        values = [kind(p) for p in parts]
    except ValueError:
        raise ParameterError(f"{flag} '{text}' must be a comma-separated list, e.g. {flag} {example}.") from None
    if not values:
        raise ParameterError(f"{flag} is empty; give a comma-separated list, e.g. {flag} {example}.")
    return values


# ---------------------------------------------------------------------------------------------
# budget and ledger
# ---------------------------------------------------------------------------------------------


def budget_arg(args: argparse.Namespace) -> tuple[Any, Any]:
    """(make, cost) from --epsilon or --rho."""
    from dpcore.privacy import budget

    flag, text = ("--epsilon", args.epsilon) if args.epsilon is not None else ("--rho", args.rho)
    try:
        value = float(text)
    except ValueError:
        raise ParameterError(f"{flag} '{text}' is not a number; use e.g. {flag} 0.5.") from None
    make = budget.pure if flag == "--epsilon" else budget.zcdp
    return make, make(value)


def load_ledger(args: argparse.Namespace, make: Any, cost: Any) -> tuple[Path | None, Any]:
    """The dataset's ledger from ``--ledger`` (or a new one capped by ``--budget-cap``), checked for ``cost``."""
    from dpcore.privacy.ledger import Ledger

    ledger_path = Path(args.ledger) if args.ledger else None
    if ledger_path is not None and ledger_path.exists():
        try:
            ledger = Ledger.from_dict(json.loads(ledger_path.read_text("utf-8")))
        except (ValueError, KeyError, TypeError) as e:
            raise ParameterError(f"Ledger file '{ledger_path}' is not a dpcore ledger ({e}). "
                                 "Point --ledger to the file an earlier run wrote, or a new path.") from None
        if args.budget_cap is not None:
            # A ledger's cap is the curator's policy, fixed when the ledger is created: a run may
            # not raise it (or reinterpret it in another unit) by passing another --budget-cap.
            asked = make(args.budget_cap)
            if asked.definition != ledger.definition or not math.isclose(
                    asked.value, ledger.cap.value, rel_tol=1e-12, abs_tol=0.0):
                raise ParameterError(
                    f"The ledger '{ledger_path}' already has the cap {ledger.cap.label()}; --budget-cap would "
                    f"make it {asked.label()}. A ledger's cap is set when the ledger is created: drop "
                    "--budget-cap to keep using this ledger, or start a new ledger file if your policy "
                    "grants a new budget."
                )
    else:
        cap = args.budget_cap if args.budget_cap is not None else cost.value
        ledger = Ledger(make(cap))
    ledger.check(cost)  # e.g. a ρ release against a pure-ε ledger: say why
    return ledger_path, ledger


def check_can_spend(ledger: Any, cost: Any, where: str) -> None:
    """Refuse a release whose ``cost`` exceeds what is left of the ledger kept in ``where``."""
    if not ledger.can_spend(cost):
        raise DPCoreError(
            f"This release needs {cost.label()} but only {ledger.remaining:.4g} of the cap "
            f"{ledger.cap.label()} is left in {where}. Lower --epsilon or raise --budget-cap "
            "if your policy allows it."
        )


def stored_ledger(args: argparse.Namespace, make: Any, cost: Any, kind: str, fp: str) -> tuple[Any, str]:
    """The dataset's ledger in the app's budget database (``--budget-db``), checked for ``cost``.

    A new dataset gets ``--budget-cap`` (or this release's cost) as its cap; an existing one keeps
    its cap, and a different --budget-cap is refused, as for a --ledger file.
    """
    from dpcore.core.session import Session

    session = Session.open(args.budget_db or None)
    store = session.store
    known = store.has_ledger(store.budget_key(kind, fp))
    cap = make(args.budget_cap if args.budget_cap is not None else cost.value)
    ledger = session.budget(kind, fp, default=cap)
    if known and args.budget_cap is not None and (cap.definition != ledger.definition or not math.isclose(
            cap.value, ledger.cap.value, rel_tol=1e-12, abs_tol=0.0)):
        raise ParameterError(
            f"The budget database already holds this dataset with the cap {ledger.cap.label()}; --budget-cap would "
            f"make it {cap.label()}. Drop --budget-cap, or change the cap in the app if your policy allows it.")
    ledger.check(cost)
    where = f"the budget database '{store.path}'"
    check_can_spend(ledger, cost, where)
    return ledger, where


def budget_left(ledger_path: Path | None, ledger: Any) -> str:
    """The end of a release's summary line: what is left, and where it is recorded."""
    if ledger_path is None:
        return ("no --ledger given, so this spend is not recorded anywhere: pass --ledger FILE to keep "
                "the dataset's budget across runs.")
    return f"{ledger.remaining:.4g} of the budget left in '{ledger_path}'."


def charged(ledger_path: Path | None, ledger: Any, release: Any) -> Any:
    """Run ``release()`` and save the ledger as soon as it was charged, whatever happens next.

    A release that fails after its charge (or whose files cannot be written) has still drawn
    noise from the data, so its spend must be on record before anything else can go wrong.
    """
    before = len(ledger.entries)
    try:
        return release()
    finally:
        if len(ledger.entries) != before:
            save_ledger(ledger_path, ledger)


def save_ledger(ledger_path: Path | None, ledger: Any) -> None:
    """Write the ledger to its --ledger file (nothing without one)."""
    if ledger_path is not None:
        ledger_path.parent.mkdir(parents=True, exist_ok=True)
        ledger_path.write_text(json.dumps(ledger.to_dict(), indent=2), "utf-8")
