"""Reductions `sum prod max min argmax argmin` (`axis=None`, `keepdims=false`) and scans
`cumsum cumprod` (`axis=0`).

`axis=None` reduces every axis (a scalar result, or all-ones with `keepdims`); argmax/argmin
then give the row-major flat index, and always the first occurrence (NaN counts as the
maximum, as in NumPy). Result dtypes: `sum`, `prod` and the scans widen bool/i8/i16 to i32 and
u8/u16 to u32 (integer sums wrap); max/min keep the dtype; arg* give i32. Float reductions
of f16/bf16 accumulate in f32 and round once at the end; f32 accumulates in f32.
"""

from __future__ import annotations

from tilelang.lazy import deferred, lazy_module

from tilelang.sema.builtins_core import (ABSENT, CONST, Builtin, BoundArgs, Param, const_bool,
                                         const_int, fail, norm_axis, register, tile_arg)
from tilelang.sema.builtins_math import restricted_help
from tilelang.sema.constants import const_bool as cbool, loose
from tilelang.sema.types import (BOOL, I8, I16, I32, U8, U16, U32, DType, TileType, Type,
                                 round_to_dtype)

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
