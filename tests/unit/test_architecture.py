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
LAYERS = [{"errors", "_lazy", "__init__", "schemas"}, {"privacy"}, {"core", "estimate", "data"},
          {"points", "areas", "flows"}, {"catalog", "pipeline"}, {"cli", "__main__"}]


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
