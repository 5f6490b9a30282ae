"""Unit tests of dpcore.estimate.design_nodes: NodeCells as a mapping and its lookups."""

from __future__ import annotations

import numpy as np
import pytest

from dpcore.estimate.design_nodes import NodeCells


def _nodes() -> NodeCells:
    return NodeCells(["all", "a", "b"], np.array([0, 2, 3, 4]), np.array([0, 1, 0, 1]))


def test_repeated_codes_are_refused_by_name() -> None:
    # a repeated code has no one position: pandas refused it with "Reindexing only valid with uniquely
    # valued Index objects" (no code named); the positions of other codes are as before
    nodes = NodeCells(["all", "a", "all"], np.array([0, 2, 3, 4]), np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="'all'.*2 nodes"):
        nodes.positions(["a"])
    with pytest.raises(ValueError, match="unique"):
        nodes["a"]


def test_repeated_codes_asked_for_each_get_their_position() -> None:
    assert _nodes().positions(["b", "all", "b", "z", "b"]).tolist() == [2, 0, 2, -1, 2]
