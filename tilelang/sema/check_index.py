"""Subscripts of tiles and arrays (docs/language.md, "Indexing tiles"): the part of the
checker's expression walk that spells `t[i, :]`, `t[lo:hi]` and `A[i, j]` with registry
entries, so that the IR builder (which extends the checker) emits exactly those calls.

Rules, named once and cited where applied:
- R1 one subscript per axis at most; axes left out are kept whole (`t[i]` of a 2-d tile is a
  row);
- R2 an integer subscript (a constant or a run-time integer scalar) removes its axis: `take`;
  a negative constant counts from the end; a constant outside the axis is an error;
- R3 a slice keeps its axis: `:` whole, `lo:hi` (constant bounds) hi - lo elements, which
  must be a power of two (every tile extent is): an `extract` when lo is a multiple of it
  (free when the axis lives in registers), else a `gather` by `arange(hi - lo) + lo`;
- R4 an array takes exactly one integer per axis and gives a scalar (the `[]` entry); slices
  of arrays are `load`s; a negative constant is an error (an array's extents are run-time
  values, so it does not count from the end).
Slices are applied first (they keep the axes' numbering: the aligned ones in one `extract`,
then each unaligned one), then the integer subscripts from the last axis to the first (each
`take` removes an axis after the ones still to take).
"""

from __future__ import annotations

from ..diagnostics import TileSemanticError
from ..frontend import ast
from .builtins import BUILTINS, OPERATORS
from .builtins_core import ArgInfo, arg_of_const
from .check_context import Ctx, NeedsValue, Scope
from .constants import ConstStr, ConstTuple, ConstValue, loose
from .types import STRING, ArrayType, LooseType, Sym, TileType, TupleType
from .values import error_value, is_error, value


class IndexChecks:
    """`t[...]` and `A[...]`: a mixin of `ExpressionChecks` (check_expr.py)."""

    def tile_subscript(self, e: ast.Index, v: ArgInfo, scope: Scope, ctx: Ctx) -> ArgInfo:
        t = v.type
        assert isinstance(t, TileType)
        if len(e.indices) > t.rank:                                              # R1
            raise TileSemanticError.at(
                "E0222", f"{len(e.indices)} subscripts for a tile of rank {t.rank} ({t})",
                e.span, help=f"give at most {t.rank}, one per axis")
        picks: list[tuple[int, ArgInfo]] = []
        windows: list[tuple[int, int, int]] = []        # (axis, lo, n) of unaligned slices
        index, shape, sliced = [], [], False
        for axis, ix in enumerate(e.indices):
            d = t.shape[axis]
            if isinstance(ix, ast.Slice):
                lo, n = self._slice(ix, d, axis, t, scope, ctx)                  # R3
                if lo % n:
                    windows.append((axis, lo, n))
                    lo, n = 0, d
                sliced = sliced or n != d
                index.append(lo // n)
                shape.append(n)
                continue
            picks.append((axis, self._position(ix, d, axis, t, scope, ctx)))     # R2
            index.append(0)
            shape.append(d)
        shape += t.shape[len(e.indices):]
        index += [0] * (t.rank - len(e.indices))
        if any(is_error(i) for _, i in picks):
            return error_value(e.span)
        x = v
        if sliced:
            x = self.call_builtin(BUILTINS["extract"], [x], {
                "index": arg_of_const(ConstTuple(tuple(loose(k) for k in index)), e.span),
                "shape": arg_of_const(ConstTuple(tuple(loose(n) for n in shape)), e.span)},
                e.span)
        for axis, lo, n in windows:
            x = self._window(x, axis, lo, n, e.span)
        for axis, i in reversed(picks):
            x = self.call_builtin(BUILTINS["take"], [x, i],
                                  {"axis": arg_of_const(loose(axis), e.span)}, e.span)
        return x

    def _window(self, x: ArgInfo, axis: int, lo: int, n: int, span) -> ArgInfo:
        """Positions lo..lo+n-1 of `axis`, lo not a multiple of n: `gather` by
        `arange(n) + lo` stretched over the other axes."""
        shape = list(x.type.shape)
        ones = [1] * len(shape)
        ones[axis] = n
        shape[axis] = n

        def tup(vals):
            return arg_of_const(ConstTuple(tuple(loose(k) for k in vals)), span)

        idx = self.call_builtin(BUILTINS["arange"], [arg_of_const(loose(n), span)], {}, span)
        idx = self.call_builtin(OPERATORS["+"], [idx, arg_of_const(loose(lo), span)], {}, span)
        idx = self.call_builtin(BUILTINS["reshape"], [idx, tup(ones)], {}, span)
        idx = self.call_builtin(BUILTINS["broadcast_to"], [idx, tup(shape)], {}, span)
        return self.call_builtin(BUILTINS["gather"], [x, idx],
                                 {"axis": arg_of_const(loose(axis), span)}, span)

    def array_subscript(self, e: ast.Index, v: ArgInfo, scope: Scope, ctx: Ctx) -> ArgInfo:
        A = v.type
        assert isinstance(A, ArrayType)
        if any(isinstance(ix, ast.Slice) for ix in e.indices):                   # R4
            raise TileSemanticError.at(
                "E0222", "an array subscript takes one integer per axis, not a slice", e.span,
                help="read a tile of an array with `load(A, index = ..., shape = ...)`")
        if len(e.indices) != A.rank:
            n = len(e.indices)
            raise TileSemanticError.at(
                "E0222", f"{n} subscript{'s' if n != 1 else ''} for an array of rank {A.rank} "
                         f"({A})", e.span,
                help="one element is `A[" + ", ".join("i" + str(k) for k in range(A.rank))
                     + "]`; a tile of it is `load(A, index = ..., shape = ...)`")
        elems = tuple(self._integer(ix, scope, ctx, "an array subscript") for ix in e.indices)
        if any(is_error(x) for x in elems):
            return error_value(e.span)
        for ix, x in zip(e.indices, elems):
            c = x.const
            if isinstance(c, ConstValue) and not c.is_symbolic and int(c.value) < 0:
                raise TileSemanticError.at(
                    "E0222", f"index {int(c.value)} is negative: an array subscript counts from "
                             "the start only", ix.span,
                    help="the last element of axis k is `A[..., A.shape[k] - 1, ...]`")
        consts = tuple(x.const for x in elems)
        tup = value(TupleType(tuple(x.type for x in elems)),
                    ConstTuple(consts) if all(c is not None for c in consts) else None,
                    e.span, elems)
        text = value(STRING, ConstStr(_source_text(e)), e.span)
        return self.call_builtin(OPERATORS["[]"], [v, tup], {"text": text}, e.span)

    # ---- entries ------------------------------------------------------------------------
    def _integer(self, ix: ast.Expr, scope: Scope, ctx: Ctx, what: str) -> ArgInfo:
        i = self.expr(ix, scope, ctx)
        if is_error(i):
            return i
        it = i.type
        ok = (isinstance(it, LooseType) and it.kind == "int") or \
            (isinstance(it, TileType) and not it.shape and it.dtype.is_int)
        if not ok:
            tile = isinstance(it, TileType) and it.shape
            raise TileSemanticError.at(
                "E0222", f"{what} must be an integer scalar, found {it}", ix.span,
                help="a subscript picks one position per axis; select by a tile of indices "
                     "with `where` and a reduction" if tile
                else "convert it with `astype(..., i32)`" if isinstance(it, (TileType,
                                                                            LooseType))
                else None)
        return i

    def _position(self, ix: ast.Expr, d, axis: int, t: TileType, scope: Scope,
                  ctx: Ctx) -> ArgInfo:
        i = self._integer(ix, scope, ctx, "a tile subscript")
        c = i.const
        if is_error(i) or not isinstance(c, ConstValue) or c.is_symbolic:
            return i
        if isinstance(d, Sym):
            raise NeedsValue(ix.span, f"the extent of axis {axis} of {t} depends on it")
        k = int(c.value)
        if not -d <= k < d:
            raise TileSemanticError.at(
                "E0222", f"index {k} is out of range for axis {axis} of {t}", ix.span,
                help=f"indices go from 0 to {d - 1} (or -{d} to -1 from the end)")
        return value(LooseType("int"), loose(k % d), ix.span)

    def _slice(self, s: ast.Slice, d, axis: int, t: TileType, scope: Scope,
               ctx: Ctx) -> tuple[int, object]:
        """(first position, length) of a slice: (0, d) for `:`."""
        if s.lower is None and s.upper is None:
            return 0, d
        if isinstance(d, Sym):
            raise NeedsValue(s.span, f"the extent of axis {axis} of {t} depends on it")
        lo = 0 if s.lower is None else self.const_int(s.lower, scope, ctx, "a slice bound")
        hi = d if s.upper is None else self.const_int(s.upper, scope, ctx, "a slice bound")
        lo, hi = (lo + d if lo < 0 else lo), (hi + d if hi < 0 else hi)
        if not 0 <= lo < hi <= d:
            raise TileSemanticError.at(
                "E0222", f"the slice `{_text(s)}` is empty or outside axis {axis} of {t}", s.span,
                help=f"bounds go from 0 to {d}")
        n = hi - lo
        if n & (n - 1):
            up = 1 << (n - 1).bit_length()
            raise TileSemanticError.at(
                "E0222", f"the slice `{_text(s)}` has {n} elements: a tile slice has a "
                         f"power-of-two length, as every tile extent", s.span,
                help=f"take {up} elements and mask the extra ones, or `pad` the tile")
        return lo, n


def _source_text(e: ast.Index) -> str:
    """The subscript as the printer spells it (for the bounds messages of `A[i, j]`): the
    common names, integers and members here, anything else by the printer, imported only
    then (`tilec check` stays light, tests/frontend/test_startup.py). Never the source file's
    text: the IR must not depend on what a cache holds under a file name."""
    def simple(x) -> str | None:
        if isinstance(x, ast.Name):
            return x.id
        if isinstance(x, ast.IntLit) and x.value >= 0:
            return str(x.value)
        if isinstance(x, ast.Member):
            v = simple(x.value)
            return None if v is None else f"{v}.{x.attr}"
        return None
    parts = [simple(e.value)] + [simple(i) for i in e.indices]
    if None not in parts:
        return f"{parts[0]}[{', '.join(parts[1:])}]"
    from ..frontend.printer import expr as show
    return show(e)


def _text(s: ast.Slice) -> str:
    from ..frontend.printer import expr as show
    return (show(s.lower) if s.lower is not None else "") + ":" + \
        (show(s.upper) if s.upper is not None else "")
