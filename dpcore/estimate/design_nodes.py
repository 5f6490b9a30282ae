"""A design's nodes and tree edges as flat arrays (``design.json``'s ``nodes`` and ``edges``).

``design.json`` lists, for every measured node, the finest cells it sums (``{"code": [cells]}``)
and the tree's edges (``[["parent", "child"], ...]``).  A kind that knows its design as arrays
(the O/D TopDown tree: 80k nodes) hands them over as :class:`NodeCells` and :class:`NodeEdges`
instead of a dict of 80k lists: they read as the mapping and the sequence of pairs they stand
for, are written as the very bytes ``orjson`` writes for those (:func:`json_default`, pyarrow's
string kernels instead of a Python object per node), and the reader
(:func:`dpcore.estimate.gls.measurements_from`) takes its indicator rows from the arrays.  Any
design read from a file becomes a :class:`NodeCells` through :meth:`NodeCells.of`, so both go
through one code path.
"""

from __future__ import annotations

import re
from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from itertools import chain
from typing import Any

import numpy as np
import orjson
import pandas as pd
from numpy.typing import NDArray

__all__ = ["NodeCells", "NodeEdges", "distinct_codes", "json_default", "repeated_codes_why"]

#: the characters orjson escapes in a string (checked over every code point): the rest it writes as they are
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def distinct_codes(codes: Sequence[str]) -> bool:
    """Whether no code repeats: what :class:`NodeCells` needs of a design's node codes.  The writers
    ask before they build one, and offer no data users' files when two nodes would share a code.

    >>> distinct_codes(["a", "b"]), distinct_codes(["a>b", "a>b"])
    (True, False)
    """
    return len(set(codes)) == len(codes)


def repeated_codes_why(codes: Sequence[str], nodes: str, fix: str, at_most: int = 3) -> str:
    """Why a design whose ``codes`` repeat (:func:`distinct_codes` false) offers no data users' files:
    the first ``at_most`` codes that name more than one of its ``nodes`` (how many in all beyond them),
    then ``fix``.  The record's ``data_users.why``, as a points release states its reason.

    >>> repeated_codes_why(["a", "b", "a", "c", "b", "c", "d", "d"], "areas", "make the codes unique.", 2)
    "the design codes 'a', 'b' (and 2 more) each name more than one of the areas, and design.json must name \
every node once: make the codes unique."
    >>> repeated_codes_why(["a", "a"], "pairs", "fix.")
    "the design code 'a' names more than one of the pairs, and design.json must name every node once: fix."
    """
    seen: set[str] = set()
    repeated: dict[str, None] = {}  # in the order they first repeat
    for code in codes:
        if code in seen:
            repeated[code] = None
        seen.add(code)
    named = list(repeated)
    if not named:
        raise ValueError("repeated_codes_why: no code repeats (ask distinct_codes first)")
    more = f" (and {len(named) - at_most} more)" if len(named) > at_most else ""
    which = ("the design code {} names" if len(named) == 1 else "the design codes {} each name").format(
        ", ".join(map(repr, named[:at_most])) + more)
    return f"{which} more than one of the {nodes}, and design.json must name every node once: {fix}"


def _json_strings(codes: Sequence[str]) -> Any:
    """Each code as orjson writes it, quotes included (a pyarrow string array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if _ESCAPED.search("".join(codes)) is None:  # the usual case: nothing to escape, a quote either side
        return pc.binary_join_element_wise('"', pa.array(codes, pa.string()), '"', "")
    return pa.array([orjson.dumps(c).decode() for c in codes], pa.string())


def _joined(items: Any, sep: str) -> str:
    """The strings of a pyarrow array joined with ``sep`` (one kernel call, no Python string per item)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    whole = pa.ListArray.from_arrays(pa.array([0, len(items)], pa.int32()), items)
    return str(pc.binary_join(whole, sep)[0].as_py())


class NodeCells(Mapping[str, list[int]]):
    """Node ``codes[i]`` sums the cells ``cells[ptr[i]:ptr[i + 1]]`` (positions in the design's
    ``cells``), as a read-only mapping ``{code: [cells]}`` in node order.  Codes are unique.

    >>> nodes = NodeCells(["all", "a", 'b"2'], np.array([0, 2, 3, 4]), np.array([0, 1, 0, 1]))
    >>> dict(nodes)
    {'all': [0, 1], 'a': [0], 'b"2': [1]}
    >>> nodes.json() == orjson.dumps(dict(nodes)), nodes.positions(["a", "z"]).tolist()
    (True, [1, -1])
    >>> edges = NodeEdges(nodes, np.array([0, 0]), np.array([1, 2]))
    >>> list(edges), edges.json() == orjson.dumps([list(e) for e in edges])
    ([('all', 'a'), ('all', 'b"2')], True)
    """

    def __init__(self, codes: Sequence[str], ptr: NDArray[np.int64], cells: NDArray[np.int64]) -> None:
        self.codes = list(codes)
        self.ptr = np.asarray(ptr, dtype=np.int64)
        self.cells = np.asarray(cells, dtype=np.int64)
        self._index: pd.Index | None = None
        self._quoted: Any = None

    @classmethod
    def of(cls, nodes: Mapping[str, Any]) -> NodeCells:
        """``nodes`` as it is when already one, else from a mapping of code -> cell positions (a
        parsed design.json: one pass over its lists)."""
        if isinstance(nodes, NodeCells):
            return nodes
        values = list(nodes.values())
        sizes = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
        cells = np.fromiter(chain.from_iterable(values), dtype=np.int64, count=int(sizes.sum()))
        return cls([str(k) for k in nodes], np.concatenate([[0], np.cumsum(sizes)]), cells)

    def __len__(self) -> int:
        return len(self.codes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.codes)

    def __getitem__(self, code: str) -> list[int]:
        i = int(self.positions([str(code)])[0])
        if i < 0:
            raise KeyError(code)
        return self.cells[self.ptr[i]:self.ptr[i + 1]].tolist()

    def items(self) -> ItemsView[str, list[int]]:
        """The pairs ``(code, cells)`` in node order, read from the arrays (no lookup per key)."""
        return _Items(self)

    def values(self) -> ValuesView[list[int]]:
        """The cells of every node in node order, read from the arrays (no lookup per key)."""
        return _Values(self)

    def _cell_lists(self) -> Iterator[list[int]]:
        flat, ptr = self.cells.tolist(), self.ptr.tolist()
        return (flat[ptr[i]:ptr[i + 1]] for i in range(len(self.codes)))

    @property
    def sizes(self) -> NDArray[np.int64]:
        """How many cells each node sums."""
        return np.diff(self.ptr)

    def positions(self, codes: Sequence[str]) -> NDArray[np.int64]:
        """The node position of every code (text), -1 where no node has it.  ``codes`` may repeat a
        code (each gets its position); the nodes' own codes may not (ValueError: no one position)."""
        wanted = pd.Index(codes, dtype=object)
        return np.asarray(self._unique_index().get_indexer(wanted), dtype=np.int64)

    def _unique_index(self) -> pd.Index:
        """The codes as a pandas index, made once; ValueError when a code repeats."""
        if self._index is None:
            # object dtype on both sides: matching against pandas' Arrow strings would cast them first
            index = pd.Index(self.codes, dtype=object)
            if not index.is_unique:  # pandas' lookup would refuse it too, without naming the code
                code = index[index.duplicated()][0]
                raise ValueError(f"NodeCells needs unique node codes: {code!r} names "
                                 f"{self.codes.count(code)} nodes.")
            self._index = index
        return self._index

    def rows(self, pos: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(indptr, indices)`` of the CSR rows of the nodes at ``pos``: row ``r`` lists node ``pos[r]``'s cells."""
        start, size = self.ptr[pos], self.sizes[pos]
        indptr = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
        # each row's cells are a run of the flat array: its start, then +1 along the run
        within = np.arange(int(indptr[-1]), dtype=np.int64) - np.repeat(indptr[:-1], size)
        return indptr, self.cells[np.repeat(start, size) + within]

    def quoted(self) -> Any:
        """Every code as a JSON string (pyarrow array; made once, shared with :class:`NodeEdges`).
        ValueError when a code repeats: design.json would name two nodes alike, and a reader would
        keep one of them (the index is the one :meth:`positions` then uses)."""
        if self._quoted is None:
            self._unique_index()
            self._quoted = _json_strings(self.codes)
        return self._quoted

    def json(self) -> bytes:
        """The bytes ``orjson.dumps({code: cells})`` writes (compact), built a column at a time."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.codes:
            return b"{}"
        text = pa.array(self.cells).cast(pa.string())  # the decimal digits orjson writes for an int
        lists = pc.binary_join(pa.LargeListArray.from_arrays(pa.array(self.ptr), text), ",")
        items = pc.binary_join_element_wise(self.quoted(), ":[", lists, "]", "")
        return ("{" + _joined(items, ",") + "}").encode("utf-8")


class _Items(ItemsView[str, list[int]]):
    """:meth:`NodeCells.items`: iterated from the arrays (Mapping's view asks ``__getitem__`` per
    key, a pandas lookup each: 3.3 s for 80k nodes)."""

    _mapping: NodeCells

    def __iter__(self) -> Iterator[tuple[str, list[int]]]:
        return zip(self._mapping.codes, self._mapping._cell_lists(), strict=True)


class _Values(ValuesView[list[int]]):
    """:meth:`NodeCells.values`: iterated from the arrays, as :class:`_Items`."""

    _mapping: NodeCells

    def __iter__(self) -> Iterator[list[int]]:
        return self._mapping._cell_lists()


class NodeEdges(Sequence[tuple[str, str]]):
    """The tree's edges as node positions of ``nodes``: ``(codes[parent[k]], codes[child[k]])``."""

    def __init__(self, nodes: NodeCells, parent: NDArray[np.int64], child: NDArray[np.int64]) -> None:
        self.nodes = nodes
        self.parent = np.asarray(parent, dtype=np.int64)
        self.child = np.asarray(child, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.parent.size)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return self.nodes.codes[int(self.parent[k])], self.nodes.codes[int(self.child[k])]

    def json(self) -> bytes:
        """The bytes ``orjson.dumps([[parent, child], ...])`` writes."""
        import pyarrow.compute as pc

        if not len(self):
            return b"[]"
        q = self.nodes.quoted()
        items = pc.binary_join_element_wise("[", q.take(self.parent), ",", q.take(self.child), "]", "")
        return ("[" + _joined(items, ",") + "]").encode("utf-8")


def json_default(obj: Any) -> Any:
    """``orjson.dumps(..., default=json_default)``: :class:`NodeCells` and :class:`NodeEdges` as
    their already written JSON."""
    if isinstance(obj, (NodeCells, NodeEdges)):
        return orjson.Fragment(obj.json())
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")
