"""Hypothesis invariants of dpcore.estimate.tree_inference.tree_least_squares, the one tree
least-squares solver (Hay, Rastogi, Miklau & Suciu, PVLDB 2010, §4) behind the point tree
mechanisms and the hierarchy's ``hay``.

On small random forests (any fan-out, leaves at any depth, nodes in any order) with a noise
variance per node, some internal nodes not measured (σ² = ∞) and some roots public (σ² = 0):
the estimate is consistent (every internal node is the sum of its children) and equals the
dense weighted least-squares solution over the leaves, solved with ``numpy.linalg.lstsq`` on
the tree's constraint matrix (public roots as equality constraints, through a null-space
basis); the variances equal the diagonal of that solution's covariance.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.linalg import null_space

from dpcore.estimate.tree_inference import SparseTreeFit, tree_least_squares

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def forests(draw):
    """(parent, depth, noisy, variance) of a random forest of 1–14 nodes in a shuffled order."""
    n = draw(st.integers(min_value=1, max_value=14))
    par = [-1] + [draw(st.integers(min_value=-1, max_value=i - 1)) for i in range(1, n)]
    has_kids = np.zeros(n, dtype=bool)
    for p in par[1:]:
        if p >= 0:
            has_kids[p] = True
    var = []
    for i in range(n):
        v = draw(st.floats(min_value=0.05, max_value=20.0))
        if has_kids[i] and draw(st.integers(0, 3)) == 0:
            v = np.inf  # an internal node that is not measured
        elif par[i] < 0 and draw(st.integers(0, 3)) == 0:
            v = 0.0  # a root whose value is public
        var.append(v)
    noisy = [draw(st.floats(min_value=-50.0, max_value=50.0)) for _ in range(n)]
    depth = [0] * n
    for i in range(1, n):
        depth[i] = depth[par[i]] + 1 if par[i] >= 0 else 0
    perm = np.asarray(draw(st.permutations(range(n))), dtype=np.int64)  # node i goes to place inv[i]
    inv = np.argsort(perm)
    parent = np.asarray(par, dtype=np.int64)[perm]
    parent = np.where(parent >= 0, inv[np.maximum(parent, 0)], -1)
    return (parent, np.asarray(depth)[perm], np.asarray(noisy)[perm], np.asarray(var)[perm])


def design(parent: np.ndarray) -> np.ndarray:
    """A[v, j] = 1 when leaf j lies in node v's subtree: every node's count is A @ leaves."""
    n = parent.size
    leaves = np.flatnonzero(np.bincount(parent[parent >= 0], minlength=n) == 0)
    A = np.zeros((n, leaves.size))
    for j, leaf in enumerate(leaves):
        v = int(leaf)
        while v >= 0:
            A[v, j] = 1.0
            v = int(parent[v])
    return A


def dense_wls(parent, noisy, var):
    """Values and variances of weighted least squares over the leaves, by lstsq."""
    A = design(parent)
    meas = np.isfinite(var) & (var > 0)
    fixed = var == 0
    w = 1.0 / np.sqrt(var[meas])
    M, r = A[meas] * w[:, None], noisy[meas] * w
    C, c = A[fixed], noisy[fixed]
    x0 = np.linalg.lstsq(C, c, rcond=None)[0] if fixed.any() else np.zeros(A.shape[1])
    N = null_space(C) if fixed.any() else np.eye(A.shape[1])
    if N.shape[1]:
        t = np.linalg.lstsq(M @ N, r - M @ x0, rcond=None)[0]
        cov = N @ np.linalg.inv(N.T @ M.T @ M @ N) @ N.T
    else:
        t, cov = np.zeros(0), np.zeros((A.shape[1], A.shape[1]))
    x = x0 + N @ t
    return A @ x, np.einsum("ij,jk,ik->i", A, cov, A)


@SETTINGS
@given(forests())
def test_tree_least_squares_is_consistent_and_equals_dense_wls(tree):
    parent, depth, noisy, var = tree
    values, post = tree_least_squares(parent, depth, noisy, var)
    scale = max(1.0, float(np.abs(values).max()))
    # consistent: every internal node is the sum of its children
    child = parent >= 0
    sums = np.bincount(parent[child], weights=values[child], minlength=parent.size)
    internal = np.bincount(parent[child], minlength=parent.size) > 0
    np.testing.assert_allclose(values[internal], sums[internal], rtol=0, atol=1e-9 * scale)
    # public roots keep their value exactly, with no variance
    fixed = var == 0
    assert np.array_equal(values[fixed], noisy[fixed]) and np.all(post[fixed] == 0)
    # the dense weighted least-squares solution
    ref_v, ref_p = dense_wls(parent, noisy, var)
    np.testing.assert_allclose(values, ref_v, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(post, ref_p, rtol=1e-9, atol=1e-9)
    # never above the node's own noise variance
    assert np.all(post <= var)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forests(), st.data())
def test_sparse_fit_equals_the_full_two_passes_at_its_nodes(tree, data):
    """SparseTreeFit (both passes on the chosen nodes and their ancestors) reads the same values as
    tree_least_squares of the observations that are 0 outside the chosen nodes."""
    parent, depth, _, var = tree
    chosen = np.asarray(sorted(data.draw(st.sets(st.integers(0, parent.size - 1), min_size=1))), dtype=np.int64)
    obs = np.asarray(data.draw(st.lists(st.floats(-50.0, 50.0), min_size=chosen.size, max_size=chosen.size)))
    full_obs = np.zeros(parent.size)
    full_obs[chosen] = obs
    full = tree_least_squares(parent, depth, full_obs, var)[0]
    got = SparseTreeFit(parent, depth, var).at(chosen, obs)
    np.testing.assert_allclose(got, full[chosen], rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(full).max())))
