"""Unit tests of dpcore.estimate.design_nodes: NodeCells as a mapping and its lookups."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from dpcore.estimate.design_nodes import NodeCells, NodeEdges


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


def test_items_and_values_read_the_arrays_without_a_lookup_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = _nodes()
    expected = {"all": [0, 1], "a": [0], "b": [1]}

    def no_lookup(self: NodeCells, codes: object) -> None:
        raise AssertionError("a lookup per key")

    monkeypatch.setattr(NodeCells, "positions", no_lookup)
    assert list(nodes.items()) == list(expected.items())
    assert list(nodes.values()) == list(expected.values())
    assert all(type(c) is int for v in nodes.values() for c in v)  # Python ints, as tolist() gives
    assert len(nodes.items()) == len(nodes.values()) == 3


def test_items_and_values_views_keep_the_mapping_answers() -> None:
    nodes = _nodes()
    assert ("a", [0]) in nodes.items() and ("a", [1]) not in nodes.items() and ("z", [0]) not in nodes.items()
    assert [1] in nodes.values() and [2] not in nodes.values()
    assert list(NodeCells([], np.array([0]), np.array([], dtype=np.int64)).items()) == []


def test_repeated_codes_are_not_written() -> None:
    # design.json as {"all": [0, 1], "a": [0], "all": [1]}: a reader keeps one "all" and loses a node
    nodes = NodeCells(["all", "a", "all"], np.array([0, 2, 3, 4]), np.array([0, 1, 0, 1]))
    with pytest.raises(ValueError, match="'all'.*2 nodes"):
        nodes.json()
    with pytest.raises(ValueError, match="unique"):
        NodeEdges(nodes, np.array([0]), np.array([1])).json()


def test_written_design_reads_back() -> None:
    nodes = _nodes()
    assert orjson.loads(nodes.json()) == {"all": [0, 1], "a": [0], "b": [1]}
    assert orjson.loads(NodeEdges(nodes, np.array([0, 0]), np.array([1, 2])).json()) == [["all", "a"], ["all", "b"]]
