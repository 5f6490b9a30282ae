"""The data users' files load into Private-PGM (``mbi``, McKenna, Sheldon & Miklau, ICML 2019) as
linear measurements, and our GLS estimate is the minimiser of Private-PGM's own L2 loss.

One attribute ``cell`` (the finest cells of design.json); every level of measurements.csv (or of
measurements.parquet, which a large release writes instead; the test writes both) is one
``LinearMeasurement`` whose query sums the cells of each measured node (the design's rows) and whose
``stddev`` is √variance.  Private-PGM's loss is ``½ Σ ((Qμ − y)/σ)²``: the GLS objective, so its
gradient at the GLS estimate must vanish (float64, relative to the gradient at the published values).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcore import catalog
from dpcore.areas.counts import HierarchyCounts
from dpcore.areas.data_users import hierarchy_data_user_files
from dpcore.data.hierarchy import Hierarchy
from dpcore.estimate.data_user_format import measurements_in, read_measurements
from dpcore.estimate.gls import gls_estimate, read_release
from dpcore.privacy import budget
from dpcore.privacy.noise import NoiseSource


@pytest.fixture(scope="module")
def pgm() -> tuple[Any, Any]:
    """Private-PGM (``mbi``) and jax, imported when the test runs, not when it is collected (jax's
    import took 2 s of every worker's collection); the test is skipped where they are missing."""
    return pytest.importorskip("mbi"), pytest.importorskip("jax")


def linear_measurements(folder: Path, mbi: Any) -> tuple[object, list[object]]:
    """The release's measurements as mbi ``LinearMeasurement``s over the domain {cell: n}."""
    import jax.numpy as jnp

    m = read_release(folder)
    meas = read_measurements(folder / measurements_in([p.name for p in folder.iterdir()]))
    domain = mbi.Domain(["cell"], [m.n])
    out = []
    for _, rows in meas.groupby("level", sort=False):
        A = jnp.asarray(m.A[rows.index.to_numpy()].toarray())
        sd = np.sqrt(rows["variance"].to_numpy())
        assert np.allclose(sd, sd[0])  # one noise scale per level
        out.append(mbi.LinearMeasurement(rows["value"].to_numpy(float), ("cell",), stddev=float(sd[0]),
                                         query=lambda f, A=A: A @ f.datavector(flatten=True)))
    return domain, out


@pytest.mark.parametrize("parquet_above", [None, 0], ids=["csv", "parquet"])
def test_measurements_load_into_private_pgm_and_gls_minimises_its_loss(tmp_path: Path, pgm: tuple[Any, Any],
                                                                       parquet_above: int | None) -> None:
    mbi, jax = pgm
    jax.config.update("jax_enable_x64", True)
    from mbi import CliqueVector, Factor, marginal_loss

    df = pd.DataFrame({"s": list("aaabbbcc"), "c": ["1", "2", "3", "1", "2", "3", "1", "2"]})
    h = Hierarchy.from_frame(df, ["s", "c"])
    counts = HierarchyCounts.from_frame(df.assign(n=[5, 0, 12, 7, 3, 9, 1, 20]), h, ["s", "c"], "n")
    rel = catalog.get("hierarchy", "topdown_l2").release_counts(counts, budget.zcdp(0.5), NoiseSource(4))
    folder = tmp_path / "out"
    folder.mkdir()
    files = hierarchy_data_user_files(rel, parquet_above)
    assert ("measurements.parquet" in files) == (parquet_above == 0) != ("measurements.csv" in files)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    domain, ms = linear_measurements(folder, mbi)
    assert len(ms) == 3 and [np.size(m.noisy_measurement) for m in ms] == [1, 3, 8]
    loss = marginal_loss.from_linear_measurements(ms, domain)

    def value(v):
        return loss(CliqueVector(domain, [("cell",)], {("cell",): Factor(domain, v)}))

    x_hat = np.asarray(gls_estimate(read_release(folder)))
    published = np.asarray(rel.values[-1], float)
    g_hat = np.asarray(jax.grad(value)(jax.numpy.asarray(x_hat)))
    g_pub = np.asarray(jax.grad(value)(jax.numpy.asarray(published)))
    assert np.abs(g_hat).max() < 1e-9 * max(1.0, np.abs(g_pub).max())
    assert float(value(x_hat)) < float(value(published))
