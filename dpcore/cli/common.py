"""Helpers shared by the command line's commands: the engine options and the routing of --input
through an engine, progress on stderr, ``key=value`` and comma-separated arguments, the budget given
with --epsilon/--rho, and the budget ledger (a --ledger file or the app's budget database): loading
and checking it, charging a release against it and saving it as soon as it was charged."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcore.errors import CURATOR_ONLY, DPCoreError, ParameterError, StorageError, curator_only

#: The neighbour relations ``--neighbour`` accepts: the units' own (``replace``, ``add_remove``) and,
#: as aliases, the O/D paper's terms (Boninsegna & Silvestri, PoPETs 2025, Sec. 3): bounded DP
#: replaces one person, unbounded DP adds or removes one.  The only place these aliases are named.
NEIGHBOUR_ALIASES = {"replace": "replace", "add_remove": "add_remove", "bounded": "replace", "unbounded": "add_remove"}


def neighbour_arg(value: str) -> str:
    """``--neighbour``'s value as the unit's neighbour relation (an alias read as its relation).

    >>> neighbour_arg("bounded"), neighbour_arg("add_remove")
    ('replace', 'add_remove')
    """
    try:
        return NEIGHBOUR_ALIASES[value]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {value!r} (choose from {', '.join(map(repr, NEIGHBOUR_ALIASES))})") from None


def engine_args(p: argparse.ArgumentParser) -> None:
    """Add --engine and --spark-master to a command's parser."""
    p.add_argument("--engine", default="auto", choices=["auto", "numpy", "duckdb", "spark"],
                   help="where the rows are aggregated: numpy (in memory), duckdb (streaming, out of core) or spark "
                        "(a cluster); auto (default) takes duckdb for inputs above 200 MB. --input may then be a "
                        "folder or glob of CSV/Parquet files")
    p.add_argument("--spark-master", help="Spark master URL with --engine spark (default local[*]), "
                                          "e.g. spark://host:7077 or yarn")


#: Seconds between progress lines when stderr is not a terminal (a pipeline's log).
LOG_EVERY_SECONDS = 5.0


def cli_progress(what: str) -> Any:
    """Progress on stderr: a live percentage on a terminal; elsewhere (a pipeline's log) a line every
    :data:`LOG_EVERY_SECONDS` once a step has run that long, and its last line, so a long
    aggregation shows it is alive and a short one prints nothing.  The library's lines name the
    phase and the level, never a number of the data (rows, bytes read, areas found): a pipeline's
    log is no curator-only place; the line gives the fraction done and the seconds elapsed."""
    if not sys.stderr.isatty():
        return _log_progress(what)
    last = [-1]

    def show(frac: float, msg: str) -> None:
        pct = int(frac * 100)
        if pct != last[0]:
            last[0] = pct
            print(f"\r  {msg[:90]:<90} {pct:3d} %", end="" if pct < 100 else "\n", file=sys.stderr, flush=True)

    return show


def _log_progress(what: str, clock: Any = None) -> Any:
    """The progress callback for a log: whole lines, one every :data:`LOG_EVERY_SECONDS` (``clock``:
    the seconds' source, :func:`time.monotonic`).

    >>> import io, contextlib
    >>> ticks = iter([0.0, 1.0, 6.0, 7.0, 8.0])
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     show = _log_progress("Counting", clock=lambda: next(ticks))
    ...     for f in (0.1, 0.5, 0.6, 1.0):
    ...         show(f, "Counting points")
    >>> print(err.getvalue(), end="")
      Counting points: 50 % (6 s)
      Counting points: 100 % (8 s)
    """
    now = clock or time.monotonic
    start = now()
    last = [start, False]  # time of the last line, whether one was printed

    def log(frac: float, msg: str) -> None:
        t = now()
        done = frac >= 1.0
        if t - last[0] >= LOG_EVERY_SECONDS or (done and (last[1] or t - start >= LOG_EVERY_SECONDS)):
            last[0], last[1] = t, True
            text = (msg or what)[:120]
            text = text if text.endswith("%") else f"{text}: {int(frac * 100)} %"  # DuckDB's own percentage
            print(f"  {text} ({t - start:.0f} s)", file=sys.stderr, flush=True)

    return log


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
        # never the input's size: for a fixed-width file it tells the number of rows
        print(f"Aggregating with {name} (--engine {args.engine} chose it for the input's size).", file=sys.stderr)
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


def add_budget_args(p: argparse.ArgumentParser) -> None:
    """The budget options every release command takes (one copy: points, hierarchy, census, od)."""
    g = p.add_argument_group("budget (every release is accounted unless --no-budget)")
    g.add_argument("--budget-cap", type=float,
                   help="total ε (or ρ with --rho) allowed for this data when its budget is new (default: the app's, "
                        "ε = 1 or ρ = 0.5); an existing budget keeps its cap")
    g.add_argument("--budget-db", nargs="?", const="", metavar="FILE",
                   help="the budget database (default $DPCORE_LEDGER_DB or ~/.local/share/dpcore/ledger.sqlite, the "
                        "app's): the app and pipelines draw on one budget, keyed by the data's content")
    g.add_argument("--ledger", help="keep this data's budget in a JSON file instead (tied to the data it was made for)")
    g.add_argument("--population", metavar="NAME",
                   help="bind this data to a named population (before its first release): points, trips and census "
                        "tables of the same people then share one budget")
    g.add_argument("--matches-spent-data", choices=["same", "different"],
                   help="the answer when this data closely matches data whose budget has been spent (same columns, "
                        "about the same size and extent): 'same' people (draw on that budget) or 'different' people "
                        "(a budget of its own); asked once, and recorded")
    g.add_argument("--no-budget", action="store_true",
                   help="charge nothing (the release record says 'not accounted'); for tests and dry runs only")


def add_suppress_arg(p: argparse.ArgumentParser) -> None:
    """``--suppress RULE``: the reliability rule of :mod:`dpcore.core.reliability` (points, hierarchy, census, od)."""
    p.add_argument("--suppress", metavar="RULE",
                   help="reliability rule, post-processing at no budget: \"floor=5\" (withhold noisy values below 5), "
                        "\"cv=0.3\" (withhold values whose CV z·SD/value exceeds 0.3, z = 1.645 unless "
                        "\"cv=0.3,z=1.96\"; values <= 0 always), both (\"floor=5,cv=0.3\"), or \"flag:cv=0.3\" to keep "
                        "and mark them. release.csv gets the columns suppressed/flagged and the reason; every noisy "
                        "value stays in release_full.csv (the data users' file)")
    p.add_argument("--cv-threshold", type=float, default=0.3, metavar="CV",
                   help="the threshold of the record's \"use at level L or coarser\" line (release.json's "
                        "level_guidance, review.html): the finest level whose median coefficient of variation "
                        "noise_sd / count is under it (default 0.3); it only words the record")


def cv_threshold(args: argparse.Namespace) -> float:
    """``--cv-threshold``: the threshold of the record's "use at level L or coarser" line, checked before any
    data is read (a typo costs nothing)."""
    import math

    from dpcore.core.review import CV_THRESHOLD

    value = getattr(args, "cv_threshold", None)
    value = CV_THRESHOLD if value is None else float(value)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"--cv-threshold must be a positive number (got {value}); e.g. 0.3: the record names "
                             "the finest level whose median noise SD is under 30 % of its typical count.")
    return value


def suppress_rule(args: argparse.Namespace) -> Any:
    """The parsed ``--suppress`` rule (None without one), read before any data so a typo costs nothing."""
    from dpcore.core.reliability import parse_rule

    return parse_rule(getattr(args, "suppress", None))


@dataclass
class CliBudget:
    """The budget a CLI release draws on: the session, the ledger (None: not accounted) and where it is kept."""

    session: Any
    ledger: Any
    where: str
    #: the budget did not exist before this command (said on the summary line: issue 26, item 13)
    new: bool = False

    def left(self) -> str:
        """The end of a release's summary line: what is left, and where it is recorded."""
        if self.ledger is None:
            return "not accounted (--no-budget): nothing was charged and the record says so."
        opened = (f"new budget for this data: cap {self.ledger.cap.label()} (no earlier release of this data in "
                  f"{self.where}); ") if self.new else ""
        return f"{opened}{self.ledger.remaining:.4g} of the budget left in {self.where}."


@dataclass(frozen=True)
class Made:
    """What making a release gives back: the release (its envelope, :class:`~dpcore.core.mechanism.KindRelease`),
    the files written, and the one-line summary the command line prints."""

    release: Any
    paths: list[Path]
    summary: str


def open_budget(args: argparse.Namespace, make: Any, cost: Any, kind: str, fp: str, unit: Any = None,
                session: Any = None, others: Any = (), profile: Any = None) -> CliBudget:
    """The budget of ``kind`` data with content fingerprint ``fp`` (``cost`` sets the default cap's definition).

    The CLI is accounted by default, in the app's budget database, with the app's default cap for a
    population that has none yet; ``--ledger FILE`` keeps it in a JSON file tied to this data;
    ``--no-budget`` charges nothing.  A ``--budget-cap`` that differs from an existing budget's cap is
    refused (a cap is changed, with confirmation, in the app).  ``session`` (default: the one of
    ``--budget-db``, or an unaccounted one with ``--no-budget``) is the session that charges.
    ``others``: the data's further content fingerprints (:meth:`~dpcore.core.session.Session.adopt_keys`),
    by any of which an existing budget is found.  A ``--ledger`` file is refused for data whose budget
    the database already holds (the file would start it afresh).  ``profile``
    (:class:`dpcore.privacy.near_match.Profile`): data whose budget would be new and that closely
    matches spent data is refused until ``--matches-spent-data`` answers whether it is the same
    population (:func:`ask_near_match`).
    """
    from dpcore.core.session import Session, default_cap

    chosen = [flag for flag, on in (("--ledger", bool(args.ledger)), ("--budget-db", args.budget_db is not None),
                                    ("--no-budget", args.no_budget)) if on]
    if len(chosen) > 1:
        raise ParameterError(f"Give one of {' or '.join(chosen)}, not both: the budget is kept in one place.")
    if args.no_budget:
        if args.budget_cap is not None or args.population:
            raise ParameterError("--no-budget charges nothing: drop --budget-cap and --population, or drop --no-budget.")
        return CliBudget(session if session is not None else Session.unaccounted(), None, "")
    if session is None:
        session = Session.open(args.budget_db or None)
    if getattr(args, "out", None) and not args.ledger:
        # the charge is journalled with its folder until the files are written (deliver)
        session.deliver_to = f"folder:{Path(args.out).resolve()}"
    cap = make(args.budget_cap) if args.budget_cap is not None else default_cap(cost)
    if args.ledger:
        if args.population:
            raise ParameterError("--population binds data in the budget database; it cannot be used with --ledger.")
        path = Path(args.ledger)
        if session.holds_budget(kind, fp, others):
            raise ParameterError(
                "The budget database already holds a budget of this data: a --ledger file would start its budget "
                "afresh. Drop --ledger to draw on that budget (give --budget-db FILE if it is kept elsewhere).")
        known = path.exists()
        ledger = session.json_budget(path, kind, fp, default=cap, unit=unit, others=others)
        where = f"'{path}'"
    else:
        store = session.store
        session.adopt_keys(kind, fp, others)
        if profile is not None and not args.population:
            ask_near_match(args, store, store.data_key(kind, fp), profile)
        known = store.has_ledger(store.budget_key(kind, fp))
        ledger = session.budget(kind, fp, default=cap, unit=unit, population=args.population)
        where = f"the budget database '{store.path}'"
    if known and args.budget_cap is not None and (cap.definition != ledger.definition or not math.isclose(
            cap.value, ledger.cap.value, rel_tol=1e-12, abs_tol=0.0)):
        raise ParameterError(
            f"The budget of this data in {where} already has the cap {ledger.cap.label()}; --budget-cap would make "
            f"it {cap.label()}. Drop --budget-cap, or change the cap in the app (with confirmation) if your policy "
            "allows it.")
    # the release's own check (a ρ release against a pure-ε budget, another unit of privacy) is the
    # pipeline's one pre-charge check, ledger.check(plan.cost, plan.unit)
    return CliBudget(session, ledger, where, new=not known)




def ask_near_match(args: argparse.Namespace, store: Any, data_key: str, profile: Any) -> None:
    """Before a fresh budget: refuse data that closely matches spent data until the curator answers
    whether it is the same population (``--matches-spent-data``), then record the answer and keep the
    data's profile (:mod:`dpcore.privacy.near_match`; nothing about the data is printed or stored plain)."""
    from dpcore.privacy import key_aliases, near_match

    if not near_match.spent(store, store.resolve(data_key)):  # the budget would be new
        found = near_match.matches(store, data_key, profile)
        choice = getattr(args, "matches_spent_data", None)
        if found and choice is None:
            raise ParameterError(
                "This data closely matches data whose budget has already been spent (the same columns, about the "
                "same size, and the same extent or about as many areas), but it is not the same file, so it would get a new budget. If it is the "
                "same population (e.g. the same file with a row dropped), add --matches-spent-data same to draw on "
                "that budget; if it is other people's data, add --matches-spent-data different. The answer is "
                "recorded.")
        if found:
            near_match.answer(store, data_key, found, choice == "same")
    near_match.remember(store, store.resolve(key_aliases.resolve(store, data_key)), profile)


def deliver(bud: CliBudget, out: Any, files: Mapping[str, bytes], folder: str | Path) -> list[Path]:
    """Write a charged release's ``files`` into ``folder`` whole (:func:`~dpcore.core.record.write_files`),
    after keeping them in the budget database with the charge's journal
    (:mod:`dpcore.privacy.ledger_journal`): a run killed or a disk filled before the files are written
    leaves a charge listed as *charged, not delivered* that ``history --serve`` writes again, the same
    bytes, with no new noise and no new charge.

    A failure to write says that the budget *was* charged, and how to get the files."""
    from dpcore.core.record import write_files
    from dpcore.privacy import ledger_journal
    from dpcore.privacy.ledger_store import StoredLedger

    ledger = bud.ledger
    if not isinstance(ledger, StoredLedger) or not bud.session.deliver_to:
        return write_files(files, folder)
    store, rid = ledger.store, str(out.release_id)
    kept: DPCoreError | None = None
    try:
        summary = {"mechanism": getattr(out.plan, "label", "") or out.mechanism, "cost": out.cost.label(),
                   "out": str(Path(folder).resolve())}
        store.record_release(ledger.dataset, rid, out.kind, summary, files)
    except DPCoreError as e:  # not stored: the files are still written below
        kept = e
    try:
        paths = write_files(files, folder)
    except (OSError, DPCoreError) as e:
        why = f"{e.strerror} ({e.filename})" if isinstance(e, OSError) and e.strerror else str(e)
        again = (f"They are kept in the budget database as release {rid}: once that is fixed, write them with "
                 f"'python -m dpcore history --serve {rid} --out {folder}' (the same files: no new noise, no new "
                 "charge)." if kept is None else
                 f"They could not be kept in the budget database either ({kept}); the release is lost and its "
                 "budget stays spent.")
        raise StorageError(f"The budget WAS charged ({out.cost.label()}) for this release, but its files could not "
                           f"be written to {folder}: {why}. {again}") from None
    with contextlib.suppress(DPCoreError):
        ledger_journal.delivered(store, rid)
    if kept is not None:
        text = (f"the release's files are written, but could not be kept in the budget database for History "
                f"({' '.join(str(kept).split())}); keep your own copy.")
        print(f"warning: {curator_only(text) if CURATOR_ONLY in text else text}", file=sys.stderr)
    return paths


@contextlib.contextmanager
def unreadable_hint() -> Iterator[None]:
    """A refusal for coordinates that are not numbers names the option that leaves those rows out."""
    from dpcore.data.points import UnreadableCoordinates

    try:
        yield
    except UnreadableCoordinates as e:
        raise e.with_hint("give --drop-unreadable to leave those rows out") from None


def report_unreadable(dropped: dict[str, int]) -> None:
    """With --drop-unreadable, the rows left out, on stderr and marked for the curator: a count of
    confidential rows (like --drop-unmatched's), never in the export or release.json."""
    from dpcore.data.points import DROP_UNREADABLE_COORDINATE

    n = dropped.get(DROP_UNREADABLE_COORDINATE, 0)
    if n:
        print(curator_only(f"Dropped {n:,} rows whose latitude or longitude is not a number "
                           "(--drop-unreadable; not in the export)."), file=sys.stderr)
