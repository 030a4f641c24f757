"""Creation built-ins: `arange(n, dtype=i32)`, `full(shape, value, dtype=)`,
`zeros(shape, dtype=f32)`, `ones(shape, dtype=f32)`.

Shapes are constant tuples of powers of two (`zeros((BM, BN), f32)`; a lone integer means a
1-d shape). `full` takes a run-time or constant scalar; with an explicit dtype a loose constant
must fit it and any other scalar is converted as by `astype`; without one, the value's dtype is
used (a loose int gives i32, a loose float f32).
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (ABSENT, CONST, DTYPE, Builtin, BoundArgs, Param, arg,
                                         dtype_arg, fail, register, shape_param, tile_of)
from tilelang.sema.builtins_math import restricted_help
from tilelang.sema.constants import ConstValue, materialize
from tilelang.sema.promotion import promote_loose
from tilelang.sema.types import BOOL, F32, I32, DType, Sym, TileType, Type, round_to_dtype

np = lazy_module("numpy")


def _numeric_dtype(bound: BoundArgs, name: str, span) -> DType:
    dt = dtype_arg(bound, name)
    if dt.restricted:
        raise fail("E0508", bound, name, f"cannot be {dt}", span, help=restricted_help(dt))
    return dt


def _arange_typing(bound: BoundArgs, span) -> Type:
    n_arg = arg(bound, "n")
    c = n_arg.const
    if not (isinstance(c, ConstValue) and isinstance(c.value, (int, Sym))
            and not isinstance(c.value, bool)):
        raise fail("E0507", bound, "n", "must be a constant integer", span)
    dt = _numeric_dtype(bound, "dtype", span)
    if dt.is_bool:
        raise fail("E0508", bound, "dtype", "cannot be bool", span)
    shape = shape_param(bound, "n", dt, span)
    if dt.is_int and isinstance(shape[0], int) and shape[0] - 1 > dt.max:
        raise fail("E0507", bound, "n", f"is {shape[0]}, but {dt} holds at most {dt.max}",
                   span)
    return TileType(dt, shape)


def _arange_ref(n: int, dtype: DType = I32):
    return round_to_dtype(np.arange(n), dtype)


register(Builtin("arange", "creation", (Param("n", CONST), Param("dtype", DTYPE, I32)),
                 _arange_typing, _arange_ref, doc="the tile [0, 1, ..., n-1]"))


def _full_typing(bound: BoundArgs, span) -> Type:
    v = tile_of(bound, "value", span)
    if isinstance(v, TileType) and v.shape:
        raise fail("E0510", bound, "value", f"must be a scalar, found {v}", span,
                   help="use `broadcast_to` to spread a tile")
    if bound.given("dtype"):
        dt = _numeric_dtype(bound, "dtype", span)
        if isinstance(v, ConstValue):
            materialize(v, dt, arg(bound, "value").span or span)
    elif isinstance(v, ConstValue):
        dt = promote_loose(BOOL, v.loose_kind)
    else:
        dt = v.dtype
        if dt.restricted:
            raise fail("E0508", bound, "value", f"cannot be {dt}", span,
                       help=restricted_help(dt))
    return TileType(dt, shape_param(bound, "shape", dt, span))


def _full_ref(shape, value, dtype: DType | None = None):
    v = np.asarray(value)
    if dtype is None:
        return np.full(shape, v)
    return np.full(shape, round_to_dtype(v, dtype), dtype=dtype.storage_np_dtype)


def _full_hints(bound: BoundArgs, span) -> dict:
    return {"dtype": _full_typing(bound, span).dtype}


register(Builtin("full", "creation",
                 (Param("shape", CONST), Param("value"), Param("dtype", DTYPE, ABSENT)),
                 _full_typing, _full_ref, doc="a tile of `shape` filled with `value`",
                 ref_hints=_full_hints))


def _filled(name: str, fill: int):
    def typing(bound: BoundArgs, span) -> Type:
        dt = _numeric_dtype(bound, "dtype", span)
        return TileType(dt, shape_param(bound, "shape", dt, span))

    def ref(shape, dtype: DType = F32):
        return np.full(tuple(shape), fill, dtype=dtype.storage_np_dtype)

    register(Builtin(name, "creation", (Param("shape", CONST), Param("dtype", DTYPE, F32)),
                     typing, ref, doc=f"a tile of `shape` filled with {fill}"))


_filled("zeros", 0)
_filled("ones", 1)
