"""Shape built-ins: `reshape(x, shape)`, `permute(x, dims)`, `transpose(x, axis0=-2,
axis1=-1)`, `expand_dims(x, axis)`, `broadcast_to(x, shape)`, `cat(a, b, axis=0)`,
`extract(x, index, shape)`.

All shapes stay powers of two: `cat` joins two tiles whose extents differ only along `axis`
into one of the next power of two at least their sum (equal tiles double it; `(8,)` and `(4,)`
give `(16,)` whose last 4 positions hold `padding`), and `extract(x, index, shape)` takes the `index`-th sub-tile of `shape` (each
dimension dividing x's), the register-level analogue of `load`. Indices and axes are constants.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (ABSENT, CONST, Builtin, BoundArgs, Param, const_dims,
                                         const_int, fail, norm_axis, register, shape_param,
                                         tile_arg)
from tilelang.sema.builtins_index import check_fill, joined_extent
from tilelang.sema.constants import loose
from tilelang.sema.promotion import broadcast_shapes
from tilelang.sema.types import Sym, TileType, Type, format_shape

np = lazy_module("numpy")


def _concrete_size(shape) -> int | None:
    n = 1
    for d in shape:
        if isinstance(d, Sym):
            return None
        n *= d
    return n


def _reshape_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    shape = shape_param(bound, "shape", t.dtype, span)
    a, b = _concrete_size(t.shape), _concrete_size(shape)
    if a is not None and b is not None:
        if a != b:
            raise fail("E0509", bound, "shape", f"{format_shape(shape)} has {b} elements but "
                                                f"{t} has {a}", span)
    elif sorted(str(d) for d in t.shape if d != 1) != sorted(str(d) for d in shape if d != 1):
        raise fail("E0408", bound, "shape", f"{format_shape(shape)} cannot be checked against "
                                            f"{t} before specialization", span)
    return TileType(t.dtype, shape)


register(Builtin("reshape", "shape", (Param("x"), Param("shape", CONST)), _reshape_typing,
                 lambda x, shape: np.reshape(np.asarray(x), tuple(shape)),
                 doc="the same elements (row-major order) in a new shape"))


def _permutation(bound: BoundArgs, name: str, rank: int, span) -> tuple[int, ...]:
    dims = const_dims(bound, name, span, allow_sym=False)
    if sorted(d % rank if rank and -rank <= d < rank else d for d in dims) != list(range(rank)):
        raise fail("E0507", bound, name, f"{format_shape(dims)} is not a permutation of the "
                                         f"{rank} axes", span,
                   help=f"list each of 0..{rank - 1} once" if rank else None)
    return tuple(d % rank for d in dims)


def _permute_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    p = _permutation(bound, "dims", t.rank, span)
    return TileType(t.dtype, tuple(t.shape[i] for i in p))


register(Builtin("permute", "shape", (Param("x"), Param("dims", CONST)), _permute_typing,
                 lambda x, dims: np.transpose(np.asarray(x), tuple(dims)),
                 doc="reorder the axes: result axis i is x's axis dims[i]"))


def _transpose_axes(bound: BoundArgs, span) -> tuple[TileType, int, int]:
    t = tile_arg(bound, "x", span)
    if t.rank < 2:
        raise fail("E0509", bound, "x", f"must have at least 2 dimensions, found {t}", span)
    a0 = norm_axis(bound, "axis0", const_int(bound, "axis0", span), t.rank, span)
    a1 = norm_axis(bound, "axis1", const_int(bound, "axis1", span), t.rank, span)
    return t, a0, a1


def _transpose_typing(bound: BoundArgs, span) -> Type:
    t, a0, a1 = _transpose_axes(bound, span)
    shape = list(t.shape)
    shape[a0], shape[a1] = shape[a1], shape[a0]
    return TileType(t.dtype, tuple(shape))


def _transpose_ref(x, axis0: int = -2, axis1: int = -1):
    return np.swapaxes(np.asarray(x), axis0, axis1)


register(Builtin("transpose", "shape",
                 (Param("x"), Param("axis0", CONST, loose(-2)), Param("axis1", CONST, loose(-1))),
                 _transpose_typing, _transpose_ref,
                 doc="swap two axes (by default the last two)"))


def _expand_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    ax = norm_axis(bound, "axis", const_int(bound, "axis", span), t.rank, span, extra=1)
    return TileType(t.dtype, t.shape[:ax] + (1,) + t.shape[ax:])


register(Builtin("expand_dims", "shape", (Param("x"), Param("axis", CONST)), _expand_typing,
                 lambda x, axis: np.expand_dims(np.asarray(x), axis),
                 doc="insert a dimension of size 1 at `axis`"))


def _broadcast_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    shape = shape_param(bound, "shape", t.dtype, span)
    if broadcast_shapes(t.shape, shape, span) != tuple(shape) or len(t.shape) > len(shape):
        raise fail("E0509", bound, "shape", f"{t} cannot be broadcast to "
                                            f"{format_shape(shape)}", span,
                   help="a dimension stretches only from 1, and the rank cannot shrink")
    return TileType(t.dtype, shape)


register(Builtin("broadcast_to", "shape", (Param("x"), Param("shape", CONST)),
                 _broadcast_typing,
                 lambda x, shape: np.broadcast_to(np.asarray(x), tuple(shape)).copy(),
                 doc="stretch size-1 dimensions (and add leading ones) to reach `shape`"))


def _cat_typing(bound: BoundArgs, span) -> Type:
    a, b = tile_arg(bound, "a", span), tile_arg(bound, "b", span)
    if a.dtype != b.dtype:
        raise fail("E0508", bound, "b", f"must have the dtype of `a` ({a.dtype}), found "
                                        f"{b.dtype}", span, help="convert with `astype` first")
    if a.rank == 0:
        raise fail("E0509", bound, "a", "must be a tile, not a scalar", span)
    ax = norm_axis(bound, "axis", const_int(bound, "axis", span), a.rank, span)
    if a.rank != b.rank or any(x != y for d, (x, y) in enumerate(zip(a.shape, b.shape))
                               if d != ax):
        raise fail("E0509", bound, "b", f"must have the extents of `a` except along axis {ax}: "
                                        f"{a} and {b} differ", span)
    shape = list(a.shape)
    d, e = shape[ax], b.shape[ax]
    if isinstance(d, Sym) or isinstance(e, Sym):
        if d != e:
            raise fail("E0408", bound, "b", f"{a} and {b} cannot be joined before "
                                            f"specialization", span)
        raise fail("E0509", bound, "axis", f"joins along the symbolic dimension {d}", span)
    shape[ax] = joined_extent(d, e)
    if bound.given("padding"):
        check_fill(bound, "padding", a.dtype, span)
    return TileType(a.dtype, tuple(shape))


def _cat_ref(a, b, axis=0, padding=None):
    j = np.concatenate([np.asarray(a), np.asarray(b)], axis)
    n = joined_extent(np.shape(a)[axis], np.shape(b)[axis])
    width = [(0, 0)] * j.ndim
    width[axis] = (0, n - j.shape[axis])
    fill = np.asarray(0 if padding is None else padding).astype(j.dtype)
    return np.pad(j, width, constant_values=fill).astype(j.dtype)


register(Builtin("cat", "shape", (Param("a"), Param("b"), Param("axis", CONST, loose(0)),
                                  Param("padding", default=ABSENT, keyword_only=True)),
                 _cat_typing, _cat_ref,
                 doc="join two tiles along `axis` (the other extents equal); the joined extent "
                     "rounds up to a power of two, the positions past both hold `padding` (0)"))


def _extract_typing(bound: BoundArgs, span) -> Type:
    t = tile_arg(bound, "x", span)
    shape = shape_param(bound, "shape", t.dtype, span, rank=t.rank)
    index = const_dims(bound, "index", span, allow_sym=False)
    if len(index) != t.rank:
        raise fail("E0509", bound, "index", f"has {len(index)} entries but {t} has rank "
                                            f"{t.rank}", span)
    for i, (d, s, k) in enumerate(zip(t.shape, shape, index)):
        if isinstance(d, Sym) or isinstance(s, Sym):
            continue
        if s > d:
            raise fail("E0509", bound, "shape", f"dimension {i} is {s}, larger than {t}'s {d}",
                       span)
        if not 0 <= k < d // s:
            raise fail("E0507", bound, "index", f"entry {i} is {k}, outside 0..{d // s - 1}",
                       span)
    return TileType(t.dtype, shape)


def _extract_ref(x, index, shape):
    v = np.asarray(x)
    sl = tuple(slice(k * s, (k + 1) * s) for k, s in zip(index, shape))
    return v[sl].copy()


register(Builtin("extract", "shape", (Param("x"), Param("index", CONST), Param("shape", CONST)),
                 _extract_typing, _extract_ref,
                 doc="sub-tile `index` of size `shape`: t[y] = x[index * shape + y]"))
