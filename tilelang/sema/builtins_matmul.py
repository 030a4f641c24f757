"""Matrix products: `mma(a, b, acc)` (acc + a @ b, keeping acc's dtype) and `matmul(a, b)`,
which is also the `@` operator.

Operands are (M, K) @ (K, N), or batched (B, M, K) @ (B, K, N). `a` and `b` share a dtype, or
mix the two f8 formats, or mix i8 with u8 (as PTX mma allows). Accumulator dtypes:
f16 → f32 or f16, bf16 → f32, tf32 → f32, f8 → f32, i8/u8 → i32; f32 → f32 is accepted too
(the reference computes it exactly; a back end without a tensor-core path uses FMA).
`a @ b` returns the first (widest) accumulator dtype of the table: f16 @ f16 is f32.

Reference: products and sums are formed exactly (in double, or int64 for integers) and rounded
once to the accumulator dtype; integer accumulators wrap.

Block-scaled products: `mma_scaled(a, a_scale, b, b_scale, acc)` (below) is
acc + (a × a_scale) @ (b × b_scale), each scale applying to a block of V consecutive elements
along K (docs/language.md "Block-scaled products", after the OCP Microscaling (MX) formats
specification v1.0 and NVIDIA's NVFP4):

- MX (MXFP8, MXFP6, MXFP4): elements f8e4m3, f8e5m2, f6e2m3, f6e3m2 or f4e2m1 (a and b may
  differ), ue8m0 scales, V = 32;
- NVFP4: f4e2m1 elements, f8e4m3 scales (non-negative), V = 16.

Shapes: a (M, K), a_scale (M, K / V), b (K, N), b_scale (K / V, N), acc (M, N) f32 — or all
batched with a leading B. `a_scale[m, j]` scales a[m, 32 j .. 32 j + 31] (for V = 32) and
`b_scale[j, n]` scales b[32 j .. 32 j + 31, n].

Packed FP4 (`f4e2m1x2`, two f4e2m1 a byte, docs/language.md "Packed FP4"): a (M, K / 2) and
b (K / 2, N), both packed along K — byte a[m, j] holds elements 2j (bits 0-3) and 2j + 1 of
row m, byte b[j, n] elements 2j and 2j + 1 of column n — as the tensor cores read them (each
row of A and column of B is K-contiguous) and as torch's `float4_e2m1fn_x2` matrices and
Triton's `dot_scaled` pack them. Both operands are packed or neither; the scales count K
elements, not bytes.

Reference: every element times its scale is exact in double (at most 4 significant bits times
a power of two), products and the sum are formed in double and rounded once to f32, as `mma`'s.
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
_BLOCK_SCALED = ("f6e2m3", "f6e3m2", "f4e2m1", "ue8m0", "f4e2m1x2")   # only mma_scaled takes them


def _check_product_shapes(bound: BoundArgs, a, b, span) -> None:
    """`a` (M, K) and `b` (K, N), or both batched alike (E0509 otherwise)."""
    if a.rank != b.rank:
        raise fail("E0509", bound, "b", f"has rank {b.rank} but `a` has rank {a.rank}", span)
    if a.shape[-1] != b.shape[-2]:
        raise fail("E0509", bound, None, f"inner dimensions differ: `a` is {a} and `b` is {b} "
                                         f"({a.shape[-1]} vs {b.shape[-2]})", span,
                   help="a (M, K) tile multiplies a (K, N) tile")
    if a.rank == 3 and a.shape[0] != b.shape[0]:
        raise fail("E0509", bound, None, f"batch dimensions differ: `a` is {a} and `b` is {b}",
                   span)


def _operands(bound: BoundArgs, span) -> tuple[TileType, TileType, tuple]:
    a, b = tile_arg(bound, "a", span), tile_arg(bound, "b", span)
    for name, t in (("a", a), ("b", b)):
        if t.dtype.name not in MMA_ACC:
            raise fail("E0508", bound, name, f"is {t}, but matrix products take "
                                             f"{', '.join(MMA_ACC)}", span,
                       help="block-scaled formats multiply with `mma_scaled(a, a_scale, b, "
                            "b_scale, acc)`" if t.dtype.name in _BLOCK_SCALED else
                       "convert with `astype`, e.g. to f16 or bf16")
        if t.rank not in (2, 3):
            raise fail("E0509", bound, name, f"must be a 2-d or batched 3-d tile, found {t}",
                       span)
    if a.dtype != b.dtype and not any({a.dtype.name, b.dtype.name} <= m for m in _MIXABLE):
        raise fail("E0508", bound, "b", f"is {b}, but `a` is {a}: both operands need the same "
                                        f"dtype", span, help="convert one with `astype`")
    _check_product_shapes(bound, a, b, span)
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



# ---------------------------------------------------------------------------------------------
# Block-scaled products (OCP MX, NVFP4)

SCALED_ELEMENTS = ("f8e4m3", "f8e5m2", "f6e2m3", "f6e3m2", "f4e2m1", "f4e2m1x2")
PACKED_F4 = "f4e2m1x2"    # two f4e2m1 a byte, packed along K
# scale dtype → (elements per scale, element dtypes it scales)
SCALE_BLOCKS: dict[str, tuple[int, tuple[str, ...]]] = {
    "ue8m0": (32, SCALED_ELEMENTS),
    "f8e4m3": (16, ("f4e2m1", PACKED_F4)),
}


def _element(bound: BoundArgs, name: str, span) -> TileType:
    t = tile_arg(bound, name, span)
    if t.dtype.name not in SCALED_ELEMENTS:
        raise fail("E0508", bound, name, f"is {t}, but block-scaled products take "
                                         f"{', '.join(SCALED_ELEMENTS)}", span,
                   help="for f16, bf16 or f32 operands use `mma`")
    if t.rank not in (2, 3):
        raise fail("E0509", bound, name, f"must be a 2-d or batched 3-d tile, found {t}", span)
    return t


def block_size(bound: BoundArgs, span) -> int:
    """V, the elements along K that one scale applies to (after checking the scales' dtype)."""
    a, b = tile_arg(bound, "a", span), tile_arg(bound, "b", span)
    sa, sb = tile_arg(bound, "a_scale", span), tile_arg(bound, "b_scale", span)
    for name, s in (("a_scale", sa), ("b_scale", sb)):
        if s.dtype.name not in SCALE_BLOCKS:
            raise fail("E0508", bound, name, f"is {s}, but scales are ue8m0 (MX) or f8e4m3 "
                                             f"(NVFP4)", span)
    if sa.dtype != sb.dtype:
        raise fail("E0508", bound, "b_scale", f"is {sb}, but `a_scale` is {sa}: both scales "
                                              f"need the same dtype", span)
    v, elements = SCALE_BLOCKS[sa.dtype.name]
    for name, t in (("a", a), ("b", b)):
        if t.dtype.name not in elements:
            raise fail("E0508", bound, name, f"is {t}, but {sa.dtype} scales (NVFP4) take "
                                             f"f4e2m1 elements", span,
                       help="MX formats take ue8m0 scales")
    return v


def is_packed(t: TileType) -> bool:
    """A packed FP4 operand (two f4e2m1 a byte along K)."""
    return t.dtype.name == PACKED_F4


def _check_packing(bound: BoundArgs, a: TileType, b: TileType, span) -> None:
    """Both operands packed FP4, or neither (E0508 otherwise)."""
    if is_packed(a) != is_packed(b):
        name, t, other = ("b", b, a) if is_packed(a) else ("a", a, b)
        raise fail("E0508", bound, name, f"is {t}, but `{'a' if name == 'b' else 'b'}` is "
                                         f"{other}: packed FP4 multiplies packed FP4", span,
                   help="pack both operands two f4e2m1 a byte (f4e2m1x2) or neither; "
                        "`unpack_f4(x, axis)` unpacks one")


def k_elements(a: TileType):
    """K in elements: a packed operand holds two a byte."""
    return 2 * a.shape[-1] if is_packed(a) and isinstance(a.shape[-1], int) else a.shape[-1]


def _mma_scaled_typing(bound: BoundArgs, span) -> Type:
    a, b = _element(bound, "a", span), _element(bound, "b", span)
    _check_packing(bound, a, b, span)
    _check_product_shapes(bound, a, b, span)
    v = block_size(bound, span)
    k = k_elements(a)
    if not isinstance(k, int) or k % v:
        packed = f" = {a.shape[-1]} bytes of two" if is_packed(a) else ""
        raise fail("E0509", bound, "a", f"is {a}: K ({k}{packed}) must be a multiple of the "
                                        f"scale block ({v})", span)
    batch = a.shape[:-2]
    for name, want in (("a_scale", batch + (a.shape[-2], k // v)),
                       ("b_scale", batch + (k // v, b.shape[-1]))):
        s = tile_arg(bound, name, span)
        if s.shape != want:
            raise fail("E0509", bound, name, f"is {s}, but one scale per {v} elements of K "
                                             f"needs shape ({', '.join(map(str, want))})", span)
    acc = tile_arg(bound, "acc", span)
    shape = a.shape[:-1] + (b.shape[-1],)
    if acc.dtype.name != "f32":
        raise fail("E0508", bound, "acc", f"is {acc}, but block-scaled products accumulate "
                                          f"in f32", span, help="create it with `zeros(..., f32)`")
    if acc.shape != shape:
        raise fail("E0509", bound, "acc", f"is {acc}, but the product has shape "
                                          f"({', '.join(map(str, shape))})", span)
    return acc


def dequantized(x, scale, axis: int) -> np.ndarray:
    """Elements times their scale (float64), each scale repeated along `axis` (K)."""
    x = np.asarray(x, np.float64)
    s = np.asarray(scale, np.float64)
    v = x.shape[axis] // s.shape[axis]
    return x * np.repeat(s, v, axis=axis)


def _mma_scaled_ref(a, a_scale, b, b_scale, acc, packed: bool = False):
    if packed:
        from tilelang.sema.builtins_dtype import unpacked_f4
        a, b = unpacked_f4(a, -1), unpacked_f4(b, -2)
    r = np.matmul(dequantized(a, a_scale, -1), dequantized(b, b_scale, -2))
    return round_to_dtype(r + np.asarray(acc, np.float64), DTYPES["f32"])


def _mma_scaled_hints(bound: BoundArgs, span) -> dict:
    return {"packed": is_packed(tile_arg(bound, "a", span))}


register(Builtin("mma_scaled", "matmul",
                 (Param("a"), Param("a_scale"), Param("b"), Param("b_scale"), Param("acc")),
                 _mma_scaled_typing, _mma_scaled_ref,
                 doc="acc + (a × a_scale) @ (b × b_scale): block-scaled MX / NVFP4 product, "
                     "one scale per 32 (ue8m0) or 16 (f8e4m3) elements along K; packed FP4 "
                     "(f4e2m1x2) operands are packed along K",
                 ref_hints=_mma_scaled_hints,
                 extra={"scale_blocks": SCALE_BLOCKS}))
