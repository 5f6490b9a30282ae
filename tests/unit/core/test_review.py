"""The review record (issue 25 item 7): deployment.yaml in the OpenDP Deployments Registry's fields and
review.html, written with every kind's files."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest
from areas_helpers import plan_census, plan_hierarchy
from flows_helpers import plan_od
from points_helpers import plan_points

from dpcore import pipeline
from dpcore.areas import census_tables
from dpcore.areas.counts import HierarchyCounts
from dpcore.core.reliability import apply_to_files
from dpcore.core.review import deployment, level_guidance, to_yaml
from dpcore.data.domain import Aggregate, Bounds, Grid
from dpcore.data.hierarchy import Hierarchy
from dpcore.data.synthetic import synthetic_census
from dpcore.flows.counts import ODCounts
from dpcore.privacy import budget
from dpcore.privacy.ledger import Ledger
from dpcore.privacy.noise import NoiseSource

#: The registry's required fields and closed vocabularies, written out from
#: opendp/deployments-registry-data schemas/deployments-schema.yaml (commit 3e9c812): the top level and
#: ``deployment`` refuse unknown keys; ``basic`` requires its seven fields; enums as listed there.
_OBJ = {"type": "object", "additionalProperties": False}
REGISTRY = {
    **_OBJ, "required": ["url_slug", "status", "tier", "deployment"],
    "properties": {
        "url_slug": {"type": "string"},
        "status": {"enum": ["Converted", "Draft", "Pending", "Changes Required", "Approved",
                            "Approved (Update Requested)", "Approved (Pending)"]},
        "tier": {"enum": [1, 2, 3]},
        "deployment": {**_OBJ, "required": ["basic"], "properties": {
            "basic": {**_OBJ, "required": ["name", "data_curators", "description", "intended_use", "data_product_type",
                                           "data_product_region", "publication_date"],
                      "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                                     "intended_use": {"type": "string"}, "data_product_region": {"type": "string"},
                                     "data_curators": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                                     "data_product_type": {"enum": ["Summary statistics", "Machine learning model",
                                                                    "Dataset", "Synthetic data", "Interactive API",
                                                                    "SQL queries"]},
                                     "publication_date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}}},
            "dp_variant": {**_OBJ, "properties": {
                "variant_name": {"enum": ["Pure DP", "Approximate DP", "Zero-concentrated DP", "Renyi DP", "Custom"]},
                "data_domain": {"type": "string"}, "unprotected_quantities": {"type": "string"}}},
            "privacy_loss": {**_OBJ, "properties": {
                "privacy_unit": {"type": "string"}, "privacy_unit_details": {"type": "string"},
                "privacy_parameters": {**_OBJ, "properties": {"epsilon": {"type": "number"},
                                                              "delta": {"type": ["number", "string"]},
                                                              "rho": {"type": "number"}}},
                "privacy_parameters_details": {}}},
            "deployment_model": {**_OBJ, "properties": {
                "model_name": {"enum": ["Local", "Central", "Shuffle", "Federated", "Varies"]},
                "model_name_details": {"type": "string"}, "actors": {"type": "string"},
                "release_type": {"enum": ["One release", "Many releases"]}, "release_type_details": {"type": "string"},
                "data_source_type": {"enum": ["Static", "Dynamic"]}, "data_source_type_details": {},
                "access_type": {"enum": ["Interactive", "Non-interactive"]}, "access_type_details": {"type": "string"}}},
            "accounting": {**_OBJ, "properties": {"post_processing": {"type": "string"},
                                                  "composition": {"type": "string"}}},
            "implementation": {**_OBJ, "properties": {"preprocessing_and_hyperparameter_tuning": {"type": "string"},
                                                      "mechanisms": {"type": "string"},
                                                      "justification": {"type": "string"}}},
            "administrative": {**_OBJ, "required": ["registry_authors"], "properties": {
                "sources": {"type": "string"}, "notes": {"type": "string"},
                "registry_authors": {"type": "array", "items": {"type": "string"}, "minItems": 1}}},
        }},
    },
}


def read_yaml(text: str) -> Any:
    """A reader of the block YAML subset dpcore writes (mappings, '- ' lists, JSON-quoted scalars, numbers,
    booleans, '|-' literal blocks), independent of the writer; comments skipped."""
    lines = [ln for ln in text.split("\n") if ln.strip() and not ln.lstrip().startswith("#")
             or (ln.strip() == "")]

    def scalar(s: str) -> Any:
        s = s.strip()
        if s in ("true", "false"):
            return s == "true"
        return json.loads(s)

    def block(i: int, indent: int) -> tuple[Any, int]:
        while i < len(lines) and not lines[i].strip():
            i += 1
        is_list = lines[i].lstrip().startswith("- ") or lines[i].strip() == "-"
        out: Any = [] if is_list else {}
        while i < len(lines):
            ln = lines[i]
            if not ln.strip():
                i += 1
                continue
            ind = len(ln) - len(ln.lstrip())
            if ind < indent:
                break
            body = ln.strip()
            if is_list:
                val = body[1:].strip()
                if val:
                    out.append(scalar(val))
                    i += 1
                else:
                    v, i = block(i + 1, indent + 2)
                    out.append(v)
                continue
            key, _, val = body.partition(":")
            val = val.strip()
            if val == "|-":
                j, texts = i + 1, []
                while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > ind):
                    texts.append(lines[j][ind + 2:])
                    j += 1
                out[key] = "\n".join(texts).rstrip("\n")
                i = j
            elif val:
                out[key] = scalar(val)
                i += 1
            else:
                out[key], i = block(i + 1, ind + 2)
        return out, i

    return block(0, 0)[0]


def test_yaml_round_trips_through_an_independent_reader():
    obj = {"a": 1.5, "b": ["x: y", "z"], "c": {"d": "two\nlines: here", "e": True, "f": {"g": 'q"uote'}}}
    assert read_yaml(to_yaml(obj)) == obj


def _points() -> Any:
    counts = np.random.default_rng(1).poisson(20, size=(8, 8)).astype(np.int64)
    agg = Aggregate(grid=Grid(Bounds(-74.06, 40.56, -73.70, 40.92), 8, 8), counts=counts, n_outside=0, n_capped=0,
                    sensitivity=1, user_cap=None)
    return plan_points(agg, "quadtree", 1.0, {"height": 2}), agg, Ledger(budget.pure(3.0), dataset="x")


def _hierarchy() -> Any:
    areas = pd.DataFrame({"state": ["01", "01", "02"], "county": ["001", "003", "001"], "pop": [500, 900, 40]})
    h = Hierarchy.from_frame(areas, ["state", "county"])
    c = HierarchyCounts.from_frame(areas, h, ["state", "county"], "pop")
    return plan_hierarchy(c, "topdown_l2", budget.zcdp(0.5)), c, Ledger(budget.zcdp(2.0), dataset="x")


def _census() -> Any:
    t = census_tables.CensusTable.from_frame(synthetic_census(), ["state", "county", "tract"], "population")
    return plan_census(t, "privelet", budget.pure(1.0)), t, Ledger(budget.pure(2.0), dataset="x")


def _od() -> Any:
    zones = [(r, z) for r in ("01", "02") for z in ("1", "2")]
    h = Hierarchy.from_frame(pd.DataFrame(zones, columns=["region", "zone"]), ["region", "zone"])
    labels = ["/".join(z) for z in zones]
    flows = pd.DataFrame({"origin": np.repeat(labels, 4), "destination": np.tile(labels, 4),
                          "count": np.arange(16) * 3 + 5})
    c = ODCounts.from_frame(flows, h, origin="origin", destination="destination", count="count")
    return plan_od(c, "inftda", budget.zcdp(1.0)), c, Ledger(budget.zcdp(5.0), dataset="x")


@pytest.mark.parametrize("make", [_points, _hierarchy, _census, _od], ids=["points", "hierarchy", "census", "od"])
def test_every_kind_writes_a_registry_entry_and_a_review_page(make):
    plan, agg, led = make()
    kr = pipeline.release(plan, agg, ledger=led, noise=NoiseSource(3))
    files = kr.files(led)
    assert {"deployment.yaml", "review.html"} <= set(files)
    entry = read_yaml(files["deployment.yaml"].decode())
    jsonschema.validate(entry, REGISTRY)
    rec = json.loads(files["release.json"])
    assert entry == json.loads(json.dumps(deployment(rec)))  # built from release.json alone
    params = entry["deployment"]["privacy_loss"]["privacy_parameters"]
    if rec["privacy"]["cost"]["definition"] == "pure":
        assert params == {"epsilon": rec["privacy"]["cost"]["value"]}
    else:
        assert params["rho"] == rec["privacy"]["cost"]["value"] and 0 < params["delta"] < 1 and params["epsilon"] > 0
    assert entry["deployment"]["basic"]["publication_date"] == rec["created"][:10]
    page = files["review.html"].decode()
    for part in ("What was released", "Privacy and budget", "Errors per level", "Reliability",
                 "What is not protected", "Sign-off", rec["release_id"]):
        assert part in page
    assert "Use at " in page or "No level is reliable" in page
    assert "Horizon: " in page


#: What a Python or JSON dict or list printed into the page would show (its braces, quoted keys, escapes).
CODE_MARKS = ("{", "}", "\\u", "': ", "\": ", "['", "[\"", "True", "False", "None", "_remove", "rho-zCDP",
              "epsilon =", "release of od", "release of hierarchy", "release of census")


@pytest.mark.parametrize("make, says", [
    (_points, ["a release of points", "Privacy guarantee of this release: ε = 1 (pure differential privacy)",
               "Unit of privacy (whom the guarantee protects): one record (point)",
               "Charged to the privacy budget of this data set: ε = 3 in all; ε = 1 spent so far",
               "level 2 (cells of about 7.6 × 10 km)", "Use at level 2 (cells of about 7.6 × 10 km) or coarser"]),
    (_hierarchy, ["a release of counts over areas", "ρ = 0.5 (zero-concentrated differential privacy, zCDP; "
                  "about ε = 6.5 at δ = 10⁻⁹)", "ρ = 2 in all; ρ = 0.5 spent so far", "Use at level county or coarser",
                  "one such unit is added to or removed from the data"]),
    (_census, ["a release of counts over areas", "ε = 1 (pure differential privacy)",
               "Two data\nsets count as neighbours when one person is added to or removed from the data",
               "Use at level tract or coarser"]),
    (_od, ["a release of trips between areas", "ρ = 1 (zero-concentrated differential privacy, zCDP; about ε = 9 at "
           "δ = 10⁻⁸)", "one person, who may make up to 1 trip, counted once",
           "one person is replaced by another (so the total number is public)",
           "trips from each region to each zone (region&gt;zone in release.csv)",
           "Use at the table of trips from each zone to each zone (zone in release.csv) or coarser",
           "The total is published exactly (not noisy): 440."]),
], ids=["points", "hierarchy", "census", "od"])
def test_the_review_page_is_plain_words(make, says):
    """review.html is read by a disclosure officer who is no DP expert: every line is words (shared/UX.md:
    plain words first, the symbol second; names, not codes), never a printed dict, list or code; the
    record (release.json) keeps its fields as they were."""
    plan, agg, led = make()
    files = pipeline.release(plan, agg, ledger=led, noise=NoiseSource(3)).files(led)
    page = files["review.html"].decode()
    for mark in CODE_MARKS:
        assert mark not in page, mark
    for sentence in says:
        assert sentence in page, sentence
    rec = json.loads(files["release.json"])
    assert isinstance(rec["privacy"]["cost"], dict) and "statement" in rec["level_guidance"]  # as before


def test_public_totals_caps_and_unaccounted_releases_are_listed_as_unprotected():
    rec = {"kind": "hierarchy", "privacy": {"unit_of_privacy": "one person, at most 2 records",
                                            "invariants": [{"level": "total", "value": 1234}]},
           "ledger": {"accounted": False, "note": "not accounted"}}
    text = deployment(rec)["deployment"]["dp_variant"]["unprotected_quantities"]
    assert "1234" in text and "at most 2 records" in text and "charged to no budget" in text


def test_use_level_is_the_finest_level_under_the_threshold():
    csv = (b"level,noisy_count,noise_sd\n" + b"".join(b"a,%d,5\n" % v for v in (400, 500))
           + b"".join(b"b,%d,5\n" % v for v in (40, 30, 10)) + b"".join(b"c,%d,5\n" % v for v in (3, 9, 2, 1)))
    g = level_guidance(csv, 0.3)
    assert [r["median_cv"] for r in g["levels"]] == pytest.approx(
        [(5 / 400 + 5 / 500) / 2, 5 / 30, (5 / 3 + 5 / 2) / 2], rel=1e-5)  # medians of the cells' CVs
    assert g["use_level"] == "b" and "Use at level b or coarser" in g["statement"]
    assert level_guidance(csv, 0.1)["use_level"] == "a"
    assert level_guidance(csv, 0.001)["use_level"] is None


def test_the_reliability_rule_is_stated_in_the_review():
    plan, agg, led = _hierarchy()
    made = pipeline.release(plan, agg, ledger=led, noise=NoiseSource(3))
    files = made.files(led, suppress="cv=0.3")  # the rule and the review record in the one call
    assert "No reliability rule" not in files["review.html"].decode()
    plain = apply_to_files(made.files(led), "cv=0.3")  # the rule alone leaves the review as it was
    assert plain["review.html"] == made.files(led)["review.html"] != files["review.html"]
    assert "cv" in read_yaml(files["deployment.yaml"].decode())["deployment"]["accounting"]["post_processing"]


def test_an_odd_record_still_gets_a_review_page_saying_so():
    from dpcore.core.review import with_review

    out = with_review({"release.json": b'{"privacy": {"cost": {"definition": "pure"}}}'})  # no value: refused
    assert "deployment.yaml" not in out and b"could not be built" in out["review.html"]


def test_a_series_horizon_is_stated():
    from dpcore.core.review import review_html

    rec = {"privacy": {"cost": {"definition": "zcdp", "value": 0.5}}, "ledger": {"accounted": False},
           "series": {"horizon": 52}}
    assert "Horizon: 52 periods." in review_html(rec).decode()


@pytest.mark.parametrize("block", [1 << 24, 40])
def test_level_guidance_reads_small_and_large_tables_alike(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small published table is read by the csv module, a large one by pyarrow a block at a time
    (40 bytes: a block of a row or two, the levels' order kept across blocks): the same columns."""
    from dpcore.core import review

    monkeypatch.setattr(review, "_BLOCK", block)
    data = (b"id,level,noisy_count,noise_sd,west\n0,\"state, all\",100,3,-74.06\n1,county,20,3.5,-73.88\n"
            b"2,county,-4,3.5,-73.7\n3,county,,3.5,0.1\n4,tract,7,NaN,\n")
    wanted = ("noisy_count", "noise_sd", "west", "east")  # no east in this table: left out, not an error
    small = review._small_columns(data, wanted)
    large = review._arrow_columns(data, wanted)
    assert small is not None and large is not None
    # levels as codes into their names, in the order the table lists them
    assert small[0].tolist() == large[0].tolist() == [0, 1, 1, 1, 2]
    assert small[1].tolist() == large[1].tolist() == ["state, all", "county", "tract"]
    assert list(small[2]) == list(large[2]) == ["noisy_count", "noise_sd", "west"]
    for c in small[2]:
        np.testing.assert_array_equal(small[2][c], large[2][c])  # NaN where empty or not a number, in both
    assert review._small_columns(b"a,b\n1,2\n") is None and review._arrow_columns(b"a,b\n1,2\n") is None


def test_an_approximate_dp_release_and_one_charged_to_no_budget_read_as_sentences():
    """An (ε, δ) mechanism has no pure or zCDP cost: its own reading is stated; a release charged to
    no budget says so as a sentence."""
    from dpcore.core.review import review_html

    rec = {"kind": "od", "privacy": {"definition": "approximate (epsilon, delta)-DP",
                                     "approx_dp": {"delta": 1e-8, "epsilon": 1.0},
                                     "unit_of_privacy": {"max_trips": 3, "distinct": False}},
           "ledger": {"accounted": False, "note": "not accounted: this release was charged to no budget (--no-budget)"}}
    page = review_html(rec).decode()
    assert "Privacy guarantee of this release: ε = 1, δ = 10⁻⁸ (approximate differential privacy)." in page
    assert "one person, who may make up to 3 trips, several of them possibly between the same pair of areas" in page
    assert "Not accounted: this release was charged to no budget (--no-budget)." in page
    assert page.count("charged to no budget") == 1  # said where the budget is, not again as "not protected"
    assert not any(mark in page for mark in CODE_MARKS)
