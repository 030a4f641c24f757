"""The package's imports run one way (docs/codegen.md, "Layers"; docs/architecture.md).

Read from the code, not from `sys.modules`: every `import` and `from ... import` statement of
every module under tilelang/, at module level or inside a function alike (a function-level import
is still a dependency, only a later one). A strongly connected set of more than one module is an
import circle; inside tilelang/codegen the layers may import only downward; and no module imports
the package root `tilelang` itself (its __init__ imports the driver, which imports everything).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tilelang"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under `package` (a package is named by
    its __init__.py)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _absolute(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a `from` statement names, relative imports resolved against `name`."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if is_package else name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path, known: set[str]) -> dict[str, int]:
    """The modules of `known` that module `name` imports -> the line of the first such import.
    `from p import x` depends on module p.x when there is one, else on p; an import of a module
    not in `known` is charged to its nearest enclosing module that is (or dropped)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(name, is_package, node)
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                add(sub if sub in known else mod, node.lineno)
    return found


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    files = module_files(package)
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan's algorithm, iterative so
    that a deep package cannot overflow the interpreter's stack), each sorted. An import of an
    enclosing package is left out: importing a module runs its packages' __init__ first anyway
    (the package root's own case is `test_nothing_inside_imports_the_package_root`)."""
    graph = {m: {t: n for t, n in deps.items() if not m.startswith(t + ".")}
             for m, deps in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, successors = work[-1]
            advanced = False
            for w in successors:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w == v:
                        break
                if len(members) > 1:
                    out.append(sorted(members))
    return sorted(out)


def _show(sets: list[list[str]], graph) -> str:
    lines = []
    for members in sets:
        lines.append(f"{len(members)} modules: " + " ".join(members))
        for m in members:
            for target, line in sorted(graph[m].items()):
                if target in members:
                    lines.append(f"    {m} -> {target} (line {line})")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the graph reader


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "pkg"


def test_reader_finds_a_circle_through_a_function_level_import(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import f\n",
        "pkg/b.py": "def f():\n    from pkg import a\n    return a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    graph = import_graph(pkg)
    assert graph["pkg.b"] == {"pkg.a": 2}
    assert circles(graph) == [["pkg.a", "pkg.b"]]


def test_reader_resolves_relative_imports_and_names_that_are_not_modules(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "VERSION = 1\n",
        "pkg/sub/__init__.py": "from . import x\n",
        "pkg/sub/x.py": "from ..y import g\nfrom .. import VERSION\n",
        "pkg/y.py": "from pkg.sub import x as _x\n",
    })
    graph = import_graph(pkg)
    assert graph["pkg.sub"] == {"pkg.sub.x": 1}
    assert graph["pkg.sub.x"] == {"pkg.y": 1, "pkg": 2}
    assert circles(graph) == [["pkg.sub.x", "pkg.y"]]


def test_reader_leaves_out_imports_of_enclosing_packages(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "def __getattr__(name):\n    from pkg import a\n    return a\n",
        "pkg/a.py": "from pkg import VERSION\n",
    })
    graph = import_graph(pkg)
    assert graph == {"pkg": {"pkg.a": 2}, "pkg.a": {"pkg": 1}}
    assert circles(graph) == []


def test_reader_sees_no_circle_in_a_chain(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import pkg.b\n",
        "pkg/b.py": "import pkg.c\nimport os\n",
        "pkg/c.py": "",
    })
    assert circles(import_graph(pkg)) == []


# --------------------------------------------------------------------------- the package

GRAPH = import_graph(PACKAGE)
CODEGEN = "tilelang.codegen"


def test_no_import_circle_in_codegen():
    found = [c for c in circles(GRAPH) if any(m.startswith(CODEGEN + ".") for m in c)]
    assert not found, "import circles in tilelang/codegen:\n" + _show(found, GRAPH)


def test_no_import_circle_in_the_package():
    found = circles(GRAPH)
    assert not found, "import circles in tilelang/:\n" + _show(found, GRAPH)


def test_nothing_inside_imports_the_package_root():
    users = sorted(f"{m} (line {deps['tilelang']})" for m, deps in GRAPH.items()
                   if m != "tilelang" and "tilelang" in deps)
    assert not users, "modules importing the package root `tilelang`: " + ", ".join(users)


# The code generator's layers (docs/codegen.md, "Layers"): what each may import inside
# tilelang/codegen, by the first name under it. Outside codegen anything below it (ir, sema,
# diagnostics, ...) is allowed; the root package's modules are their own layers.
BELOW_EMIT = {"emit", "layouts", "scalar", "api"}
LAYERS = {
    "generate": None,                                     # the entry: anything
    "walk": {"walk", "lower", "plan", "occupancy"} | BELOW_EMIT,
    "lower": {"lower", "plan", "occupancy"} | BELOW_EMIT,
    "plan": {"plan", "occupancy", "layouts", "scalar", "api"},   # data from the IR, not code
    "emit": BELOW_EMIT,
    "layouts": {"layouts"},
    "scalar": {"scalar"},
    "target": {"target", "contract", "occupancy", "api"},
    "contract": {"contract"},
    "occupancy": {"occupancy"},
    "api": {"api"},
}


def _layer(module: str) -> str | None:
    if not module.startswith(CODEGEN + "."):
        return None
    return module[len(CODEGEN) + 1:].split(".")[0]


def test_every_codegen_module_has_a_layer():
    unknown = sorted(m for m in GRAPH if _layer(m) is not None and _layer(m) not in LAYERS)
    assert not unknown, f"codegen modules outside the layer table: {unknown}"


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_codegen_layer_imports_only_downward(layer):
    allowed = LAYERS[layer]
    if allowed is None:
        return
    bad = sorted(f"{m} -> {t} (line {line})" for m, deps in GRAPH.items()
                 if _layer(m) == layer for t, line in deps.items()
                 if _layer(t) is not None and _layer(t) not in allowed)
    assert not bad, f"codegen/{layer} imports above itself:\n" + "\n".join(bad)


def test_layer_table_catches_an_upward_import():
    # the rule applied to a made-up edge: emit/ importing a lowering family is refused
    deps = {"tilelang.codegen.emit.kernel": {"tilelang.codegen.lower.table": 1}}
    layer = _layer("tilelang.codegen.emit.kernel")
    assert layer == "emit"
    assert [t for t in deps["tilelang.codegen.emit.kernel"]
            if _layer(t) not in LAYERS[layer]] == ["tilelang.codegen.lower.table"]
