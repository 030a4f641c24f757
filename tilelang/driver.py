"""The compiler driver: runs the ordered stages on one file and collects diagnostics.

Shared by `tilec`, the language server and the Python API, so that all three report exactly
the same diagnostics for the same input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .diagnostics import (Diagnostic, InternalCompilerError, Severity, TileError,
                          register_codes, remember_source)
from .frontend import ast
from .frontend.parser import parse
from .frontend.source import read_source
from .sema import checker


register_codes({"E9999": "internal compiler error"})


@dataclass
class Options:
    include_dirs: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    target: str = "sm_90a"


@dataclass
class CheckResult:
    path: str
    module: ast.Module | None
    diagnostics: list[Diagnostic]
    typed: object | None = None  # the checked program, once semantic analysis ran

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)


def check_source(text: str, path: str, options: Options | None = None) -> CheckResult:
    """Parse and check `text` as the contents of `path`; never raises for user mistakes."""
    options = options or Options()
    remember_source(path, text)
    diags: list[Diagnostic] = []
    if not text.strip():
        diags.append(Diagnostic(Severity.WARNING, "W0001", f"`{path}` is empty: nothing to check"))
        return CheckResult(path, ast.Module((), path), diags)
    try:
        module = parse(text, path)
    except TileError as e:
        return CheckResult(path, None, diags + e.diagnostics)
    except RecursionError:
        return CheckResult(path, None, diags + [_too_deep(path)])
    typed = None
    try:
        typed, sema_diags = checker.check_module(module, options)
        diags += sema_diags
    except TileError as e:
        diags += e.diagnostics
    except RecursionError:
        diags.append(_too_deep(path))
    return CheckResult(path, module, diags, typed)


def check_file(path: str, options: Options | None = None) -> CheckResult:
    try:
        text = read_source(path)
    except TileError as e:
        return CheckResult(path, None, e.diagnostics)
    return check_source(text, path, options)


def _too_deep(path: str) -> Diagnostic:
    return Diagnostic(Severity.ERROR, "E0112", f"`{path}` nests expressions or blocks too deeply "
                      "for the compiler", help="split the expression with `let` bindings")


def internal_error(where: str, exc: BaseException) -> InternalCompilerError:
    return InternalCompilerError.at(
        "E9999", f"internal compiler error in {where}: {type(exc).__name__}: {exc}", None,
        help="this is a bug in tilec; please report it with the input file")
