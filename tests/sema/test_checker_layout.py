"""The checker's layout (docs/sema.md): four parts that import neither each other nor the class
that assembles them, and an IR builder that uses only sema's public names."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEMA = ROOT / "tilelang" / "sema"
PARTS = ("check_decl", "check_stmt", "check_expr", "check_combine")


def imported(path: pathlib.Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every `from ... import ...` in a file, relative ones resolved inside
    tilelang.sema, at any depth (function-level imports too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                mod = "tilelang.sema." + mod
            elif node.level == 2:
                mod = "tilelang." + mod
            out.append((mod, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names]
    return out


@pytest.mark.parametrize("part", PARTS + ("check_context", "control_flow"))
def test_a_part_imports_no_other_part_nor_the_checker(part):
    mods = {m for m, _ in imported(SEMA / f"{part}.py")}
    others = {f"tilelang.sema.{p}" for p in PARTS + ("checker",) if p != part}
    assert not mods & others


def test_the_shared_modules_import_no_part():
    for name in ("check_context", "control_flow"):
        mods = {m for m, _ in imported(SEMA / f"{name}.py")}
        assert not {m for m in mods if m.startswith("tilelang.sema.check")}, name


def test_the_ir_builder_uses_only_public_names_of_sema():
    uses = [(m, n) for m, names in imported(ROOT / "tilelang" / "ir" / "build.py")
            if m.startswith("tilelang.sema") for n in names]
    assert uses and not [(m, n) for m, n in uses if n.startswith("_")]


def test_the_checker_is_assembled_from_the_parts():
    from tilelang.sema.check_combine import CombineChecks
    from tilelang.sema.check_decl import DeclarationChecks
    from tilelang.sema.check_expr import ExpressionChecks
    from tilelang.sema.check_stmt import StatementChecks
    from tilelang.sema.checker import Checker
    assert Checker.__bases__ == (DeclarationChecks, StatementChecks, ExpressionChecks,
                                 CombineChecks)
    # no method is defined in two parts (one would silently shadow the other)
    seen: dict[str, str] = {}
    for part in Checker.__bases__:
        for name, v in vars(part).items():
            if callable(v) or isinstance(v, property):
                assert name not in seen, (name, seen.get(name), part.__name__)
                seen[name] = part.__name__
