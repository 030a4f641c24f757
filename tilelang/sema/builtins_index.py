"""Indexing built-ins: `take(x, index, axis=0)`, one position of a tile along an axis, the
operator entry `[]` that reads one element of an array (`A[i, j]`), `pad(x, widths, value=)`,
and the tile form of `gather` (`gather(t, indices, axis=)`, registered with the array form in
builtins_memory.py) and the extent rule of `cat` for unequal tiles (builtins_shape.py).

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

from tilelang.sema.builtins_core import (ABSENT, CONST, STRING_KIND, Builtin, BoundArgs,
                                         Param, arg, array_arg, const_int, fail, int_scalar,
                                         norm_axis, register, register_operator, tile_arg,
                                         tuple_elements)
from tilelang.sema.constants import ConstStr, ConstTuple, ConstValue, loose, materialize
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


# ---------------------------------------------------------------------------------------------
# gather within a tile (the tile form of the `gather` entry, builtins_memory.py), pad, and the
# extent rule `cat` follows for unequal tiles (builtins_shape.py)

def tile_gather_typing(bound: BoundArgs, span) -> Type:
    """`gather(t, indices, axis = a)`: out[x] = t[x with axis a replaced by indices[x]], as
    `torch.gather` / `tl.gather` / `np.take_along_axis`: `indices` is an integer tile of t's
    rank whose extents equal t's except along `axis` (any power of two there)."""
    t = tile_arg(bound, "A", span)
    if t.rank == 0:
        raise fail("E0509", bound, "A", "must be a tile, not a scalar", span)
    for name in ("mask", "padding"):
        if bound.given(name):
            raise fail("E0504", bound, name, "is for gathering from an array; a gather within "
                                              "a tile reads inside it", span)
    if not bound.given("axis"):
        raise fail("E0503", bound, "axis", f"is required to gather within a tile ({t})", span,
                   help="write `gather(t, indices, axis = 0)`")
    ax = norm_axis(bound, "axis", const_int(bound, "axis", span), t.rank, span)
    it = tile_arg(bound, "indices", span)
    if not it.dtype.is_int:
        raise fail("E0506", bound, "indices", f"must be an integer tile, found {it}", span)
    if it.rank != t.rank or any(a != b for d, (a, b) in enumerate(zip(it.shape, t.shape))
                                if d != ax):
        raise fail("E0509", bound, "indices", f"is {it}: it must have the extents of {t} "
                                              f"except along axis {ax}", span)
    return TileType(t.dtype, it.shape)


def tile_gather_ref(A, indices, axis: int):
    v = np.asarray(A)
    idx = np.asarray(indices).astype(np.int64)
    axis %= v.ndim
    n = v.shape[axis]
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        k = tuple(int(i) for i in np.argwhere(bad)[0])
        raise IndexError(f"`gather`: indices{format_shape(k)} is {int(idx[k])}, outside "
                         f"0..{n - 1} (axis {axis} of a tile of shape {format_shape(v.shape)})")
    return np.take_along_axis(v, idx, axis).copy()


def _pairs(bound: BoundArgs, rank: int, span) -> tuple[tuple[int, int], ...]:
    a = arg(bound, "widths")
    c = a.const
    items = c.items if isinstance(c, ConstTuple) else None
    if items is not None and rank == 1 and len(items) == 2 and \
            all(isinstance(i, ConstValue) for i in items):
        items = (c,)                    # a 1-d tile's lone pair: `pad(t, (2, 2))`
    ok = items is not None and len(items) == rank and all(
        isinstance(p, ConstTuple) and len(p.items) == 2 and all(
            isinstance(w, ConstValue) and not w.is_symbolic and isinstance(w.value, int)
            and not isinstance(w.value, bool) and w.value >= 0 for w in p.items)
        for p in items)
    if not ok:
        raise fail("E0507", bound, "widths", f"must be one (before, after) pair of constant "
                                             f"non-negative integers per axis ({rank})", span,
                   help="`pad(t, ((0, 0), (1, 3)))`; a 1-d tile takes `pad(t, (1, 3))`")
    return tuple((int(p.items[0].value), int(p.items[1].value)) for p in items)


def _pad_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    if t.rank == 0:
        raise fail("E0509", bound, "x", "must be a tile, not a scalar", span)
    if any(isinstance(d, Sym) for d in t.shape):
        raise fail("E0408", bound, "x", f"{t} cannot be padded before specialization", span)
    widths = _pairs(bound, t.rank, span)
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(t.shape, widths))
    if any(n & (n - 1) for n in shape):
        up = tuple(1 << (n - 1).bit_length() for n in shape)
        raise fail("E0509", bound, "widths", f"gives the shape {format_shape(shape)}, but every "
                                             f"extent of a tile is a power of two", span,
                   help=f"pad to {format_shape(up)}")
    if bound.given("value"):
        check_fill(bound, "value", t.dtype, span)
    return TileType(t.dtype, shape)


def check_fill(bound: BoundArgs, name: str, dtype, span) -> None:
    """A fill value: a constant that the dtype holds, or a scalar of that dtype."""
    a = arg(bound, name)
    if isinstance(a.const, ConstValue) and not a.const.is_symbolic:
        materialize(a.const, dtype, a.span or span)
        return
    t = a.type
    if not (isinstance(t, TileType) and t.rank == 0 and t.dtype == dtype):
        raise fail("E0508", bound, name, f"must be a scalar of the tile's dtype {dtype}, found "
                                         f"{t}", span)


def _pad_ref(x, widths, value=None):
    v = np.asarray(x)
    w = tuple(widths)
    if v.ndim == 1 and len(w) == 2 and not isinstance(w[0], (tuple, list)):
        w = (w,)
    fill = 0 if value is None else value
    return np.pad(v, tuple(tuple(p) for p in w), constant_values=np.asarray(fill).astype(
        v.dtype)).astype(v.dtype)


register(Builtin("pad", "shape", (Param("x"), Param("widths", CONST),
                                  Param("value", default=ABSENT)),
                 _pad_typing, _pad_ref,
                 doc="`widths[d] = (before, after)` more elements on axis d, holding `value` "
                     "(0 when omitted); every resulting extent a power of two"))


def joined_extent(a: int, b: int) -> int:
    """The extent `cat` gives two tiles of `a` and `b` along its axis: a + b rounded up to a
    power of two (the positions past a + b hold `padding`)."""
    n = a + b
    return 1 << (n - 1).bit_length()
