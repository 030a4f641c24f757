"""Memory built-ins: `load`, `store`, `gather`, `scatter`, `num_tiles` and the atomics.

Tile-indexed access (`load`/`store`): with `index = (i, j)` and `shape = (M, N)` the tile is
the (i, j)-th M×N block of the array: element `t[x] = A[index * shape + x]`. Parts outside the
array read `padding` (0 when omitted) and are dropped by `store`. `order`, a permutation of the
array's axes, loads from the array viewed with its axes permuted (`order = (1, 0)` loads a
transposed tile; `index` and `shape` then refer to the permuted axes). Instead of `index`,
`offset = (r, c)` places the tile at any element: `t[x] = A[offset + x]` (exactly one of the two,
E0512). `mask`, a bool tile that broadcasts to the tile's shape, reads `padding` where it is
false (load) or leaves the array's element as it is (store).

Element-indexed access (`gather`/`scatter`/atomics): `indices` is one integer tile per array
axis (a lone tile for a 1-d array), broadcast together with `mask` (and `value`); elements
whose index is outside the array (negative indices included: they never wrap) or whose mask is
false read `padding`, are not written, and for atomics return 0. When several elements of a
`scatter` hit the same address the reference keeps the last in row-major order; the device
keeps an unspecified one. Atomics are applied one element at a time in row-major order and
return each element's old value, which is one valid linearization of the device's behaviour.

Atomic dtypes: add takes i32 u32 i64 u64 f16 bf16 f32 f64; max and min take i32 u32 i64 u64
f32 f64; and, or, xor take i32 u32 i64 u64; xchg and cas take i32 u32 i64 u64 f32 f64. Every
atomic takes `sem` and `scope` (the PTX memory model's), `fence` orders the block's accesses.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.diagnostics import TileSemanticError, register_codes
from tilelang.sema.builtins_core import (ABSENT, CONST, STRING_KIND, Builtin, BoundArgs, Param, arg,
                                         array_arg, common_shape, const_dims, const_int, fail,
                                         found_typed, int_scalar, norm_axis, register, shape_param,
                                         tile_of, tuple_elements)
from tilelang.sema.builtins_index import tile_gather_ref, tile_gather_typing
from tilelang.sema.constants import ConstStr, ConstValue, materialize
from tilelang.sema.promotion import broadcast_all, promote
from tilelang.sema.types import (BOOL, DTYPES, I32, I64, VOID, AbsentArrayType, ArrayListType,
                                 ArrayType, DType,
                                 TileType, Type,
                                 format_shape, round_to_dtype, scalar)

np = lazy_module("numpy")


# ---------------------------------------------------------------------------------------------
# Shared checks

def _check_index(bound: BoundArgs, A: ArrayType, span, name: str = "index") -> None:
    elems = tuple_elements(bound, name, span)
    if len(elems) != A.rank:
        raise fail("E0509", bound, name, f"has {len(elems)} entr"
                                            f"{'y' if len(elems) == 1 else 'ies'} but the "
                                            f"array is {A}", span,
                   help=f"give one {'tile index' if name == 'index' else 'element offset'} "
                        f"per axis, e.g. `{name} = "
                        f"({', '.join(['0'] * A.rank)}{',' if A.rank == 1 else ''})`")
    for k, e in enumerate(elems):
        int_scalar(bound, name, e, span, what=f"entry {k} of `{name}`")
        if isinstance(e.const, ConstValue) and e.const.is_loose:
            materialize(e.const, I64, e.span or span)  # the device computes offsets in i64


def _check_element_value(bound: BoundArgs, name: str, dtype: DType, span,
                         scalar_only: bool = False) -> None:
    """`padding`/`value`: a constant that fits, or a scalar/tile of the array's dtype."""
    a = arg(bound, name)
    t = tile_of(bound, name, span)
    where = a.span or span
    if isinstance(t, ConstValue):
        materialize(t, dtype, where)
        return
    if scalar_only and t.shape:
        raise fail("E0510", bound, name, f"must be a scalar, found {t}", span)
    if t.dtype != dtype:
        if isinstance(a.const, ConstValue) and promote(t.dtype, dtype, where) == dtype:
            return  # a strict constant that converts exactly along a promotion edge
        raise fail("E0508", bound, name, f"is {t}, but the array holds {dtype}", span,
                   help=f"convert with `astype({name}, {dtype})`")


def _check_order(bound: BoundArgs, A: ArrayType, span) -> tuple[int, ...] | None:
    if not bound.given("order"):
        return None
    dims = const_dims(bound, "order", span, allow_sym=False)
    if sorted(dims) != list(range(A.rank)):
        raise fail("E0507", bound, "order", f"{format_shape(dims)} is not a permutation of the "
                                            f"{A.rank} axes of {A}", span)
    return dims


# ---------------------------------------------------------------------------------------------
# load / store

register_codes({
    "E0512": "a tile access gives both `index` and `offset`, or neither",
})


def _check_place(bound: BoundArgs, A: ArrayType, span) -> None:
    """Exactly one of `index` (tile coordinates) and `offset` (element coordinates)."""
    name = bound.builtin.name
    has_index, has_offset = bound.given("index"), bound.given("offset")
    if has_index == has_offset:
        what = "both `index` and `offset`" if has_index else "neither `index` nor `offset`"
        raise TileSemanticError.at(
            "E0512", f"`{name}` is given {what}", span,
            help="give `index = (i, j)` for the (i, j)-th tile of the shape, or `offset = (r, "
                 "c)` for the tile whose first element is A[r, c]")
    _check_index(bound, A, span, "index" if has_index else "offset")


def _check_mask(bound: BoundArgs, shape, span) -> None:
    """`mask`: a bool tile (or scalar) that broadcasts to the tile's shape."""
    if not bound.given("mask"):
        return
    (mshape,) = _mask_shape(bound, span)
    fits = len(mshape) <= len(shape) and all(
        m in (1, s) for m, s in zip(mshape[::-1], tuple(shape)[::-1]))
    if not fits:
        raise fail("E0509", bound, "mask", f"is Tile[bool, {format_shape(mshape)[1:-1]}], "
                                           f"which does not broadcast to the tile's shape "
                                           f"{format_shape(shape)}", span)


def _load_typing(bound: BoundArgs, span) -> Type:
    A = array_arg(bound, "A", span)
    _check_place(bound, A, span)
    shape = shape_param(bound, "shape", A.dtype, span, rank=A.rank)
    _check_order(bound, A, span)
    if bound.given("padding"):
        _check_element_value(bound, "padding", A.dtype, span, scalar_only=True)
    _check_mask(bound, shape, span)
    return TileType(A.dtype, shape)


def _coords(c) -> tuple:
    """`index = i` on a rank-1 array is `index = (i,)` (the checker accepts both)."""
    return tuple(c) if isinstance(c, (tuple, list)) else (c,)


def _start(index, shape, offset):
    if offset is not None:
        return [int(o) for o in _coords(offset)]
    return [int(i) * int(s) for i, s in zip(_coords(index), shape)]


def _tile_window(V: np.ndarray, start, shape):
    """Slices (into the tile, into the array) of the in-bounds part of the tile whose first
    element is V[start]."""
    t_sl, a_sl = [], []
    for st, s, n in zip(start, shape, V.shape):
        lo, hi = max(st, 0), min(st + int(s), n)
        if hi <= lo:
            return None
        t_sl.append(slice(lo - st, hi - st))
        a_sl.append(slice(lo, hi))
    return tuple(t_sl), tuple(a_sl)


def load_ref(A, index, shape, padding=None, order=None, dtype: DType | None = None, mask=None,
             offset=None):
    V = np.asarray(A)
    if order is not None:
        V = V.transpose(tuple(order))
    pad = 0 if padding is None else padding
    pad = round_to_dtype(np.asarray(pad), dtype) if dtype is not None else np.asarray(pad)
    out = np.full(tuple(int(s) for s in shape), pad, dtype=V.dtype)
    w = _tile_window(V, _start(index, shape, offset), shape)
    if w is not None:
        out[w[0]] = V[w[1]]
    if mask is not None:
        out[~np.broadcast_to(np.asarray(mask, bool), out.shape)] = pad
    return out


def _array_hint(bound: BoundArgs, span) -> dict:
    return {"dtype": array_arg(bound, "A", span).dtype}


register(Builtin("load", "memory",
                 (Param("A"), Param("index", default=ABSENT), Param("shape", CONST),
                  Param("padding", default=ABSENT), Param("order", CONST, ABSENT),
                  Param("mask", default=ABSENT, keyword_only=True),
                  Param("offset", default=ABSENT, keyword_only=True)),
                 _load_typing, load_ref, ref_hints=_array_hint,
                 doc="the tile t[x] = A[index * shape + x] (or A[offset + x]); outside the "
                     "array or where `mask` is false: padding"))


def _store_typing(bound: BoundArgs, span) -> Type:
    A = array_arg(bound, "A", span)
    _check_place(bound, A, span)
    t = tile_of(bound, "tile", span, allow_loose=False)
    if t.rank != A.rank:
        raise fail("E0509", bound, "tile", f"is {t}, but the array is {A}: the tile needs "
                                           f"{A.rank} dimension{'s' if A.rank != 1 else ''}",
                   span, help="use `reshape` or `expand_dims` to match the array's rank")
    if t.dtype != A.dtype:
        raise fail("E0508", bound, "tile", f"is {t}, but the array holds {A.dtype}", span,
                   help=f"convert with `astype(tile, {A.dtype})`")
    _check_mask(bound, t.shape, span)
    return VOID


def store_ref(A, index, tile, mask=None, offset=None):
    V = np.asarray(A)
    T = np.asarray(tile)
    w = _tile_window(V, _start(index, T.shape, offset), T.shape)
    if w is None:
        return None
    if mask is None:
        A[w[1]] = T[w[0]]
    else:
        keep = np.broadcast_to(np.asarray(mask, bool), T.shape)[w[0]]
        A[w[1]] = np.where(keep, T[w[0]], V[w[1]])
    return None


register(Builtin("store", "memory",
                 (Param("A"), Param("index", default=ABSENT), Param("tile"),
                  Param("mask", default=ABSENT, keyword_only=True),
                  Param("offset", default=ABSENT, keyword_only=True)),
                 _store_typing, store_ref, side_effects=True,
                 doc="write tile to A[index * tile.shape + x] (or A[offset + x]), dropping the "
                     "outside part and where `mask` is false"))


def _num_tiles_typing(bound: BoundArgs, span) -> Type:
    A = array_arg(bound, "A", span)
    norm_axis(bound, "axis", const_int(bound, "axis", span), A.rank, span)
    shape_param(bound, "shape", A.dtype, span, rank=A.rank)
    return scalar(I32)


def num_tiles_ref(A, axis, shape):
    n, s = np.asarray(A).shape[axis], int(shape[axis])
    return np.int32(-(-n // s))


register(Builtin("num_tiles", "memory", (Param("A"), Param("axis", CONST), Param("shape", CONST)),
                 _num_tiles_typing, num_tiles_ref,
                 doc="how many tiles of `shape` cover A along `axis`: cdiv(A.shape[axis], "
                     "shape[axis])"))


def _array_meta_typing(bound: BoundArgs, span) -> Type:
    A = array_arg(bound, "A", span)
    norm_axis(bound, "axis", const_int(bound, "axis", span), A.rank, span)
    return scalar(I32)


def dim_ref(A, axis):
    return np.int32(np.asarray(A).shape[axis])


def stride_ref(A, axis):
    a = np.asarray(A)
    return np.int32(a.strides[axis] // a.itemsize)


# `A.shape[k]` and `A.stride[k]` in source lower to these (run-time values of the launch).
register(Builtin("dim", "memory", (Param("A"), Param("axis", CONST)), _array_meta_typing,
                 dim_ref, doc="the extent of A along `axis` (what `A.shape[axis]` reads)"))
register(Builtin("stride", "memory", (Param("A"), Param("axis", CONST)), _array_meta_typing,
                 stride_ref, doc="the stride of A along `axis`, in elements (`A.stride[axis]`)"))


def _is_none_typing(bound: BoundArgs, span) -> Type:
    a = arg(bound, "A")
    if not isinstance(a.type, (ArrayType, AbsentArrayType)):
        raise fail("E0506", bound, "A", f"must be an array parameter (`Optional[Array[...]]` "
                                        f"or `Array[...]`), found {found_typed(a)}", span)
    return scalar(BOOL)


def is_none_ref(A):
    return A is None


# An optional array's presence is fixed per specialization (docs/language.md, "Optional
# arrays"): the checker folds every call to a constant (check_expr.py, `is_none`), so no IR
# op is ever emitted for it; the reference serves the docs and the interpreter's tables.
register(Builtin("is_none", "memory", (Param("A"),), _is_none_typing, is_none_ref,
                 doc="whether A, an `Optional[Array[...]]` parameter, was given `None`: a "
                     "compile-time bool (false for an ordinary array)"))


# A list of arrays (`List[Array[T, N]]`, docs/language.md "Lists of arrays"): `ws[e]` in source
# lowers to `list_item`, an array read from the list's device table (docs/abi.md), usable
# wherever an array parameter is; `len(ws)` is the number of arrays.

def _list_arg(bound: BoundArgs, span) -> ArrayListType:
    a = arg(bound, "L")
    if not isinstance(a.type, ArrayListType):
        raise fail("E0506", bound, "L", f"must be a list of arrays (a kernel parameter of type "
                                        f"`List[Array[...]]`), found {found_typed(a)}", span)
    return a.type


def _list_item_typing(bound: BoundArgs, span) -> Type:
    t = _list_arg(bound, span)
    int_scalar(bound, "index", arg(bound, "index"), span)
    return t.array


def list_item_ref(L, index):
    i = int(index)
    if not 0 <= i < len(L):
        # the compiled code gives an empty array here (every access masked off): the
        # reference matches it
        a = L[0]
        return a[tuple(slice(0, 0) for _ in range(a.ndim))]
    return L[i]


def _len_typing(bound: BoundArgs, span) -> Type:
    _list_arg(bound, span)
    return scalar(I32)


def len_ref(L):
    return np.int32(len(L))


register(Builtin("list_item", "memory", (Param("L"), Param("index")), _list_item_typing,
                 list_item_ref, doc="array `index` of the list L (what `L[index]` reads); an "
                 "index outside the list gives an empty array (loads read the padding, stores "
                 "are dropped)"))
register(Builtin("len", "memory", (Param("L"),), _len_typing, len_ref,
                 doc="the number of arrays in the list L, an `i32`"))


# ---------------------------------------------------------------------------------------------
# Element-indexed access

def _index_tiles(bound: BoundArgs, A: ArrayType, span) -> list[tuple]:
    elems = tuple_elements(bound, "indices", span)
    if len(elems) != A.rank:
        raise fail("E0509", bound, "indices", f"has {len(elems)} index tile"
                                              f"{'s' if len(elems) != 1 else ''} but the array "
                                              f"is {A}", span,
                   help="give one integer tile per array axis")
    shapes = []
    for k, e in enumerate(elems):
        t = e.type
        ok = (isinstance(t, TileType) and t.dtype.is_int) or (
            isinstance(e.const, ConstValue) and e.const.loose_kind == "int")
        if not ok:
            raise TileSemanticError.at(
                "E0506", f"`{bound.builtin.name}`: index {k} in `indices` must be an integer "
                         f"tile or scalar, found {found_typed(e)}", e.span or span)
        if isinstance(e.const, ConstValue) and e.const.is_loose:
            materialize(e.const, I64, e.span or span)  # the device computes offsets in i64
        shapes.append(t.shape if isinstance(t, TileType) else ())
    return shapes


def _mask_shape(bound: BoundArgs, span) -> list[tuple]:
    if not bound.given("mask"):
        return []
    t = tile_of(bound, "mask", span)
    if not (isinstance(t, TileType) and t.dtype is BOOL):
        raise fail("E0508", bound, "mask", f"must be a bool tile, found {t}", span)
    return [t.shape]


def _gather_typing(bound: BoundArgs, span) -> Type:
    if isinstance(arg(bound, "A").type, TileType):
        return tile_gather_typing(bound, span)      # within a tile (builtins_index.py)
    if bound.given("axis"):
        raise fail("E0504", bound, "axis", "is for gathering within a tile; from an array, "
                                           "`indices` has one integer tile per axis", span)
    A = array_arg(bound, "A", span)
    shape = broadcast_all(_index_tiles(bound, A, span) + _mask_shape(bound, span), span)
    if bound.given("padding"):
        _check_element_value(bound, "padding", A.dtype, span, scalar_only=True)
    return TileType(A.dtype, shape)


def _gather_hint(bound: BoundArgs, span) -> dict:
    if isinstance(arg(bound, "A").type, TileType):
        return {}
    return _array_hint(bound, span)


def _as_index_list(indices, rank: int):
    if rank == 1 and not isinstance(indices, (tuple, list)):
        return [indices]
    return list(indices)


def _flat_targets(V: np.ndarray, indices, mask, extra=()):
    """Broadcast indices/mask/extra arrays; return them with the in-bounds-and-masked flags."""
    idx = [np.asarray(i).astype(np.int64) for i in _as_index_list(indices, V.ndim)]
    arrays = np.broadcast_arrays(*idx, *(np.asarray(m) for m in
                                         ([mask] if mask is not None else [])),
                                 *(np.asarray(e) for e in extra))
    idx_b = arrays[:len(idx)]
    rest = arrays[len(idx):]
    ok = np.ones(idx_b[0].shape if idx_b else (), dtype=bool)
    for i, n in zip(idx_b, V.shape):
        ok &= (i >= 0) & (i < n)
    if mask is not None:
        ok &= rest[0].astype(bool)
        rest = rest[1:]
    return idx_b, ok, rest


def gather_ref(A, indices, mask=None, padding=None, dtype: DType | None = None, axis=None):
    if axis is not None:
        return tile_gather_ref(A, indices, axis)
    V = np.asarray(A)
    idx, ok, _ = _flat_targets(V, indices, mask)
    pad = 0 if padding is None else padding
    pad = round_to_dtype(np.asarray(pad), dtype) if dtype is not None else np.asarray(pad)
    out = np.full(ok.shape, pad, dtype=V.dtype)
    out[ok] = V[tuple(i[ok] for i in idx)]
    return out


register(Builtin("gather", "memory",
                 (Param("A"), Param("indices"), Param("mask", default=ABSENT),
                  Param("padding", default=ABSENT),
                  Param("axis", CONST, ABSENT, keyword_only=True)),
                 _gather_typing, gather_ref, ref_hints=_gather_hint,
                 doc="t[x] = A[indices[0][x], indices[1][x], ...]; outside or masked: padding. "
                     "With `axis` and a tile A: t[x] = A[x with axis replaced by indices[x]]"))


def _scatter_typing(bound: BoundArgs, span) -> Type:
    A = array_arg(bound, "A", span)
    shapes = _index_tiles(bound, A, span) + _mask_shape(bound, span)
    _check_element_value(bound, "value", A.dtype, span)
    broadcast_all(shapes + [common_shape(bound, ["value"], span)], span)
    return VOID


def scatter_ref(A, indices, value, mask=None, dtype: DType | None = None):
    V = np.asarray(A)
    vals = value if dtype is None else round_to_dtype(np.asarray(value), dtype)
    idx, ok, (vb,) = _flat_targets(V, indices, mask, extra=(vals,))
    flat = np.ravel_multi_index(tuple(i[ok] for i in idx), V.shape) if ok.any() else \
        np.zeros(0, dtype=np.int64)
    v = vb[ok]
    # the last write in row-major order wins: keep each address's last occurrence
    uniq, first_in_rev = np.unique(flat[::-1], return_index=True)
    A[np.unravel_index(uniq, V.shape)] = v[::-1][first_in_rev]
    return None


register(Builtin("scatter", "memory",
                 (Param("A"), Param("indices"), Param("value"), Param("mask", default=ABSENT)),
                 _scatter_typing, scatter_ref, side_effects=True, ref_hints=_array_hint,
                 doc="A[indices[0][x], ...] = value[x]; outside or masked elements dropped"))


# ---------------------------------------------------------------------------------------------
# Atomics and fences

_INTS = ("i32", "u32", "i64", "u64")
ATOMIC_DTYPES: dict[str, tuple[str, ...]] = {
    "add": _INTS + ("f16", "bf16", "f32", "f64"),
    "max": _INTS + ("f32", "f64"), "min": _INTS + ("f32", "f64"),
    "and": _INTS, "or": _INTS, "xor": _INTS,
    "xchg": _INTS + ("f32", "f64"), "cas": _INTS + ("f32", "f64"),
}
# Memory orders and scopes of the PTX memory model; the defaults are Triton's.
SEMS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("block", "cluster", "device", "system")
FENCE_SEMS = ("acq_rel", "sc")
DEFAULT_SEM, DEFAULT_SCOPE, DEFAULT_FENCE_SEM = "acq_rel", "device", "acq_rel"


def _quoted(names) -> str:
    return ", ".join(f'"{n}"' for n in names)


def check_choice(bound: BoundArgs, name: str, choices, span, help: str | None = None) -> None:
    a = bound.args.get(name)
    if a is not None and isinstance(a.const, ConstStr) and a.const.value not in choices:
        raise fail("E0507", bound, name, f"must be one of {_quoted(choices)}, found "
                                         f"{a.const}", span, help=help)


def _check_order_scope(bound: BoundArgs, span) -> None:
    check_choice(bound, "sem", SEMS, span,
                 help='"acquire" orders what follows after the atomic, "release" what precedes '
                      'before it, "acq_rel" (the default) both, "relaxed" neither')
    check_choice(bound, "scope", SCOPES, span,
                 help='the threads the ordering is with: "block", "cluster", "device" (the '
                      'default) or "system" (the host and other devices too)')


def _atomic_typing(op: str):
    values = ("expected", "value") if op == "cas" else ("value",)

    def typing(bound: BoundArgs, span) -> Type:
        A = array_arg(bound, "A", span)
        if A.dtype.name not in ATOMIC_DTYPES[op]:
            raise fail("E0508", bound, "A", f"is {A}, but atomic_{op} takes arrays of "
                                            f"{', '.join(ATOMIC_DTYPES[op])}", span)
        _check_order_scope(bound, span)
        shapes = _index_tiles(bound, A, span) + _mask_shape(bound, span)
        for v in values:
            _check_element_value(bound, v, A.dtype, span)
        shape = broadcast_all(shapes + [common_shape(bound, [v], span) for v in values], span)
        return TileType(A.dtype, shape)
    return typing


def float_minmax(op: str, old, v):
    """Float atomic max/min as the device performs it (PTX has no float atom.max): on the
    bit patterns, a signed integer max (min) where the value's sign bit is clear, else an
    unsigned min (max). For numbers this is the float max (min) with -0.0 < +0.0."""
    o, x = np.asarray(old), np.asarray(v, dtype=np.asarray(old).dtype)
    bits = {4: (np.int32, np.uint32), 8: (np.int64, np.uint64)}[o.dtype.itemsize]
    si, ui = o.view(bits[0]), x.view(bits[0])
    su, uu = o.view(bits[1]), x.view(bits[1])
    if ui >= 0:
        r = (max if op == "max" else min)(si, ui)
        return np.asarray(r, bits[0]).view(o.dtype)[()]
    r = (min if op == "max" else max)(su, uu)
    return np.asarray(r, bits[1]).view(o.dtype)[()]


def _apply_atomic(op: str, old, args, dtype: DType | None):
    if op == "add":
        r = np.asarray(old).astype(np.float64 if np.asarray(old).dtype.kind == "f"
                                   else np.asarray(old).dtype) + args[0]
        return round_to_dtype(r, dtype) if dtype is not None else r
    if op in ("max", "min") and np.asarray(old).dtype.kind == "f":
        return float_minmax(op, old, args[0])
    if op == "max":
        return max(old, args[0])
    if op == "min":
        return min(old, args[0])
    if op == "and":
        return old & args[0]
    if op == "or":
        return old | args[0]
    if op == "xor":
        return old ^ args[0]
    if op == "xchg":
        return args[0]
    expected, value = args  # cas
    return value if old == expected else old


def _atomic_ref(op: str):
    def ref(A, indices, *, mask=None, dtype: DType | None = None, sem=None, scope=None,
            **values):
        V = np.asarray(A)
        names = ("expected", "value") if op == "cas" else ("value",)
        vals = [np.asarray(values[n]) if dtype is None else round_to_dtype(values[n], dtype)
                for n in names]
        vals = [v.astype(V.dtype) for v in vals]
        idx, ok, rest = _flat_targets(V, indices, mask, extra=vals)
        out = np.zeros(ok.shape, dtype=V.dtype)
        with np.errstate(all="ignore"):
            for pos in np.ndindex(ok.shape):
                if not ok[pos]:
                    continue
                addr = tuple(int(i[pos]) for i in idx)
                old = V[addr]
                out[pos] = old
                A[addr] = _apply_atomic(op, old, [r[pos] for r in rest], dtype)
        return out
    return ref


_SEM_PARAMS = (Param("sem", STRING_KIND, ConstStr(DEFAULT_SEM), keyword_only=True),
               Param("scope", STRING_KIND, ConstStr(DEFAULT_SCOPE), keyword_only=True))

for _op in ATOMIC_DTYPES:
    _vals = (Param("expected"), Param("value")) if _op == "cas" else (Param("value"),)
    register(Builtin(f"atomic_{_op}", "memory",
                     (Param("A"), Param("indices")) + _vals + (Param("mask", default=ABSENT),)
                     + _SEM_PARAMS,
                     _atomic_typing(_op), _atomic_ref(_op), side_effects=True,
                     ref_hints=_array_hint,
                     doc=f"atomic {_op} at A[indices[x]]; returns the old values",
                     extra={"dtypes": tuple(DTYPES[d] for d in ATOMIC_DTYPES[_op])}))


def _fence_typing(bound: BoundArgs, span) -> Type:
    check_choice(bound, "sem", FENCE_SEMS, span,
                 help='"acq_rel" (the default) orders the accesses before the fence with those '
                      'after it; "sc" also makes the fences sequentially consistent')
    check_choice(bound, "scope", SCOPES, span)
    return VOID


def _fence_ref(sem=None, scope=None):
    return None   # the reference runs one block at a time, in order: nothing to order


register(Builtin("fence", "memory",
                 (Param("sem", STRING_KIND, ConstStr(DEFAULT_FENCE_SEM), keyword_only=True),
                  Param("scope", STRING_KIND, ConstStr(DEFAULT_SCOPE), keyword_only=True)),
                 _fence_typing, _fence_ref, side_effects=True,
                 doc="order the block's memory accesses before the fence with those after it, "
                     "for the threads of `scope`"))
