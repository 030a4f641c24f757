"""The runtime's imports run one way (docs/launch-path.md, "The two halves of a kernel"): no two
modules of `tilelang/runtime` import each other, directly or through others (module- and
function-level imports alike), and no module inside the package imports the package root
`tilelang`, whose own imports run the other way."""

from __future__ import annotations

import ast
import os

from rt_support import ROOT

PKG = os.path.join(ROOT, "tilelang")


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _modules(root: str) -> dict[str, str]:
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                out[_module_name(path)] = path
    return out


def _imports(name: str, path: str, known) -> set[str]:
    """The modules of `known` that `name` imports, anywhere in its code: for
    `from P import x`, the submodule `P.x` when there is one, else `P`."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    base = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name, known) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                parts = base[:len(base) - node.level + 1]
                mod = ".".join(parts + ([mod] if mod else []))
            found.update(_resolve(f"{mod}.{a.name}", known) for a in node.names)
    return found - {None, name}


def _resolve(m: str, known) -> str | None:
    while m and m not in known:
        m = m.rpartition(".")[0]
    return m or None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                out.append(sorted(comp))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_runtime_has_no_import_circle():
    mods = _modules(os.path.join(PKG, "runtime"))
    graph = {n: _imports(n, p, mods) for n, p in mods.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_imports_the_package_root():
    """Checked for the runtime, the compiler's identity and the command lines."""
    mods = _modules(PKG)
    offenders = []
    for name, path in mods.items():
        if name == "tilelang" or not (name.startswith("tilelang.runtime") or name in (
                "tilelang.compiler_id", "tilelang.cli", "tilelang.lsp.server")):
            continue
        if "tilelang" in _imports(name, path, mods):
            offenders.append(name)
    assert offenders == []
