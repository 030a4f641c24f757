"""Reductions `sum prod max min argmax argmin` (`axis=None`, `keepdims=false`), scans
`cumsum cumprod` (`axis=0`), and `reduce`/`scan` with a combine function.

`axis=None` reduces every axis (a scalar result, or all-ones with `keepdims`); argmax/argmin
then give the row-major flat index, and always the first occurrence (NaN counts as the
maximum, as in NumPy). Result dtypes: `sum`, `prod` and the scans widen bool/i8/i16 to i32 and
u8/u16 to u32 (integer sums wrap); max/min keep the dtype; arg* give i32. Float reductions
of f16/bf16 accumulate in f32 and round once at the end; f32 accumulates in f32.
"""

from __future__ import annotations

from tilelang.lazy import deferred, lazy_module

from tilelang.sema.builtins_core import (ABSENT, CONST, FN, Builtin, BoundArgs, CombineType,
                                         Param, const_bool, const_int, fail, found_typed,
                                         norm_axis, register, tile_arg)
from tilelang.sema.builtins_math import restricted_help
from tilelang.sema.constants import const_bool as cbool, loose
from tilelang.sema.types import (BOOL, I8, I16, I32, U8, U16, U32, DType, TileType, TupleType,
                                 Type, round_to_dtype)

np = lazy_module("numpy")

WIDEN = {BOOL: I32, I8: I32, I16: I32, U8: U32, U16: U32}


def _input(bound: BoundArgs, span) -> TileType:
    t = tile_arg(bound, "x", span)
    if t.dtype.restricted:
        raise fail("E0508", bound, "x", f"cannot be {t}", span, help=restricted_help(t.dtype))
    return t


def _reduce_typing(kind: str):
    def typing(bound: BoundArgs, span) -> Type:
        t = _input(bound, span)
        keep = const_bool(bound, "keepdims", span)
        if kind in ("sum", "prod"):
            dt = WIDEN.get(t.dtype, t.dtype)
        elif kind in ("argmax", "argmin"):
            dt = I32
        else:
            dt = t.dtype
        if not bound.given("axis"):
            return TileType(dt, (1,) * t.rank if keep else ())
        ax = norm_axis(bound, "axis", const_int(bound, "axis", span), t.rank, span)
        shape = t.shape[:ax] + ((1,) if keep else ()) + t.shape[ax + 1:]
        return TileType(dt, shape)
    return typing


def _accumulate_dtype(v: np.ndarray, out: DType | None):
    """NumPy dtype to accumulate in: f32 for narrow floats, the result's storage otherwise."""
    if v.dtype.kind == "f":
        return np.float64 if v.dtype == np.float64 else np.float32
    return out.storage_np_dtype if out is not None else None


def _fold_ref(np_fn):
    def ref(x, axis=None, keepdims=False, dtype: DType | None = None):
        v = np.asarray(x)
        with np.errstate(all="ignore"):
            r = np_fn(v, axis=axis, keepdims=bool(keepdims), dtype=_accumulate_dtype(v, dtype))
        return round_to_dtype(r, dtype) if dtype is not None else np.asarray(r)
    return ref


def _extreme_ref(np_fn):
    def ref(x, axis=None, keepdims=False, dtype: DType | None = None):
        return np.asarray(np_fn(np.asarray(x), axis=axis, keepdims=bool(keepdims)))
    return ref


def _arg_ref(np_fn):
    def ref(x, axis=None, keepdims=False, dtype: DType | None = None):
        v = np.asarray(x)
        if axis is None:
            r = np_fn(v.reshape(-1))
            return np.full((1,) * v.ndim if keepdims else (), r, dtype=np.int32)
        return np_fn(v, axis=axis, keepdims=bool(keepdims)).astype(np.int32)
    return ref


def _hints(bound: BoundArgs, span) -> dict:
    t = bound.builtin.result_type(bound, span)
    return {"dtype": t.dtype}


_REDUCE_PARAMS = (Param("x"), Param("axis", CONST, ABSENT), Param("keepdims", CONST, cbool(False)))
for _name, _ref, _doc in (
        ("sum", _fold_ref(deferred(np, "sum")), "sum of the elements"),
        ("prod", _fold_ref(deferred(np, "prod")), "product of the elements"),
        ("max", _extreme_ref(deferred(np, "max")), "largest element (NaN propagates)"),
        ("min", _extreme_ref(deferred(np, "min")), "smallest element (NaN propagates)"),
        ("argmax", _arg_ref(deferred(np, "argmax")), "index of the first largest element"),
        ("argmin", _arg_ref(deferred(np, "argmin")), "index of the first smallest element")):
    register(Builtin(_name, "reduce", _REDUCE_PARAMS, _reduce_typing(_name), _ref,
                     doc=f"{_doc} along `axis` (all axes when omitted)", ref_hints=_hints))


def _scan_typing(bound: BoundArgs, span) -> Type:
    t = _input(bound, span)
    if t.rank == 0:
        raise fail("E0509", bound, "x", "must be a tile, not a scalar", span)
    norm_axis(bound, "axis", const_int(bound, "axis", span), t.rank, span)
    return TileType(WIDEN.get(t.dtype, t.dtype), t.shape)


def _scan_ref(np_fn):
    def ref(x, axis=0, dtype: DType | None = None):
        v = np.asarray(x)
        with np.errstate(all="ignore"):
            r = np_fn(v, axis=axis, dtype=_accumulate_dtype(v, dtype))
        return round_to_dtype(r, dtype) if dtype is not None else r
    return ref


for _name, _fn in (("cumsum", deferred(np, "cumsum")), ("cumprod", deferred(np, "cumprod"))):
    register(Builtin(_name, "scan", (Param("x"), Param("axis", CONST, loose(0))), _scan_typing,
                     _scan_ref(_fn), doc=f"inclusive running {_name[3:]} along `axis`",
                     ref_hints=_hints))


# ---- reduce and scan with a combine function (docs/language.md, "Reductions and scans with a
# combine function"). The operand is a tile or a tuple of tiles of one shape; the combine takes
# two states (a scalar, or a tuple of scalars, per operand) and returns one. A tuple operand
# gives a tuple result: the IR has one op per element (`part`, which the builder sets), each
# naming the same inlined combine, and the code generator computes them once.

def _operands(bound: BoundArgs, span) -> tuple[TileType, ...]:
    a = bound["x"]
    if isinstance(a.type, TileType):
        ts = (a.type,)
    elif isinstance(a.type, TupleType) and a.type.elements and \
            all(isinstance(t, TileType) for t in a.type.elements):
        ts = tuple(a.type.elements)
    else:
        raise fail("E0506", bound, "x", f"must be a tile or a tuple of tiles, found "
                                        f"{found_typed(a)}", span)
    for t in ts:
        if t.dtype.restricted:
            raise fail("E0508", bound, "x", f"cannot hold {t}", span,
                       help=restricted_help(t.dtype))
    if any(tuple(t.shape) != tuple(ts[0].shape) for t in ts[1:]):
        raise fail("E0509", bound, "x", "must be tiles of one shape, found " +
                   ", ".join(str(t) for t in ts), span,
                   help="broadcast them first: `broadcast_to(t, shape)`")
    return ts


def _combine(bound: BoundArgs, ts: tuple[TileType, ...], span) -> CombineType:
    c = bound["combine"].type
    assert isinstance(c, CombineType)   # bind_call checked the FN kind
    if tuple(c.state) != tuple(t.dtype for t in ts):
        raise fail("E0530", bound, "combine", f"was checked for {c}, not for the operand's "
                   "dtypes", span)
    return c


def _parts(bound: BoundArgs, types: list[Type], tuple_operand: bool, span) -> Type:
    if not bound.given("part"):
        return TupleType(tuple(types)) if tuple_operand else types[0]
    k = const_int(bound, "part", span)
    if not 0 <= k < len(types):
        raise fail("E0507", bound, "part", f"must be 0 to {len(types) - 1}, found {k}", span)
    return types[k]


def _combine_reduce_typing(bound: BoundArgs, span) -> Type:
    ts = _operands(bound, span)
    _combine(bound, ts, span)
    keep = const_bool(bound, "keepdims", span)
    rank = ts[0].rank
    if not bound.given("axis"):
        shape = (1,) * rank if keep else ()
    else:
        ax = norm_axis(bound, "axis", const_int(bound, "axis", span), rank, span)
        shape = ts[0].shape[:ax] + ((1,) if keep else ()) + ts[0].shape[ax + 1:]
    return _parts(bound, [TileType(t.dtype, shape) for t in ts],
                  isinstance(bound["x"].type, TupleType), span)


def _combine_scan_typing(bound: BoundArgs, span) -> Type:
    ts = _operands(bound, span)
    _combine(bound, ts, span)
    if ts[0].rank == 0:
        raise fail("E0509", bound, "x", "must be a tile, not a scalar", span)
    norm_axis(bound, "axis", const_int(bound, "axis", span), ts[0].rank, span)
    const_bool(bound, "reverse", span)
    return _parts(bound, list(ts), isinstance(bound["x"].type, TupleType), span)


def _as_states(x) -> tuple:
    return tuple(np.asarray(v) for v in x) if isinstance(x, tuple) else (np.asarray(x),)


def _result(states: tuple, x, part):
    if part is not None:
        return states[int(part)]
    return states if isinstance(x, tuple) else states[0]


def _reduce_ref(x, combine, axis=None, keepdims=False, part=None):
    """A tree over the axis: halves combined pairwise (the order the code generator's tree
    may differ from; language.md asks for an associative and commutative combine)."""
    vs = _as_states(x)
    shape = vs[0].shape
    if axis is None:
        vs = tuple(v.reshape(-1) for v in vs)
        ax = 0
    else:
        ax = axis % len(shape)
    while vs[0].shape[ax] > 1:
        n = vs[0].shape[ax]
        h = n // 2
        lo = tuple(np.take(v, np.arange(h), axis=ax) for v in vs)
        hi = tuple(np.take(v, np.arange(h, 2 * h), axis=ax) for v in vs)
        got = tuple(combine(lo, hi))
        if n % 2:       # an odd count (a flattened tile is a power of two; a test's may not be)
            got = tuple(np.concatenate([g, np.take(v, [n - 1], axis=ax)], axis=ax)
                        for g, v in zip(got, vs))
        vs = got
    if vs[0].ndim:
        vs = tuple(np.squeeze(v, axis=ax) for v in vs)
    if keepdims:
        out = (1,) * len(shape) if axis is None else shape[:ax] + (1,) + shape[ax + 1:]
        vs = tuple(v.reshape(out) for v in vs)
    return _result(vs, x, part)


def _scan_fn_ref(x, combine, axis=0, reverse=False, part=None):
    """Sequential, in index order: out[i] = x[0] ⊕ ... ⊕ x[i]; reversed,
    out[i] = x[i] ⊕ ... ⊕ x[n-1]."""
    vs = _as_states(x)
    ax = axis % vs[0].ndim
    n = vs[0].shape[ax]
    outs = [np.empty_like(v) for v in vs]
    order = range(n - 1, -1, -1) if reverse else range(n)
    acc = None
    for i in order:
        cur = tuple(np.take(v, i, axis=ax) for v in vs)
        acc = cur if acc is None else tuple(combine(cur, acc) if reverse else combine(acc, cur))
        for o, a in zip(outs, acc):
            idx = [slice(None)] * o.ndim
            idx[ax] = i
            o[tuple(idx)] = a
    return _result(tuple(outs), x, part)


_PART = Param("part", CONST, ABSENT, keyword_only=True)
register(Builtin(
    "reduce", "reduce", (Param("x"), Param("combine", FN), Param("axis", CONST, ABSENT),
                         Param("keepdims", CONST, cbool(False)), _PART),
    _combine_reduce_typing, _reduce_ref, extra={"fn_operand": "x"},
    doc="combines the elements along `axis` (all axes when omitted) with `combine`, a `fn` of "
        "two elements (two tuples for a tuple of tiles) in a tree; `part` picks one tile of a "
        "tuple result"))
register(Builtin(
    "scan", "scan", (Param("x"), Param("combine", FN), Param("axis", CONST, loose(0)),
                     Param("reverse", CONST, cbool(False)), _PART),
    _combine_scan_typing, _scan_fn_ref, extra={"fn_operand": "x"},
    doc="inclusive running `combine` along `axis` (from the end with `reverse`); `part` "
        "picks one tile of a tuple result"))
