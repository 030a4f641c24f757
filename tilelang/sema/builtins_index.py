"""Indexing built-ins: `take(x, index, axis=0)`, one position of a tile along an axis, and the
operator entry `[]` that reads one element of an array (`A[i, j]`).

The checker spells the subscripts of docs/language.md ("Indexing tiles") with these and the
shape built-ins: an integer subscript of a tile is a `take` (the axis goes away, so `t[i, j]`
of a 2-d tile is a scalar), a slice `lo:hi` is an `extract`, `:` keeps the axis. An array
subscript `A[i, j]` (one integer per axis) is the `[]` entry: a scalar of the array's dtype.

Bounds: a constant index outside the axis is a compile-time error (negative constants count
from the end in the subscript spelling, as in Python, and are rejected by `take` itself). A
run-time index outside 0..n-1 is an error of the reference (the interpreter reports the op,
the index and the extent); on the device `take` reads element `index mod n` (the lowering
uses the index's low bits, docs/codegen.md) and `A[i, j]` fails a device assertion that names
the subscript (the emulator reports it as a device assertion, a GPU as CUDA's assert). The
checker passes the subscript's source text (`text`) for those messages.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (CONST, STRING_KIND, Builtin, BoundArgs, Param, arg, array_arg, fail,
                                         int_scalar, norm_axis, const_int, register,
                                         register_operator, tile_arg, tuple_elements)
from tilelang.sema.constants import ConstStr, ConstValue, loose
from tilelang.sema.types import Sym, TileType, Type, format_shape, scalar

np = lazy_module("numpy")


def _take_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    if t.rank == 0:
        raise fail("E0509", bound, "x", "must be a tile, not a scalar", span)
    ax = norm_axis(bound, "axis", const_int(bound, "axis", span), t.rank, span)
    i = arg(bound, "index")
    int_scalar(bound, "index", i, span)
    d = t.shape[ax]
    if isinstance(i.const, ConstValue) and not i.const.is_symbolic and not isinstance(d, Sym):
        k = int(i.const.value)
        if not 0 <= k < d:
            raise fail("E0507", bound, "index", f"is {k}, outside 0..{d - 1} (axis {ax} of "
                                                f"{t})", span)
    return TileType(t.dtype, t.shape[:ax] + t.shape[ax + 1:])


def _take_ref(x, index, axis=0):
    v = np.asarray(x)
    ax = axis % v.ndim
    i = int(np.asarray(index))
    if not 0 <= i < v.shape[ax]:
        raise IndexError(f"index {i} is outside 0..{v.shape[ax] - 1} (axis {ax} of a tile of "
                         f"shape {format_shape(v.shape)})")
    return np.asarray(np.take(v, i, axis=ax)).copy()


register(Builtin("take", "shape", (Param("x"), Param("index"), Param("axis", CONST, loose(0))),
                 _take_typing, _take_ref,
                 doc="position `index` (a run-time integer scalar) of `axis`, which goes away: "
                     "`take(t, i, 0)` is `t[i]`"))


def _element_typing(bound: BoundArgs, span) -> Type:
    A = array_arg(bound, "A", span)
    elems = tuple_elements(bound, "index", span)
    if len(elems) != A.rank:
        raise fail("E0509", bound, "index", f"has {len(elems)} entries but the array is {A}",
                   span)
    for k, e in enumerate(elems):
        int_scalar(bound, "index", e, span, what=f"entry {k} of the subscript")
    return scalar(A.dtype)


def _element_ref(A, index, text=""):
    V = np.asarray(A)
    idx = tuple(int(np.asarray(i)) for i in (index if isinstance(index, (tuple, list))
                                              else (index,)))
    for k, (i, n) in enumerate(zip(idx, V.shape)):
        if not 0 <= i < n:
            raise IndexError(f"`{text}`: index {format_shape(idx)} is outside the array's "
                             f"shape {format_shape(V.shape)} (axis {k})")
    return np.asarray(V[idx]).copy()


register_operator("[]", Builtin(
    "element", "memory", (Param("A"), Param("index"), Param("text", STRING_KIND, ConstStr(""))),
    _element_typing, _element_ref,
    doc="`A[i, j]`: one element of an array as a scalar; an index outside the array fails "
        "(the interpreter's error, the device's assertion)", symbol="[]"))
