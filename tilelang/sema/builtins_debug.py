"""Debug built-ins: `print(fmt, *args)`, `assert(cond, msg="")`, `static_assert(cond, msg="")`.

`print` formats with `{}` placeholders (`{{`/`}}` for literal braces); the number of
placeholders must equal the number of arguments. `assert` checks a bool scalar or every element
of a bool tile at run time. `static_assert` needs a constant bool and fails compilation (E0511)
with its message when false.
"""

from __future__ import annotations

import re
import sys

from tilelang.lazy import lazy_module

from tilelang.diagnostics import TileSemanticError
from tilelang.sema.builtins_core import (CONST, STRING_KIND, Builtin, BoundArgs, Param, arg,
                                         fail, found, found_typed, register, tile_of)
from tilelang.sema.constants import ConstStr, ConstValue
from tilelang.sema.types import BOOL, VOID, LooseType, TileType, Type

np = lazy_module("numpy")

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{\}|\{|\}")


def count_placeholders(fmt: str) -> int | None:
    """Number of `{}` in fmt, or None when a brace is unmatched."""
    n = 0
    for m in _PLACEHOLDER.finditer(fmt):
        t = m.group()
        if t == "{}":
            n += 1
        elif t in ("{", "}"):
            return None
    return n


def _print_typing(bound: BoundArgs, span) -> Type:
    fmt = arg(bound, "fmt").const.value
    n = count_placeholders(fmt)
    if n is None:
        raise fail("E0507", bound, "fmt", "has an unmatched brace", span,
                   help="write `{}` for a value, `{{` and `}}` for literal braces")
    if n != len(bound.varargs):
        raise fail("E0507", bound, "fmt", f"has {n} placeholder{'s' if n != 1 else ''} but "
                                          f"{len(bound.varargs)} value"
                                          f"{'s follow' if len(bound.varargs) != 1 else ' follows'}",
                   span)
    for a in bound.varargs:
        if not isinstance(a.type, (TileType, LooseType)):
            raise fail("E0506", bound, None, f"cannot print {found_typed(a)}",
                       a.span or span)
    return VOID


def format_message(fmt: str, *args) -> str:
    values = iter(args)
    return _PLACEHOLDER.sub(
        lambda m: {"{{": "{", "}}": "}"}.get(m.group()) or str(np.asarray(next(values))), fmt)


def _print_ref(fmt: str, *args, file=None):
    text = format_message(fmt, *args)
    print(text, file=file or sys.stdout)
    return text


register(Builtin("print", "debug", (Param("fmt", STRING_KIND),), _print_typing, _print_ref,
                 doc="print a formatted message", variadic="args", side_effects=True))


def _assert_typing(bound: BoundArgs, span) -> Type:
    t = tile_of(bound, "cond", span)
    if not (isinstance(t, TileType) and t.dtype is BOOL):
        raise fail("E0508", bound, "cond", f"must be a bool scalar or tile, found {t}", span,
                   help="compare explicitly, e.g. `x != 0`")
    return VOID


class TileAssertionError(AssertionError):
    """A device `assert` failed in the reference interpreter."""


def _assert_ref(cond, msg: str = ""):
    if not np.all(np.asarray(cond)):
        raise TileAssertionError(msg or "assertion failed")


register(Builtin("assert", "debug", (Param("cond"), Param("msg", STRING_KIND, ConstStr(""))),
                 _assert_typing, _assert_ref, doc="stop with `msg` when cond is false",
                 side_effects=True))


def _static_assert_typing(bound: BoundArgs, span) -> Type:
    c = arg(bound, "cond").const
    if not (isinstance(c, ConstValue) and c.dtype is BOOL and isinstance(c.value, bool)):
        raise fail("E0507", bound, "cond", f"must be a constant bool, found "
                                           f"{found(arg(bound, 'cond'))}", span)
    if not c.value:
        msg = arg(bound, "msg").const.value
        raise TileSemanticError.at(
            "E0511", "static assertion failed" + (f": {msg}" if msg else ""), span)
    return VOID


register(Builtin("static_assert", "debug",
                 (Param("cond", CONST), Param("msg", STRING_KIND, ConstStr(""))),
                 _static_assert_typing, lambda cond, msg="": None,
                 doc="fail compilation with `msg` when the constant cond is false"))
