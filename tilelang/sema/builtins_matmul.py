"""Matrix products: `mma(a, b, acc)` (acc + a @ b, keeping acc's dtype) and `matmul(a, b)`,
which is also the `@` operator.

Operands are (M, K) @ (K, N), or batched (B, M, K) @ (B, K, N). `a` and `b` share a dtype, or
mix the two f8 formats, or mix i8 with u8 (as PTX mma allows). Accumulator dtypes:
f16 → f32 or f16, bf16 → f32, tf32 → f32, f8 → f32, i8/u8 → i32; f32 → f32 is accepted too
(the reference computes it exactly; a back end without a tensor-core path uses FMA).
`a @ b` returns the first (widest) accumulator dtype of the table: f16 @ f16 is f32.

Reference: products and sums are formed exactly (in double, or int64 for integers) and rounded
once to the accumulator dtype; integer accumulators wrap.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (Builtin, BoundArgs, Param, fail, register,
                                         register_operator, tile_arg)
from tilelang.sema.types import DTYPES, DType, TileType, Type, round_to_dtype

np = lazy_module("numpy")

MMA_ACC: dict[str, tuple[str, ...]] = {
    "f16": ("f32", "f16"), "bf16": ("f32",), "tf32": ("f32",), "f8e4m3": ("f32",),
    "f8e5m2": ("f32",), "i8": ("i32",), "u8": ("i32",), "f32": ("f32",),
}
_MIXABLE = ({"f8e4m3", "f8e5m2"}, {"i8", "u8"})


def _operands(bound: BoundArgs, span) -> tuple[TileType, TileType, tuple]:
    a, b = tile_arg(bound, "a", span), tile_arg(bound, "b", span)
    for name, t in (("a", a), ("b", b)):
        if t.dtype.name not in MMA_ACC:
            raise fail("E0508", bound, name, f"is {t}, but matrix products take "
                                             f"{', '.join(MMA_ACC)}", span,
                       help="convert with `astype`, e.g. to f16 or bf16")
        if t.rank not in (2, 3):
            raise fail("E0509", bound, name, f"must be a 2-d or batched 3-d tile, found {t}",
                       span)
    if a.dtype != b.dtype and not any({a.dtype.name, b.dtype.name} <= m for m in _MIXABLE):
        raise fail("E0508", bound, "b", f"is {b}, but `a` is {a}: both operands need the same "
                                        f"dtype", span, help="convert one with `astype`")
    if a.rank != b.rank:
        raise fail("E0509", bound, "b", f"has rank {b.rank} but `a` has rank {a.rank}", span)
    if a.shape[-1] != b.shape[-2]:
        raise fail("E0509", bound, None, f"inner dimensions differ: `a` is {a} and `b` is {b} "
                                         f"({a.shape[-1]} vs {b.shape[-2]})", span,
                   help="a (M, K) tile multiplies a (K, N) tile")
    if a.rank == 3 and a.shape[0] != b.shape[0]:
        raise fail("E0509", bound, None, f"batch dimensions differ: `a` is {a} and `b` is {b}",
                   span)
    out_shape = a.shape[:-1] + (b.shape[-1],)
    return a, b, out_shape


def _mma_typing(bound: BoundArgs, span) -> Type:
    a, b, shape = _operands(bound, span)
    acc = tile_arg(bound, "acc", span)
    allowed = MMA_ACC[a.dtype.name]
    if acc.dtype.name not in allowed:
        raise fail("E0508", bound, "acc", f"is {acc}, but {a.dtype} products accumulate in "
                                          f"{' or '.join(allowed)}", span,
                   help=f"create it with e.g. `zeros(..., {allowed[0]})`")
    if acc.shape != shape:
        raise fail("E0509", bound, "acc", f"is {acc}, but the product has shape "
                                          f"({', '.join(map(str, shape))})", span)
    return acc


def _matmul_typing(bound: BoundArgs, span) -> Type:
    a, b, shape = _operands(bound, span)
    return TileType(DTYPES[MMA_ACC[a.dtype.name][0]], shape)


def _product(a, b, acc, dtype: DType) -> np.ndarray:
    x, y = np.asarray(a), np.asarray(b)
    if dtype.is_int:
        r = np.matmul(x.astype(np.int64), y.astype(np.int64))
        if acc is not None:
            r = r + np.asarray(acc).astype(np.int64)
        return r.astype(dtype.storage_np_dtype)  # wraps
    r = np.matmul(x.astype(np.float64), y.astype(np.float64))
    if acc is not None:
        r = r + np.asarray(acc).astype(np.float64)
    return round_to_dtype(r, dtype)


def _mma_ref(a, b, acc, dtype: DType | None = None):
    from tilelang.sema.types import dtype_from_numpy
    return _product(a, b, acc, dtype or dtype_from_numpy(np.asarray(acc).dtype))


def _matmul_ref(a, b, dtype: DType | None = None):
    if dtype is None:
        kind = np.asarray(a).dtype.kind
        dtype = DTYPES["i32"] if kind in "iu" else DTYPES["f32"]
    return _product(a, b, None, dtype)


def _hints(bound: BoundArgs, span) -> dict:
    return {"dtype": bound.builtin.result_type(bound, span).dtype}


register(Builtin("mma", "matmul", (Param("a"), Param("b"), Param("acc")), _mma_typing, _mma_ref,
                 doc="acc + a @ b in acc's dtype", ref_hints=_hints,
                 extra={"acc_dtypes": MMA_ACC}))
register_operator("@", register(Builtin(
    "matmul", "matmul", (Param("a"), Param("b")), _matmul_typing, _matmul_ref,
    doc="a @ b, accumulated in the widest accumulator dtype", ref_hints=_hints, symbol="@",
    extra={"acc_dtypes": MMA_ACC})))

