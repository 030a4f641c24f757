"""The built-in operation registry (language.md §7): one entry per operation, holding its
signature, typing rule, constant folding and NumPy reference together.

    b = lookup("load", span)                      # Builtin (E0501 when unknown)
    bound = bind_call(b, [ArgInfo(...)], {"shape": ArgInfo(...)}, span)
    t = b.result_type(bound, span)                # raises E03xx/E04xx/E05xx diagnostics
    if b.can_fold(bound): c = b.fold(bound, span) # a constant result (cdiv, i16(5), 1 + 2)
    value = b.evaluate(bound, {"A": array, ...})  # the reference semantics

Operators live in `OPERATORS` with the same structure, keyed by spelling ("+", "u-" for unary
minus, "@"); `lookup_operator` finds them. The groups are split into `builtins_<group>.py`;
see each module's docstring for its semantics.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from tilelang.diagnostics import Span, TileSemanticError
from tilelang.sema import (builtins_creation, builtins_debug, builtins_distributed,  # noqa: F401
                           builtins_dtype,
                           builtins_grid, builtins_index, builtins_math, builtins_matmul,
                           builtins_memory, builtins_operators, builtins_random,
                           builtins_reduce, builtins_shape, builtins_sort)
from tilelang.sema.builtins_core import (ABSENT, CONST, DTYPE, OPERATOR_TABLE, REGISTRY,
                                         REQUIRED, STRING_KIND, VALUE, ArgInfo, BoundArgs,
                                         Builtin, Param, arg_of_const, arg_of_dtype, bind_call)
from tilelang.sema.builtins_grid import GridContext

# `//` always starts a comment in Tile source, so floor division is called by name. It is the
# same entry as the `//` operator (typing, folding and reference semantics).
if "floordiv" not in REGISTRY:
    from tilelang.record import replace as _replace
    REGISTRY["floordiv"] = _replace(
        OPERATOR_TABLE["//"], name="floordiv", group="math", symbol=None,
        doc="floor division rounding toward negative infinity, like Python's `//`; the "
            "remainder `a % b` has the divisor's sign")

BUILTINS: Mapping[str, Builtin] = MappingProxyType(REGISTRY)
OPERATORS: Mapping[str, Builtin] = MappingProxyType(OPERATOR_TABLE)

GROUPS = ("grid", "memory", "creation", "shape", "dtype", "math", "random", "reduce", "scan",
          "sort", "matmul", "debug")


def lookup(name: str, span: Span | None = None) -> Builtin:
    """The built-in called `name`; an unknown name is E0501 with a did-you-mean."""
    b = REGISTRY.get(name)
    if b is not None:
        return b
    import difflib      # only a misspelt name needs it
    close = difflib.get_close_matches(name, list(REGISTRY), n=1)
    raise TileSemanticError.at(
        "E0501", f"unknown operation `{name}`", span,
        help=f"did you mean `{close[0]}`?" if close else None)


def lookup_operator(spelling: str) -> Builtin:
    """The entry of an operator ("+", "==", "u-", "~", "not", "@", ...)."""
    return OPERATOR_TABLE[spelling]


def is_builtin(name: str) -> bool:
    return name in REGISTRY


def builtin_names() -> list[str]:
    """Every built-in's name, sorted (for editors, highlighting and completion)."""
    return sorted(REGISTRY)


def builtins_in_group(group: str) -> list[Builtin]:
    return [b for b in REGISTRY.values() if b.group == group]


__all__ = ["ABSENT", "BUILTINS", "CONST", "DTYPE", "GROUPS", "OPERATORS", "REQUIRED",
           "STRING_KIND", "VALUE", "ArgInfo", "BoundArgs", "Builtin", "GridContext", "Param",
           "arg_of_const", "arg_of_dtype", "bind_call", "builtin_names", "builtins_in_group",
           "is_builtin", "lookup", "lookup_operator"]
