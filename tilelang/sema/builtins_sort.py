"""Sorting along an axis of a tile: `sort`, `argsort` and `topk` (docs/language.md, "Sorting").

The order is total and deterministic: keys ascending (descending with `descending = true`,
always for `topk`), NaN after every number when ascending and before them when descending (the
largest value either way), -0.0 equal to +0.0, and equal keys in ascending index order (a
stable sort, as `np.argsort(kind="stable")`). Indices are `i32` positions along the axis.
Dtypes: every integer and float dtype (f16 and bf16 included); not bool nor the restricted
formats (tf32, f8). `topk(x, k)` is the first `k` of the descending sort along the axis: a
tuple (values, indices) whose axis has extent `k`, a constant power of two up to the extent.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (ABSENT, CONST, Builtin, BoundArgs, Param, const_bool,
                                         const_int, fail, norm_axis, register, tile_arg)
from tilelang.sema.builtins_math import restricted_help
from tilelang.sema.constants import const_bool as cbool, loose
from tilelang.sema.types import BOOL, I32, TileType, TupleType, Type

np = lazy_module("numpy")


def _sortable(bound: BoundArgs, span) -> TileType:
    t = tile_arg(bound, "x", span)
    if t.dtype.restricted or t.dtype == BOOL:
        raise fail("E0508", bound, "x", f"cannot be {t}", span,
                   help=restricted_help(t.dtype) if t.dtype.restricted else
                   "sort `astype(x, i32)` (false before true)")
    if t.rank == 0:
        raise fail("E0509", bound, "x", "must be a tile, not a scalar", span)
    return t


def _axis(bound: BoundArgs, t: TileType, span) -> int:
    return norm_axis(bound, "axis", const_int(bound, "axis", span), t.rank, span)


def _sort_typing(indices: bool):
    def typing(bound: BoundArgs, span) -> Type:
        t = _sortable(bound, span)
        _axis(bound, t, span)
        const_bool(bound, "descending", span)
        return TileType(I32, t.shape) if indices else t
    return typing


def _topk_typing(bound: BoundArgs, span) -> Type:
    t = _sortable(bound, span)
    ax = _axis(bound, t, span)
    k = const_int(bound, "k", span)
    n = t.shape[ax]
    if not (0 < k <= n and k & (k - 1) == 0):
        raise fail("E0507", bound, "k", f"must be a power of two from 1 to {n} (the extent of "
                                        f"axis {ax}), found {k}", span)
    shape = t.shape[:ax] + (k,) + t.shape[ax + 1:]
    types = [TileType(t.dtype, shape), TileType(I32, shape)]
    if not bound.given("part"):
        return TupleType(tuple(types))
    p = const_int(bound, "part", span)
    if p not in (0, 1):
        raise fail("E0507", bound, "part", f"must be 0 or 1, found {p}", span)
    return types[p]


def order(x, axis: int, descending: bool):
    """The stable order along `axis` (module docstring), as i32 indices."""
    v = np.moveaxis(np.asarray(x), axis, -1)
    if v.dtype.kind == "f":
        nan = np.isnan(v)
        if descending:
            key = (np.where(nan, 0, -v.astype(np.float64)), ~nan)
        else:
            key = (np.where(nan, 0, v.astype(np.float64)), nan)
    else:
        key = (~v if descending else v,)
    idx = np.lexsort(key, axis=-1)      # stable; the last key is the primary one
    return np.moveaxis(idx.astype(np.int32), -1, axis)


def _sort_ref(x, axis=-1, descending=False):
    idx = order(x, axis, bool(descending))
    return np.take_along_axis(np.asarray(x), idx, axis=axis)


def _argsort_ref(x, axis=-1, descending=False):
    return order(x, axis, bool(descending))


def _topk_ref(x, k, axis=-1, part=None):
    idx = np.take(order(x, axis, True), np.arange(int(k)), axis=axis)
    vals = np.take_along_axis(np.asarray(x), idx, axis=axis)
    return (vals, idx) if part is None else (vals, idx)[int(part)]


_SORT = (Param("x"), Param("axis", CONST, loose(-1)), Param("descending", CONST, cbool(False)))
register(Builtin("sort", "sort", _SORT, _sort_typing(False), _sort_ref,
                 doc="the elements sorted along `axis` (stable; NaN largest)"))
register(Builtin("argsort", "sort", _SORT, _sort_typing(True), _argsort_ref,
                 doc="the `i32` indices that sort `x` along `axis` (stable: ties keep index "
                     "order)"))
register(Builtin("topk", "sort", (Param("x"), Param("k", CONST), Param("axis", CONST, loose(-1)),
                                  Param("part", CONST, ABSENT, keyword_only=True)),
                 _topk_typing, _topk_ref,
                 doc="(values, indices) of the `k` largest elements along `axis`, largest "
                     "first, ties in index order; `part` picks one of the two"))
