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


def _randomness_uses(tree: ast.AST) -> list[str]:
    """Every way ``tree`` reaches a random source other than dpcore.privacy.noise: ``np.random`` (under
    any name numpy is imported as), ``import random`` / ``secrets`` / ``numpy.random``, ``from numpy
    import random``, ``os.urandom`` and scipy's ``.rvs(`` samplers."""
    numpy_names = {"np", "numpy"} | {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                                     for a in n.names if a.name == "numpy"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
            base = node.value
            if isinstance(base, ast.Name) and base.id in numpy_names:
                found.append(f"{node.lineno}: numpy.random")
        if isinstance(node, ast.Attribute) and node.attr == "urandom":
            found.append(f"{node.lineno}: os.urandom")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rvs":
            found.append(f"{node.lineno}: a scipy sampler (.rvs)")
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in FORBIDDEN_MODULES or a.name.startswith("numpy.random"):
                    found.append(f"{node.lineno}: import {a.name}")
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES or node.module.startswith("numpy.random"):
                found.append(f"{node.lineno}: from {node.module} import")
            if node.module == "numpy" and any(a.name == "random" for a in node.names):
                found.append(f"{node.lineno}: from numpy import random")
            if node.module == "os" and any(a.name == "urandom" for a in node.names):
                found.append(f"{node.lineno}: from os import urandom")
    return found


@pytest.mark.parametrize("source", [
    "from numpy import random\nrandom.laplace(1.0)",
    "from scipy import stats\nstats.laplace(scale=2).rvs(size=3)",
    "import numpy as xp\nxp.random.default_rng()",
    "from numpy.random import default_rng",
    "import random",
    "import os\nos.urandom(8)",
])
def test_the_scan_finds_each_way_to_randomness(source: str) -> None:
    """Each way to a random source is caught (issue 26 item 17: ``from numpy import random`` and
    ``.rvs(`` were missed)."""
    assert _randomness_uses(ast.parse(source))


def test_the_scan_leaves_ordinary_code_alone() -> None:
    assert _randomness_uses(ast.parse("import numpy as np\nnp.sum([1])\nfrom dpcore.privacy import noise")) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_other_randomness_source(path: Path) -> None:
    found = _randomness_uses(ast.parse(path.read_text("utf-8")))
    assert not found, f"{path.name} reaches randomness outside dpcore.privacy.noise: {found}"


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
