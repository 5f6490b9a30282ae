"""The shape the design promises, checked on every run: one charging site, no import cycles (imports
inside functions included), dependencies pointing one way, no library module over 800 lines, no
Streamlit in the library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "dpcore"
#: Layers, lowest first: a module may import its own layer and those before it, never one after it.
LAYERS = [{"errors", "lazy", "__init__", "schemas"}, {"privacy"}, {"core", "estimate", "data"},
          {"points", "areas", "flows"}, {"catalog", "pipeline", "series"}, {"cli", "__main__"}]


def _modules() -> dict[str, Path]:
    out = {}
    for p in LIB.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every dpcore module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dpcore")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.startswith("dpcore"):
                subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
                # ``from package import module`` depends on the module; the package's own code only
                # when a name comes from it
                found |= subs if len(subs) == len(node.names) else subs | {base}
    return {m for m in found if m in known and m != name}


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    return next(i for i, names in enumerate(LAYERS) if top in names)


def test_the_session_is_the_only_code_that_charges_a_budget() -> None:
    charging = []
    for p in [*LIB.rglob("*.py"), *(ROOT / "ui").rglob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py"]:
        for node in ast.walk(ast.parse(p.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "spend", "charge"):
                receiver = node.func.value
                if isinstance(receiver, ast.Call) and getattr(receiver.func, "id", "") == "super":
                    continue  # a ledger subclass handing on to its own base class
                charging.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert len(charging) == 1 and charging[0].startswith("dpcore/core/session.py:"), charging


def test_no_import_cycles_and_dependencies_point_one_way() -> None:
    mods = _modules()
    graph = {m: _imports(p, m, set(mods)) for m, p in mods.items()}
    upward = [f"{m} -> {d}" for m, ds in graph.items() for d in ds
              if m != "dpcore" and d != "dpcore" and _layer(d) > _layer(m)]
    assert not upward, "imports against the layering (privacy <- core, estimate, data <- kinds <- cli): " + \
        "; ".join(sorted(upward))
    # Tarjan's strongly connected components: any component of two or more modules is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v] - {"dpcore"}:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, cycles


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_library_modules_stay_under_800_lines_and_free_of_streamlit(path: Path) -> None:
    text = path.read_text("utf-8")
    assert text.count("\n") <= 800, f"{path.name} has {text.count(chr(10))} lines; split it by topic"
    tree = ast.parse(text)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(n.split(".")[0] == "streamlit" for n in names), "dpcore never imports streamlit"


KINDS = ("points", "areas", "flows")


def test_kinds_are_siblings_no_kind_imports_another() -> None:
    """What two kinds share (the public geography, map styles, records) lives below them, in
    ``dpcore/data`` and ``dpcore/core``; a kind never reaches into a sibling kind."""
    mods = _modules()
    crossing = [f"{m} -> {d}" for m, p in mods.items() for d in _imports(p, m, set(mods))
                if len(m.split(".")) > 1 and len(d.split(".")) > 1
                and m.split(".")[1] in KINDS and d.split(".")[1] in KINDS and m.split(".")[1] != d.split(".")[1]]
    assert not crossing, "kinds import sibling kinds: " + "; ".join(sorted(crossing))


def _private_imports(path: Path, name: str) -> list[str]:
    """``from dpcore.x import _name`` and ``dpcore.x._name`` where ``dpcore.x`` is another package."""
    own = name.split(".")[:2]
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpcore") and not node.level:
            other = node.module.split(".")[:2] != own
            found += [f"{node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__") and other]
    return found


@pytest.mark.parametrize("where", ["dpcore", "ui", "pages"])
def test_no_module_imports_another_packages_private_name(where: str) -> None:
    bad = []
    for p in (ROOT / where).rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        bad += [f"{'.'.join(parts)} imports {x}" for x in _private_imports(p, ".".join(parts))]
    assert not bad, "; ".join(sorted(bad))


def test_the_rule_finds_a_private_import_from_another_package(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("from dpcore.areas.hierarchy import _plural\nfrom dpcore.flows.tree import _own\n", "utf-8")
    assert _private_imports(f, "dpcore.flows.counts") == ["dpcore.areas.hierarchy._plural"]
