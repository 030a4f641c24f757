"""No function in tilelang/codegen takes more than 8 positional parameters (positional-only and
positional-or-keyword, `self`/`cls` not counted): what a loop emitter or a decision needs
beyond that travels as a record or as keyword-only options (docs/codegen.md, Plans)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2] / "tilelang" / "codegen"
LIMIT = 8


def positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names[1:] if names and names[0] in ("self", "cls") else names


def offenders(root: pathlib.Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = len(positional(node))
                if n > LIMIT:
                    out.append(f"{path.relative_to(root.parent.parent)}:{node.lineno} "
                               f"{node.name} ({n})")
    return out


def test_no_codegen_function_takes_more_than_eight_positional_parameters():
    assert offenders(ROOT) == []


def test_the_walk_counts_what_the_rule_counts(tmp_path):
    # positional-only and positional-or-keyword count; self, keyword-only, *args do not
    (tmp_path / "m.py").write_text(
        "def f(a, b, c, d, e, f, g, h, i): pass\n"
        "def g(a, b, /, c, d, e, f, g, h, i): pass\n"
        "class C:\n"
        "    def m(self, a, b, c, d, e, f, g, h): pass\n"
        "def k(a, b, c, d, e, f, g, h, *rest, i, j): pass\n")
    got = offenders(tmp_path)
    assert [g.split(" ", 1)[1] for g in got] == ["f (9)", "g (9)"]
