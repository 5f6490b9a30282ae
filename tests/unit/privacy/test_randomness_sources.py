"""Release paths draw randomness only through dpcore.privacy.noise (DESIGN.md rule 2)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from points_helpers import plan_points

import dpcore

ROOT = Path(dpcore.__file__).resolve().parents[1]
DPCORE = ROOT / "dpcore"
# Made-up demo data and public evaluation workloads may use a seeded numpy PRNG:
# neither is part of a release.
ALLOWED = {"synthetic.py", "queries.py", "noise.py"}
FORBIDDEN_ATTRS = {"random"}  # np.random / numpy.random
FORBIDDEN_MODULES = {"random", "secrets"}


def _modules() -> list[Path]:
    """The library, and the app's pages and ui/ (issue 18: a page must not draw noise either)."""
    lib = [p for p in DPCORE.rglob("*.py") if p.name not in ALLOWED]
    app = [ROOT / "app.py", *(ROOT / "pages").rglob("*.py"), *(ROOT / "ui").rglob("*.py")]
    return sorted(lib + [p for p in app if p.is_file()])


def test_the_app_is_scanned() -> None:
    names = {str(p.relative_to(ROOT)) for p in _modules()}
    assert "app.py" in names
    assert any(n.startswith("pages/") for n in names) and any(n.startswith("ui/") for n in names)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_other_randomness_source(path: Path) -> None:
    tree = ast.parse(path.read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
            base = node.value
            if isinstance(base, ast.Name) and base.id in {"np", "numpy"}:
                pytest.fail(f"{path.name}:{node.lineno} uses numpy.random; draw noise through dpcore.privacy.noise")
        if isinstance(node, ast.Import):
            for a in node.names:
                assert a.name.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {a.name}"
                assert a.name != "numpy.random", f"{path.name} imports numpy.random"
        if isinstance(node, ast.ImportFrom) and node.module:
            assert node.module.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {node.module}"
            assert node.module != "numpy.random", f"{path.name} imports from numpy.random"


def test_release_does_not_touch_numpy_global_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full release with the secure source works with numpy's RNG entry points broken."""
    from dpcore import pipeline
    from dpcore.data import synthetic
    from dpcore.data.domain import Grid, aggregate_points
    from dpcore.privacy import budget
    from dpcore.privacy.ledger import Ledger

    df = synthetic.demo_points(5_000)
    agg = aggregate_points(df.lon.to_numpy(), df.lat.to_numpy(), Grid(synthetic.DEMO_BOUNDS, 64, 64))

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("numpy.random used in a release path")

    for name in ("default_rng", "laplace", "normal", "random", "randint", "Generator", "seed"):
        monkeypatch.setattr(np.random, name, boom)
    led = Ledger(budget.pure(3.0))
    for mech in ("ug", "identity", "uniform"):
        rel = pipeline.release(plan_points(agg, mech, 0.5, {}), agg, ledger=led).inner
        assert rel.n_rects >= 1
