"""Unit tests of the mechanism-comparison harness (dpcore.points.evaluate) and `dpcore evaluate points`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from points_helpers import release_with

from dpcore import catalog
from dpcore.cli import main
from dpcore.data import queries
from dpcore.data.domain import PRESETS, Grid, rect_sums
from dpcore.errors import ParameterError
from dpcore.points import evaluate as ev
from dpcore.points.release import PartitionRelease
from dpcore.privacy.noise import NoiseSource

NYC = PRESETS["New York City core (Manhattan, Brooklyn, Queens, Bronx)"]
BOUNDS = "-74.06,40.56,-73.70,40.92"
MECHS = catalog.names("points")  # whatever is registered
EPS = [0.5, 1.0]
SIZES = (0.05, 0.1)
NQ = 60
REPEATS = 3


@pytest.fixture(scope="module")
def agg():
    return ev.synthetic_aggregate(Grid(NYC, 48, 40), 60.0, 20_000, seed=3)


@pytest.fixture(scope="module")
def results(agg) -> pd.DataFrame:
    return ev.evaluate(agg, MECHS, EPS, SIZES, n_queries=NQ, repeats=REPEATS, noise_seed=7)


# ------------------------------------------------------------------ the long table and the summary


def test_long_table_shape_and_columns(results: pd.DataFrame) -> None:
    assert list(results.columns) == ev.LONG_COLUMNS
    assert len(results) == len(MECHS) * len(EPS) * len(SIZES) * REPEATS
    assert set(results["mechanism"]) == set(MECHS)
    assert set(results["epsilon"]) == set(EPS)
    assert set(results["query_size"]) == set(SIZES)
    assert (results["n_queries"] == NQ).all()
    assert (results["shape"] == "random").all()
    assert (results["release_seconds"] > 0).all()
    assert (results["mre_percent"] >= 0).all()
    # one row per (mechanism, ε, size, repeat)
    assert not results.duplicated(["mechanism", "epsilon", "query_size", "repeat"]).any()
    # release i (order repeat -> mechanism -> ε) used NoiseSource(7 + i)
    per_release = results.drop_duplicates(["repeat", "mechanism", "epsilon"])
    assert list(per_release["noise_seed"]) == list(range(7, 7 + len(per_release)))


def test_summary_means_and_standard_errors(results: pd.DataFrame) -> None:
    s = ev.summarize(results)
    assert list(s.columns) == ev.SUMMARY_COLUMNS
    assert len(s) == len(MECHS) * len(EPS) * len(SIZES)
    assert (s["repeats"] == REPEATS).all()
    row = s.iloc[0]
    sel = results[(results["mechanism"] == row["mechanism"]) & (results["epsilon"] == row["epsilon"])
                  & (results["query_size"] == row["query_size"])]["mre_percent"].to_numpy()
    assert row["mre_percent"] == pytest.approx(sel.mean())
    assert row["mre_se"] == pytest.approx(sel.std(ddof=1) / math.sqrt(REPEATS))
    table = ev.summary_table(s, SIZES[0])
    assert list(table.index) == MECHS
    assert list(table.columns) == [f"ε = {e:g}" for e in EPS]
    assert all("±" in c for c in table.to_numpy().ravel())


def test_mre_equals_metric_recomputed_by_hand(agg, results: pd.DataFrame) -> None:
    row = results[(results["mechanism"] == "ug") & (results["epsilon"] == 0.5)
                  & (results["query_size"] == SIZES[1]) & (results["repeat"] == 1)].iloc[0]
    qs, tags = queries.random_rectangles(agg.grid, SIZES, NQ, shape="random", seed=int(row["workload_seed"]))
    q = qs[tags == SIZES[1]]
    mech = catalog.get("points", "ug")
    rel = release_with(mech, agg, 0.5, mech.resolve_params({}), NoiseSource(int(row["noise_seed"])))
    true = rect_sums(agg.counts, q).astype(float)
    est = rel.answer(q)
    by_hand = float(np.mean(100.0 * np.abs(true - est) / np.maximum(true, 20.0)))
    assert row["mre_percent"] == pytest.approx(by_hand, rel=1e-12)
    assert row["n_leaves"] == int(rel.leaf.sum())


def test_seeded_noise_is_reproducible_and_default_is_secure(agg) -> None:
    kw = dict(mechanisms=["ug"], epsilons=[1.0], query_sizes=(0.1,), n_queries=30, repeats=2)
    a = ev.evaluate(agg, noise_seed=11, **kw)
    b = ev.evaluate(agg, noise_seed=11, **kw)
    assert a["mre_percent"].tolist() == b["mre_percent"].tolist()
    secure = ev.evaluate(agg, **kw)
    assert secure["noise_seed"].isna().all()
    assert secure["workload_seed"].tolist() == a["workload_seed"].tolist()  # workload is public


def test_same_workload_for_every_mechanism(agg, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int, np.ndarray]] = []
    draws: list[int] = []
    original_answer = PartitionRelease.answer
    original_draw = queries.random_rectangles

    def spy_answer(self, qs):
        seen.append((self.mechanism, len(draws), np.array(qs, copy=True)))
        return original_answer(self, qs)

    def spy_draw(*args, **kwargs):
        draws.append(kwargs["seed"])
        return original_draw(*args, **kwargs)

    monkeypatch.setattr(PartitionRelease, "answer", spy_answer)
    monkeypatch.setattr(queries, "random_rectangles", spy_draw)
    ev.evaluate(agg, MECHS, EPS, SIZES, n_queries=20, repeats=2, noise_seed=0)
    assert len(draws) == 2 and draws[0] != draws[1]  # drawn once per repeat
    for rep in (1, 2):
        batch = [q for _, r, q in seen if r == rep]
        assert len(batch) == len(MECHS) * len(EPS)
        assert {m for m, r, _ in seen if r == rep} == set(MECHS)
        assert all(np.array_equal(batch[0], q) for q in batch[1:])
    assert not np.array_equal([q for _, r, q in seen if r == 1][0], [q for _, r, q in seen if r == 2][0])


def test_both_shapes_share_the_releases(agg) -> None:
    res = ev.evaluate(agg, ["uniform"], [1.0], (0.1,), n_queries=20, repeats=1,
                      shape=("random", "square"), noise_seed=0)
    assert sorted(res["shape"]) == ["random", "square"]
    assert res["release_seconds"].nunique() == 1  # one release answered both workloads
    assert res["workload_seed"].nunique() == 2


def test_progress_reports_every_release(agg) -> None:
    calls: list[tuple[int, int, str]] = []
    ev.evaluate(agg, ["ug", "uniform"], [1.0], (0.1,), n_queries=10, repeats=2, noise_seed=0,
                progress=lambda d, t, w: calls.append((d, t, w)))
    assert [c[0] for c in calls] == [0, 1, 2, 3, 4]
    assert all(c[1] == 4 for c in calls)
    assert "ε = 1" in calls[0][2] and calls[-1][2] == "done"


@pytest.mark.parametrize("kw, needle", [
    (dict(mechanisms=["nope"]), "Unknown mechanism 'nope'"),
    (dict(mechanisms=[]), "at least one mechanism"),
    (dict(epsilons=[0]), "positive"),
    (dict(query_sizes=(1.5,)), "(0, 1]"),
    (dict(repeats=0), "repeats"),
    (dict(n_queries=0), "queries"),
    (dict(shape="round"), "square"),
    (dict(params={"identity": {"x": 1}}), "not among"),
    (dict(params={"ug": {"nope": 1}}), "no parameter"),
])
def test_bad_settings_raise_parameter_error(agg, kw: dict, needle: str) -> None:
    args = dict(mechanisms=["ug"], epsilons=[1.0], query_sizes=(0.1,), n_queries=5, repeats=1) | kw
    with pytest.raises(ParameterError) as info:
        ev.evaluate(agg, **args)
    assert needle in str(info.value)


# ------------------------------------------------------------------ synthetic stand-in, outputs


def test_parse_synthetic() -> None:
    assert ev.parse_synthetic("points.csv") is None
    assert ev.parse_synthetic("synthetic:50:1000000") == ev.SyntheticSpec(50.0, 1_000_000, ev.SYNTHETIC_SEED)
    assert ev.parse_synthetic("synthetic:20:1e3:4") == ev.SyntheticSpec(20.0, 1000, 4)
    for bad in ("synthetic:50", "synthetic:-1:10", "synthetic:50:0", "synthetic:x:10", "synthetic:5:10.5"):
        with pytest.raises(ParameterError, match="synthetic:SIGMA:N"):
            ev.parse_synthetic(bad)


def test_synthetic_aggregate_has_exactly_n_points() -> None:
    g = Grid(NYC, 32, 32)
    a = ev.synthetic_aggregate(g, 100.0, 5_000)
    assert a.total == 5_000 and a.n_outside == 0 and a.sensitivity == 1
    assert np.array_equal(a.counts, ev.synthetic_aggregate(g, 100.0, 5_000).counts)  # fixed seed


def test_markdown_and_plots(results: pd.DataFrame, tmp_path: Path) -> None:
    s = ev.summarize(results)
    md = ev.summary_markdown(s, "Title")
    assert md.startswith("## Title")
    assert "not for publication" in md
    assert md.count("| mechanism |") == len(SIZES) + 1  # one table per size, plus times
    png = ev.plot_summary(s, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = ev.plot_summary(s, tmp_path / "p.html")
    text = html.read_text("utf-8")
    # plotly.js inlined (works offline), no script fetched from a CDN
    assert "<script src=" not in text and len(text) > 1_000_000 and "MRE" in text
    with pytest.raises(ParameterError, match=".png or .html"):
        ev.plot_summary(s, tmp_path / "p.svg")


# ------------------------------------------------------------------ command line


def write_points(path: Path, n: int = 400, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    lat = rng.normal(40.75, 0.03, n)
    lon = rng.normal(-73.95, 0.03, n)
    lines = ["lat,lon"] + [f"{a:.6f},{o:.6f}" for a, o in zip(lat, lon, strict=True)]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def eval_args(inp: str, out: Path, *extra: str) -> list[str]:
    return ["evaluate", "points", "--input", inp, "--bounds", BOUNDS, "--grid", "16,16",
            "--mechanisms", "ug,uniform", "--epsilon", "0.5,1", "--query-sizes", "0.05,0.1",
            "--queries", "25", "--repeats", "2", "--out", str(out), *extra]


def test_cli_evaluate_writes_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(eval_args(str(write_points(tmp_path / "p.csv")), out, "--noise-seed", "3",
                        "--param", "ug.c=20"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert sorted(p.name for p in out.iterdir()) == ["plot.png", "results.csv", "summary.csv", "summary.md"]
    res = pd.read_csv(out / "results.csv")
    assert list(res.columns) == ev.LONG_COLUMNS
    assert len(res) == 2 * 2 * 2 * 2
    summ = pd.read_csv(out / "summary.csv")
    assert list(summ.columns) == ev.SUMMARY_COLUMNS and len(summ) == 2 * 2 * 2
    md = (out / "summary.md").read_text("utf-8")
    assert "| ug |" in md and "| uniform |" in md and "ε = 0.5" in md and "±" in md
    assert md in captured.out  # the summary is printed
    assert "p.csv" in md


def test_cli_unknown_mechanism_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = eval_args("synthetic:50:1000", out)
    args[args.index("ug,uniform")] = "ug,nosuch"
    rc = main(args)
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Unknown points mechanism 'nosuch'")
    assert not out.exists()


def test_cli_synthetic_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(eval_args("synthetic:50:20000", out, "--shape", "square"))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    md = (out / "summary.md").read_text("utf-8")
    assert "synthetic Gaussian σ = 50, n = 20,000" in md
    assert "squares" in md
    assert (pd.read_csv(out / "results.csv")["shape"] == "square").all()


@pytest.mark.parametrize("extra, needle", [
    (["--input", "synthetic:50"], "synthetic:SIGMA:N"),
    (["--epsilon", "0.1,x"], "--epsilon"),
    (["--param", "c=10"], "must name the mechanism"),
    (["--input", "missing.csv"], "does not exist"),
])
def test_cli_user_errors(tmp_path: Path, extra: list[str], needle: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(eval_args("synthetic:50:1000", out, *extra))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0]
    assert not out.exists()
