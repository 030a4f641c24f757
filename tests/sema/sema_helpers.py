"""Helpers for checker tests: run the whole driver on a source string."""

from tilelang.diagnostics import Severity, render_all
from tilelang.driver import check_source
from tilelang.options import CompileOptions


def run_check(src: str, file: str = "t.tile", **options):
    return check_source(src, file, CompileOptions(**options))


def errors_of(result):
    return [d for d in result.diagnostics if d.severity is Severity.ERROR]


def binding_types(src: str, **options) -> dict[str, str]:
    """name -> "type" or "type = const" for every binding (the last one of each name)."""
    r = run_check(src, **options)
    errs = errors_of(r)
    assert not errs, render_all(errs)
    out = {}
    for rec in r.typed.records:
        text = str(rec.type)
        if rec.const is not None:
            text += f" = {rec.const}"
        out[rec.name] = text
    return out
