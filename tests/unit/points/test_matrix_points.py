"""The matrix mechanism (Eigen-Design) as a registered point mechanism."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from points_helpers import levels_of, plan_points, release_with, secret_value

from dpcore import catalog, pipeline
from dpcore.core.record import validate_record, write_files
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.errors import ParameterError
from dpcore.estimate import matrix_cache, matrix_errors, matrix_workload
from dpcore.points.export import release_files, release_record
from dpcore.points.mechanisms.matrix import MatrixMechanism
from dpcore.privacy.budget import pure, zcdp
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

# distinctive true counts, far apart, so no released number can spell one of them
TRUE = np.array([[7777771, 5555553, 1111117], [3333337, 9999991, 2222221]], dtype=np.int64)


def _agg(counts: np.ndarray, k: int = 1) -> Aggregate:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), counts.shape[0], counts.shape[1])
    return Aggregate(g, counts.astype(np.int64), 0, 0, k, None if k == 1 else k)


def test_registered_and_described() -> None:
    m = catalog.get("points", "matrix")
    assert isinstance(m, MatrixMechanism)
    assert "Eigen-Design" in m.title
    p = m.resolve_params({})
    assert p["workload"] == "ranges_2d"
    with pytest.raises(ParameterError):
        m.resolve_params({"workload": "everything"})


@pytest.mark.parametrize("cost", [zcdp(0.5), pure(1.0)])
@pytest.mark.parametrize("workload", ["ranges_2d", "random_rectangles"])
def test_plan_is_data_free_and_reports_bound(cost, workload) -> None:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8)
    lv = levels_of(catalog.get("points", "matrix"), g, cost, {"workload": workload})[0]
    mx = lv.extra["matrix"]
    assert 0 < mx["rmse_lower_bound"] <= mx["expected_rmse_per_query"]
    assert mx["ratio_to_lower_bound"] == pytest.approx(mx["expected_rmse_per_query"] / mx["rmse_lower_bound"])
    assert mx["pure_dp_fallback"] == (cost.definition == "pure")
    assert bool(mx["notes"]) == (cost.definition == "pure")
    assert lv.in_partition and lv.n_counts == 64 and lv.sd > 0


def test_one_d_workloads_only_on_a_line() -> None:
    m = catalog.get("points", "matrix")
    line = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 1, 32)
    for w in ("prefix", "ranges_1d"):
        assert levels_of(m, line, zcdp(0.5), {"workload": w})[0].extra["matrix"]["n_queries"] > 0
        with pytest.raises(ParameterError, match="one row or one column"):
            levels_of(m, Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 8), zcdp(0.5), {"workload": w})


def test_large_grid_is_refused_before_anything_is_spent() -> None:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 1024, 1024)
    with pytest.raises(ParameterError, match="at most 65,536 cells"):
        levels_of(catalog.get("points", "matrix"), g, zcdp(0.5), {})
    agg = Aggregate(g, np.zeros((1024, 1024), dtype=np.int64), 0, 0, 1, None)
    led = Ledger(zcdp(1.0))
    with pytest.raises(ParameterError):
        pipeline.release(plan_points(agg, "matrix", zcdp(0.5), {}), agg, ledger=led, noise=NoiseSource(1))
    assert led.spent == 0


@pytest.mark.parametrize("cost,k", [(zcdp(0.5), 1), (zcdp(0.5), 3), (pure(1.0), 1), (pure(1.0), 2)])
def test_release_charges_once_and_answers_match_matrix_mech(cost, k) -> None:
    rng = np.random.default_rng(3)
    agg = _agg(rng.poisson(30, (6, 5)), k)
    led = Ledger(zcdp(5.0) if cost.definition == "zcdp" else pure(5.0))
    rel = pipeline.release(plan_points(agg, "matrix", cost, {"workload": "ranges_2d"}), agg,
                           ledger=led, noise=NoiseSource(7)).inner
    assert len(led.entries) == 1 and led.spent == pytest.approx(cost.value)
    assert rel.cost == cost and rel.n_rects == 30
    # standard errors: sqrt(Var(z) · w X⁺ wᵀ) from matrix_errors' own formulas
    w = matrix_workload.range_2d_workload(6, 5)
    s = matrix_cache.cached_strategy(w, pure_dp=cost.definition == "pure")
    info = rel.details["matrix"]
    se = np.sqrt(matrix_errors.query_variances_per_p(w, s) / s.sensitivity() ** 2 * info["noise_variance"])
    wa = rel.details["workload_answers"]
    np.testing.assert_allclose(wa["standard_error"], se, rtol=1e-9)
    assert len(wa["answer"]) == w.m == len(wa["rects"])
    # the answers are the workload applied to the released cell estimates
    X = rel.noisy.reshape(6, 5)
    for (r0, r1, c0, c1), a in zip(wa["rects"][::37], wa["answer"][::37], strict=True):
        assert X[r0:r1, c0:c1].sum() == pytest.approx(a, abs=1e-6)
    # the plan's expected RMSE is the RMS of the answers' standard errors
    assert info["expected_rmse_per_query"] == pytest.approx(math.sqrt(np.mean(se**2)), rel=1e-9)
    # the noise covers k units of privacy
    if cost.definition == "zcdp":
        assert info["noise_scale"] >= k * s.l2_sensitivity / math.sqrt(2 * cost.value) * (1 - 1e-12)


def test_exports_hold_answers_and_no_true_counts(tmp_path: Path) -> None:
    agg = _agg(TRUE)
    led = Ledger(zcdp(1.0), dataset="secret_patients_file.csv")
    rel = pipeline.release(plan_points(agg, "matrix", zcdp(0.001), {}), agg, ledger=led, noise=NoiseSource(5)).inner
    paths = write_files(release_files(rel, led), tmp_path)
    names = sorted(p.name for p in paths)
    assert names == ["design.json", "estimates.csv", "measurements.csv",  # the data users' (issue 25)
                     "release.csv", "release.geojson", "release.json", "workload_answers.csv"]  # no measurements
    texts = {p.name: p.read_text("utf-8") for p in paths}
    lines = texts["workload_answers.csv"].splitlines()
    assert lines[0].split(",")[-4:] == ['"answer"', '"standard_error"', '"ci95_low"', '"ci95_high"']
    assert len(lines) == 1 + matrix_workload.range_2d_workload(2, 3).m
    secrets = [str(v) for v in TRUE.ravel()] + [str(int(TRUE.sum()))]
    for fname, text in texts.items():
        for s in secrets:
            # a secret as a whole number (not a digit run inside a larger noisy number)
            assert not re.search(secret_value(s), text), (s, fname)
        assert "secret_patients" not in text
    rec = json.loads(texts["release.json"])
    validate_record(rec)
    assert rec["workload"]["answers_file"] == "workload_answers.csv"
    assert rec["workload"]["ratio_to_lower_bound"] >= 1.0
    assert "workload_answers.csv" in rec["outputs"]["files"]
    assert rec["privacy"]["approx_dp"]  # ρ and its (ε, δ) reading
    assert "true_count" not in json.dumps(rec).lower()


def test_other_mechanisms_have_no_workload_section() -> None:
    agg = _agg(TRUE)
    rel = release_with(catalog.get("points", "identity"), agg, 1.0, {}, NoiseSource(1))
    assert "workload" not in release_record(rel)


def test_strategy_cache_is_in_a_temporary_directory(tmp_path_factory) -> None:
    assert str(matrix_cache.cache_dir()).startswith(str(tmp_path_factory.getbasetemp()))


def test_few_random_rectangles_still_estimate_every_cell() -> None:
    """10 rectangles on 32 × 32: the flat design misses cells (its Gram is singular), which once
    published estimates of ±20,900 for true counts of 100. The mechanism must use a strategy
    of full column rank, so every published cell is a bounded-variance estimate."""
    counts = np.full((32, 32), 100, dtype=np.int64)
    m = MatrixMechanism()
    params = {"workload": "random_rectangles", "rect_count": 10}
    s = m.strategy(m.workload(_agg(counts).grid, m.resolve_params(params)), zcdp(0.5))
    assert all(f.gram_pinv()[2].shape[1] == 0 for f in (s.factors or (s,)))
    agg = _agg(counts)
    rel = pipeline.release(plan_points(agg, "matrix", zcdp(0.5), params), agg, ledger=Ledger(zcdp(1.0)),
                           noise=NoiseSource(2)).inner
    d = rel.density()
    # noise scale 1 per strategy answer: the largest of 1,024 cell errors was 6.2 with this seed;
    # a cell the strategy cannot see would be off by thousands
    assert np.isfinite(d).all() and np.abs(d - 100).max() < 30


# ---------------------------------------------------------------------------------------------
# uploaded workloads of lon/lat rectangles
# ---------------------------------------------------------------------------------------------

RECTS_CSV = ("name,lon_min,lat_min,lon_max,lat_max,weight,group\n"
             "\"Old town, north\",0.1,0.5,0.5,0.9,2,core\n"
             "Harbour,0.5,0.0,1.0,0.5,1,core\n"
             "West strip,0.0,0.0,0.3,1.0,1,edge\n"
             "Beyond,0.0,0.0,1.5,1.0,,edge\n")


def _agg_unit(rows: int, cols: int, seed: int = 0) -> Aggregate:
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), rows, cols)
    counts = np.random.default_rng(seed).poisson(40, (rows, cols)).astype(np.int64)
    return Aggregate(g, counts, 0, 0, 1, None)


def _uploaded_params() -> dict:
    from dpcore.points.workload_io import parse_rectangles

    return {"workload": "uploaded", "rectangles": parse_rectangles(RECTS_CSV).to_list()}


@pytest.mark.parametrize("cost", [zcdp(0.5), pure(1.0)])
def test_uploaded_rectangles_release_names_answers_and_records_the_rectangles(cost, tmp_path: Path) -> None:
    agg = _agg_unit(8, 8)
    led = Ledger(zcdp(1.0) if cost.definition == "zcdp" else pure(2.0))
    rel = pipeline.release(plan_points(agg, "matrix", cost, _uploaded_params()), agg,
                           ledger=led, noise=NoiseSource(3)).inner
    wa = rel.details["workload_answers"]
    assert wa["name"] == ["Old town, north", "Harbour", "West strip", "Beyond"]
    # cells whose centres lie inside (8 x 8 over [0, 1]²: centres at 1/16, 3/16, ...)
    np.testing.assert_array_equal(wa["rects"], [[4, 7, 1, 4], [0, 4, 4, 8], [0, 8, 0, 2], [0, 8, 0, 8]])
    X = rel.noisy.reshape(8, 8)
    for (r0, r1, c0, c1), a in zip(wa["rects"], wa["answer"], strict=True):
        assert X[r0:r1, c0:c1].sum() == pytest.approx(a, abs=1e-6)
    info = rel.details["matrix"]
    assert any("clipped" in n and "data row 4" in n for n in info["notes"])  # 'Beyond': data rows, header not counted
    assert info["grouped_by"] == "group" and [g["group"] for g in info["groups"]] == ["core", "edge"]
    paths = write_files(release_files(rel, led), tmp_path)
    rec = json.loads((tmp_path / "release.json").read_text("utf-8"))
    validate_record(rec)
    assert rec["mechanism"]["params"]["workload"] == "uploaded"
    assert [r["name"] for r in rec["mechanism"]["params"]["rectangles"]][0] == "Old town, north"
    assert rec["workload"]["cell_rule"].startswith("cells whose centres lie")
    assert rec["workload"]["simultaneous_95"]["bound"] > rec["workload"]["worst_se"] > 0
    import csv as _csv
    with open(tmp_path / "workload_answers.csv", newline="", encoding="utf-8") as fh:
        rows = list(_csv.DictReader(fh))
    assert [r["name"] for r in rows] == wa["name"]  # the comma in a name survives
    assert rows[3]["lon_max"] == "1.5" and rows[3]["east"] == "1"  # asked vs answered (clipped)
    assert {p.name for p in paths} >= {"workload_answers.csv"}


def test_uploaded_weights_shape_the_design_but_errors_are_unweighted() -> None:
    m = MatrixMechanism()
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8)
    p = m.resolve_params(_uploaded_params())
    q = m._queries(g, p)
    assert q.design is not q.workload and q.design.spec["family"] == "explicit"  # weight 2 on row 1
    np.testing.assert_array_equal(q.design.matrix()[0], 2 * q.workload.matrix()[0])
    # 4 rectangles cannot see every cell: the per-axis design replaces the flat one, and says so
    s = m.strategy(q.workload, zcdp(0.5), q.design)
    assert s.kind == "kron"
    assert any("per-axis design" in n for n in levels_of(m, g, zcdp(0.5), p)[0].extra["matrix"]["notes"])
    # 120 seeded small rectangles with weights 1 or 2: the flat Eigen-Design has full column rank
    rng = np.random.default_rng(0)
    rs = []
    for _ in range(120):
        r0, c0 = rng.integers(0, 8, 2)
        h, w = rng.integers(1, 4, 2)
        rs.append({"west": c0 / 8, "south": r0 / 8, "east": min(8, c0 + w) / 8, "north": min(8, r0 + h) / 8,
                   "weight": float(rng.choice([1, 2]))})
    p = m.resolve_params({"workload": "uploaded", "rectangles": rs})
    q = m._queries(g, p)
    s = m.strategy(q.workload, zcdp(0.5), q.design)
    assert s.kind == "eigen" and s.workload_hash == q.design.content_hash()
    mx = levels_of(m, g, zcdp(0.5), p)[0].extra["matrix"]
    var = mx["noise_variance"]
    se = np.sqrt(var * matrix_errors.query_variances_per_p(q.workload, s) / s.sensitivity() ** 2)
    assert mx["expected_rmse_per_query"] == pytest.approx(math.sqrt(np.mean(se**2)), rel=1e-9)
    assert mx["worst_se"] == pytest.approx(se.max(), rel=1e-9)
    # equal weights: the design is the workload itself
    same = [dict(r, weight=3.0) for r in p["rectangles"]]
    q2 = m._queries(g, m.resolve_params({"workload": "uploaded", "rectangles": same}))
    assert q2.design is q2.workload


def test_uploaded_workload_needs_rectangles_and_others_drop_them() -> None:
    m = catalog.get("points", "matrix")
    g = Grid(Bounds(0.0, 0.0, 1.0, 1.0), 8, 8)
    with pytest.raises(ParameterError, match="upload a CSV"):
        levels_of(m, g, zcdp(0.5), {"workload": "uploaded"})
    p = m.resolve_params({"workload": "ranges_2d", "rectangles": _uploaded_params()["rectangles"]})
    assert p["rectangles"] is None  # a record never carries rectangles it did not use
    from dpcore.errors import InputError
    bad = [{"west": 2.0, "south": 2.0, "east": 3.0, "north": 3.0}]
    with pytest.raises(InputError, match="(?i)wholly outside"):
        levels_of(m, g, zcdp(0.5), {"workload": "uploaded", "rectangles": bad})


def test_cli_workload_file_and_repeat_from_the_record(tmp_path: Path, capsys) -> None:
    from dpcore.cli import main

    pts = tmp_path / "points.csv"
    rng = np.random.default_rng(1)
    pts.write_text("lon,lat\n" + "\n".join(f"{a:.5f},{b:.5f}" for a, b in rng.uniform(0, 1, (500, 2))) + "\n")
    rects = tmp_path / "rects.csv"
    rects.write_text(RECTS_CSV, "utf-8")
    base = ["release", "points", "--input", str(pts), "--bounds", "0,0,1,1", "--grid", "8,8",
            "--mechanism", "matrix", "--rho", "0.2"]
    assert main(base + ["--workload-file", str(rects), "--out", str(tmp_path / "a")]) == 0, capsys.readouterr().err
    rec = json.loads((tmp_path / "a" / "release.json").read_text("utf-8"))
    validate_record(rec)
    assert rec["mechanism"]["params"]["workload"] == "uploaded"
    assert len(rec["mechanism"]["params"]["rectangles"]) == 4
    assert "Harbour" in (tmp_path / "a" / "workload_answers.csv").read_text("utf-8")
    # the record repeats the release: same rectangles, same workload and strategy
    assert main(base + ["--workload-file", str(tmp_path / "a" / "release.json"), "--out", str(tmp_path / "b")]) == 0
    rec2 = json.loads((tmp_path / "b" / "release.json").read_text("utf-8"))
    assert rec2["mechanism"]["params"] == rec["mechanism"]["params"]
    for k in ("workload_name", "strategy", "expected_rmse_per_query", "ratio_to_lower_bound"):
        assert rec2["workload"][k] == rec["workload"][k]
    capsys.readouterr()
    # mistakes: one line, exit 2, nothing written
    bad = tmp_path / "bad.csv"
    bad.write_text("xmin,ymin,xmax,ymax\n0.6,0,0.2,1\n", "utf-8")
    assert main(base + ["--workload-file", str(bad), "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "data row 1" in err and "Swap" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()
    assert main(base[:-4] + ["--mechanism", "identity", "--epsilon", "1", "--workload-file", str(rects),
                             "--out", str(tmp_path / "d")]) == 2
    assert "matrix and DAWA mechanisms" in capsys.readouterr().err
    assert main(base + ["--param", "workload=prefix", "--workload-file", str(rects), "--out", str(tmp_path / "e")]) == 2


# ---------------------------------------------------------------------------------------------
# one calibration, one design per release, a null ratio
# ---------------------------------------------------------------------------------------------


class _Recording(NoiseSource):
    """A seeded source that records the parameters every draw was made with."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.calls: list[tuple] = []

    def gaussian_on_grid(self, values, sigma, granularity_exp):
        self.calls.append(("gaussian_on_grid", sigma, granularity_exp, np.size(values)))
        return super().gaussian_on_grid(values, sigma, granularity_exp)

    def discrete_laplace(self, scale, size):
        self.calls.append(("discrete_laplace", scale, None, size))
        return super().discrete_laplace(scale, size)

    def laplace_on_grid(self, values, scale, granularity_exp):
        self.calls.append(("laplace_on_grid", scale, granularity_exp, np.size(values)))
        return super().laplace_on_grid(values, scale, granularity_exp)


@pytest.mark.parametrize("cost,k", [(zcdp(0.3), 1), (zcdp(0.3), 4), (pure(0.7), 1), (pure(0.7), 3)])
@pytest.mark.parametrize("workload", ["ranges_2d", "random_rectangles"])
def test_previewed_noise_is_the_noise_drawn(cost, k, workload) -> None:
    from fractions import Fraction

    from dpcore.privacy.noise import discrete_gaussian_variance, discrete_laplace_variance

    agg = _agg(np.random.default_rng(2).poisson(20, (6, 7)), k)
    params = {"workload": workload, "rect_count": 30}
    m = MatrixMechanism()
    plan = levels_of(m, agg.grid, cost, params, sensitivity=k)[0].extra["matrix"]
    src = _Recording(11)
    led = Ledger(zcdp(5.0) if cost.definition == "zcdp" else pure(5.0))
    rel = pipeline.release(plan_points(agg, "matrix", cost, params), agg, ledger=led, noise=src).inner
    (name, scale, gexp, size), = src.calls  # one draw, for all strategy answers
    assert size == plan["strategy_queries"]
    assert float(scale) == plan["noise_scale"] == rel.details["matrix"]["noise_scale"]
    if name == "gaussian_on_grid":
        drawn_var = discrete_gaussian_variance(Fraction(scale) / Fraction(2) ** gexp) * 4.0**gexp
    elif name == "laplace_on_grid":
        drawn_var = discrete_laplace_variance(Fraction(scale) / Fraction(2) ** gexp) * 4.0**gexp
    else:
        drawn_var = discrete_laplace_variance(scale)
    assert plan["noise_variance"] == drawn_var
    assert name == {"discrete_gaussian": "gaussian_on_grid", "discrete_laplace": "discrete_laplace",
                    "discrete_laplace_grid": "laplace_on_grid"}[plan["noise"]]


def test_plan_and_release_load_the_strategy_once(monkeypatch) -> None:
    from dpcore.points.mechanisms import matrix as mmod

    agg = _agg_unit(16, 16)
    params = {"workload": "ranges_2d"}
    levels_of(MatrixMechanism(), agg.grid, zcdp(0.5), params)  # fills the disk cache
    mmod.clear_memo()
    loads = []
    real = matrix_cache._load
    monkeypatch.setattr(matrix_cache, "_load", lambda *a, **kw: loads.append(1) or real(*a, **kw))
    m = MatrixMechanism()
    levels_of(m, agg.grid, zcdp(0.5), params)
    levels_of(m, agg.grid, zcdp(0.1), params)  # another ρ: the strategy is the same
    m.query_error(m.plan(agg.grid, zcdp(0.5), params), (0, 4, 0, 4))
    pipeline.release(plan_points(agg, "matrix", zcdp(0.5), params), agg,
                     ledger=Ledger(zcdp(1.0)), noise=NoiseSource(1))
    assert len(loads) == 1
    # another definition is another design (an L1 strategy), not the memoised one
    mx = levels_of(m, agg.grid, pure(0.5), params)[0].extra["matrix"]
    assert mx["pure_dp_fallback"] and mx["strategy"] != "kron-eigen"


def test_memoised_error_figures_give_the_same_release_and_are_not_shared() -> None:
    """The error report of a level is made once per workload, budget and sensitivity: a release
    made from the memo equals, to the bit, one made with the memo cleared (the figures made
    afresh), and a caller changing its release's figures does not change the next release's."""
    from dpcore.points.mechanisms import matrix as mmod

    m = MatrixMechanism()
    agg = _agg(TRUE, k=2)
    params = m.resolve_params({"workload": "ranges_2d"})

    def release():
        rel = m._release(agg, zcdp(0.5), dict(params), NoiseSource(3))
        return rel, json.dumps({"noisy": rel.noisy.tolist(), "sd": rel.sd.tolist(), "ci95": rel.ci95.tolist(),
                                "levels": repr(rel.levels), "matrix": rel.details["matrix"]}, sort_keys=True)

    mmod.clear_memo()
    first, fresh = release()
    first.details["matrix"]["groups"].clear()
    first.details["matrix"]["by_size"]["cells"].append(-1.0)
    first.sd[:] = -1.0
    again = release()[1]  # from the memo
    mmod.clear_memo()
    assert again == fresh == release()[1]


def test_same_rectangles_under_other_group_names_report_their_own_groups() -> None:
    """The memoised design holds the error profile per group: two uploads of the same rectangles
    with other group names each report their own groups (the second showed the first's)."""
    from dpcore.points.workload_io import parse_rectangles

    m, g = MatrixMechanism(), Grid(Bounds(0.0, 0.0, 1.0, 1.0), 4, 4)
    csv = "name,lon_min,lat_min,lon_max,lat_max,group\na,0.1,0.5,0.5,0.9,core\nb,0.5,0.0,1.0,0.5,edge\n"
    for names in (("core", "edge"), ("north", "south")):
        text = csv.replace("core", names[0]).replace("edge", names[1])
        params = {"workload": "uploaded", "rectangles": parse_rectangles(text).to_list()}
        mx = levels_of(m, g, zcdp(0.5), params)[0].extra["matrix"]
        assert [r["group"] for r in mx["groups"]] == list(names)


def test_ratio_is_null_when_the_svd_bound_is_zero(monkeypatch, tmp_path: Path) -> None:
    from dpcore.points.mechanisms import matrix as mmod

    mmod.clear_memo()
    monkeypatch.setattr(mmod, "_svd_bound", lambda w: 0.0)
    agg = _agg_unit(4, 4)
    led = Ledger(zcdp(1.0))
    rel = pipeline.release(plan_points(agg, "matrix", zcdp(0.5), {}), agg, ledger=led, noise=NoiseSource(1)).inner
    assert rel.details["matrix"]["ratio_to_lower_bound"] is None
    assert rel.details["matrix"]["rmse_lower_bound"] == 0.0
    write_files(release_files(rel, led), tmp_path)
    rec = json.loads((tmp_path / "release.json").read_text("utf-8"))
    assert rec["workload"]["ratio_to_lower_bound"] is None
    validate_record(rec)  # the schema allows null there (and still requires the key)
    rec["workload"]["ratio_to_lower_bound"] = "n/a"
    import jsonschema
    with pytest.raises(jsonschema.ValidationError):
        validate_record(rec)
    mmod.clear_memo()


def test_many_rectangles_on_a_large_grid_release_without_the_dense_matrix() -> None:
    """1,000 random rectangles on 256 × 256 (m·n = 65.5 M > the 50 M dense limit): the answers come
    from prefix sums; before, the release charged the ledger, drew the noise, then failed."""
    from dpcore.data.domain import Aggregate as _A
    from dpcore.data.domain import Bounds as _B
    from dpcore.data.domain import Grid as _G
    from dpcore.privacy import budget as _b
    from dpcore.privacy.noise import NoiseSource as _N

    g = _G(_B(0.0, 0.0, 1.0, 1.0), 256, 256)
    counts = np.zeros((256, 256), dtype=np.int64)
    counts[100:120, 30:90] = 3
    agg = _A(g, counts, n_outside=0, n_capped=0, sensitivity=1, user_cap=None)
    led = Ledger(_b.zcdp(1.0))
    params = {"workload": "random_rectangles", "rect_count": 1000, "rect_area": 0.01}
    rel = pipeline.release(plan_points(agg, "matrix", _b.zcdp(0.5), params), agg, ledger=led, noise=_N(5)).inner
    wa = rel.details["workload_answers"]
    assert len(wa["answer"]) == 1000 and len(led.entries) == 1
    from dpcore.data.domain import prefix_sums, rect_sums_from_prefix
    want = rect_sums_from_prefix(prefix_sums(rel.noisy.reshape(256, 256)), wa["rects"])
    np.testing.assert_allclose(wa["answer"], want, rtol=1e-9, atol=1e-6)
