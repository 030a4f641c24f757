"""Dtypes, tile/array types, shapes and the reference rounding of the emulated float formats."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.diagnostics import Span, TileSemanticError, remember_source, render
from tilelang.sema import types as T


def test_int_ranges_match_numpy():
    for name in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"):
        d = T.DTYPES[name]
        info = np.iinfo(np.dtype(name.replace("i", "int").replace("u", "uint")))
        assert (d.min, d.max, d.bits, d.signed) == (info.min, info.max, info.bits, info.min < 0)
        assert d.np_dtype == np.dtype(info.dtype)


def test_float_limits():
    assert T.F16.max_finite == float(np.finfo(np.float16).max) == 65504.0
    assert T.F32.max_finite == float(np.finfo(np.float32).max)
    assert T.F64.max_finite == float(np.finfo(np.float64).max)
    # bf16 and tf32: the f32 exponent range with 7 / 10 fraction bits.
    assert T.BF16.max_finite == float(np.uint32(0x7F7F0000).view(np.float32))
    assert T.TF32.max_finite == float(np.uint32(0x7F7FE000).view(np.float32))
    assert T.F8E4M3.max_finite == 448.0 and not T.F8E4M3.has_inf
    assert T.F8E5M2.max_finite == 57344.0 and T.F8E5M2.has_inf
    assert T.F8E4M3.min == -448.0
    assert [d.name for d in T.ALL_DTYPES if d.restricted] == ["tf32", "f8e4m3", "f8e5m2", "f4e2m1",
                                                             "f6e2m3", "f6e3m2", "ue8m0",
                                                             "f4e2m1x2"]
    assert T.BF16.np_dtype is None and T.BF16.storage_np_dtype == np.float32
    assert T.TF32.itemsize == 4 and T.F8E5M2.itemsize == 1 and T.BOOL.itemsize == 1


def test_categories():
    assert T.BOOL.is_bool and T.I8.is_int and T.F16.is_float and T.TF32.is_float
    assert T.BOOL.category_rank < T.U64.category_rank < T.F16.category_rank


def test_pretty_printing():
    assert str(T.TileType(T.F32, (128, 64))) == "Tile[f32, 128, 64]"
    assert str(T.ArrayType(T.F16, 2)) == "Array[f16, 2]"
    assert str(T.scalar(T.I32)) == "i32"
    assert str(T.TileType(T.BF16, (T.Sym("BM"), 64))) == "Tile[bf16, BM, 64]"
    assert str(T.TupleType((T.scalar(T.I32),))) == "(i32,)"
    assert str(T.TupleType((T.scalar(T.I32), T.scalar(T.F32)))) == "(i32, f32)"
    assert str(T.DTypeType(T.F16)) == "dtype f16"
    assert str(T.LOOSE_INT) == "int literal"
    assert T.format_shape((32,)) == "(32,)" and T.format_shape(()) == "()"


def test_scalar_is_zero_d_tile():
    assert T.scalar(T.F32) == T.TileType(T.F32, ()) == T.ScalarType(T.F32)
    assert T.scalar(T.F32).is_scalar and T.scalar(T.F32).rank == 0
    assert T.TileType(T.F32, (4, 8)).size == 32


def test_dtype_lookup():
    assert T.dtype_from_name("bf16") is T.BF16
    assert T.dtype_from_numpy(np.dtype(np.uint16)) is T.U16
    with pytest.raises(TileSemanticError) as e:
        T.dtype_from_name("f128")
    assert e.value.code == "E0309"


def test_power_of_two_shapes():
    assert T.tile_type(T.F32, (128, 64, 1)).shape == (128, 64, 1)
    assert T.tile_type(T.F32, (T.Sym("N"), 16)).is_symbolic
    span = Span("k.tile", 2, 9, 2, 33)
    remember_source("k.tile", "kernel k() {\n    let t: Tile[f32, 128, 100] = zeros();\n}")
    with pytest.raises(TileSemanticError) as e:
        T.tile_type(T.F32, (128, 100), span)
    assert render(e.value.diagnostics[0]) == "\n".join([
        "error[E0301]: dimension 1 of Tile[f32, 128, 100] is 100, which is not a power of two",
        " --> k.tile:2:9",
        "  |",
        "2 |     let t: Tile[f32, 128, 100] = zeros();",
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^",
        "  |",
        "  = help: use 128 and pad: load with `padding=` fills the extra elements and store "
        "drops the out-of-bounds part",
    ])
    for bad in (0, -4, 3, 96):
        with pytest.raises(TileSemanticError) as e:
            T.tile_type(T.I32, (bad,))
        assert e.value.code == "E0301"
    with pytest.raises(TileSemanticError) as e:
        T.tile_type(T.I32, (2.0,))
    assert e.value.code == "E0310"


def test_specialize_shape():
    shape = (T.Sym("BM"), 64)
    assert T.specialize_shape(T.F32, shape, {"BM": 128}, None) == (128, 64)
    with pytest.raises(TileSemanticError) as e:
        T.specialize_shape(T.F32, shape, {"BM": 100}, None)
    assert e.value.code == "E0301" and "dimension 0" in e.value.diagnostics[0].message
    with pytest.raises(TileSemanticError):
        T.specialize_shape(T.F32, shape, {}, None)


def test_next_pow2():
    assert [T.next_pow2(n) for n in (0, 1, 2, 3, 100, 128, 129)] == [1, 1, 2, 4, 128, 128, 256]


# ---------------------------------------------------------------------------------------------
# Rounding helpers, checked against independent methods.

def _random_f32(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    return x[np.isfinite(x)]


def _bits_round(x: np.ndarray, drop: int) -> np.ndarray:
    """Round-to-nearest-even by integer arithmetic on the float32 bit pattern, dropping the
    low `drop` bits (the classic bf16 conversion trick; overflow carries into inf)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    half = (1 << (drop - 1)) - 1
    b = (b + half + ((b >> drop) & 1)) & ~np.uint64((1 << drop) - 1)
    return b.astype(np.uint32).view(np.float32)


def test_round_to_bf16_matches_bit_trick():
    x = _random_f32(200_000, 1)
    np.testing.assert_array_equal(T.round_to_bf16(x), _bits_round(x, 16))
    assert T.round_to_bf16(np.array([np.nan]))[0] != T.round_to_bf16(np.array([np.nan]))[0]
    assert T.round_to_bf16(np.array([np.inf, -np.inf])).tolist() == [np.inf, -np.inf]


def test_round_to_tf32_matches_bit_trick():
    x = _random_f32(200_000, 2)
    np.testing.assert_array_equal(T.round_to_tf32(x), _bits_round(x, 13))


def test_generic_quantizer_matches_numpy_f16():
    x = np.concatenate([_random_f32(100_000, 3), np.random.default_rng(4).normal(size=10_000)
                        .astype(np.float32) * 1e-5])
    ours = T._quantize(x, 10, -14, 65504.0, saturate=False)
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(ours, ref)


def _f8_table(exp_bits: int, mant_bits: int, bias: int, fn: bool) -> np.ndarray:
    """Every finite non-negative value of an 8-bit float, decoded from its bit patterns."""
    vals = []
    for e in range(1 << exp_bits):
        for m in range(1 << mant_bits):
            if fn and e == (1 << exp_bits) - 1 and m == (1 << mant_bits) - 1:
                continue  # e4m3fn: S.1111.111 is NaN
            if not fn and e == (1 << exp_bits) - 1:
                continue  # e5m2: inf / nan
            if e == 0:
                vals.append(m / (1 << mant_bits) * 2.0 ** (1 - bias))
            else:
                vals.append((1 + m / (1 << mant_bits)) * 2.0 ** (e - bias))
    return np.array(sorted(vals))


def _nearest_even(x: float, table: np.ndarray, mant_bits: int) -> float:
    a = abs(x)
    if a >= table[-1]:
        return float(np.copysign(table[-1], x))  # satfinite
    i = np.searchsorted(table, a)
    lo, hi = table[i - 1] if i else 0.0, table[i]
    if a == hi:
        r = hi
    elif a - lo < hi - a:
        r = lo
    elif a - lo > hi - a:
        r = hi
    else:  # tie: the one with an even code (index in the table)
        r = lo if (i - 1) % 2 == 0 else hi
    return float(np.copysign(r, x))


@pytest.mark.parametrize("fn,exp_bits,mant,bias", [
    (T.round_to_f8e4m3, 4, 3, 7), (T.round_to_f8e5m2, 5, 2, 15)])
def test_round_to_f8_matches_table(fn, exp_bits, mant, bias):
    table = _f8_table(exp_bits, mant, bias, fn=exp_bits == 4)
    assert table[-1] == (448.0 if exp_bits == 4 else 57344.0)
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(size=3000) * 10.0 ** rng.integers(-8, 6, size=3000),
                        table, -table, (table[1:] + table[:-1]) / 2])  # ties included
    ours = fn(x)
    ref = np.array([_nearest_even(v, table, mant) for v in x])
    np.testing.assert_array_equal(ours, ref.astype(np.float32))
    assert fn(np.array([np.inf, -np.inf])).tolist() == [table[-1], -table[-1]]
    assert np.isnan(fn(np.array([np.nan]))[0])


def test_round_to_dtype_dispatch():
    x = np.array([1.0 + 2**-9, 300.7, -2.5])
    assert T.round_to_dtype(x, T.BF16).tolist() == [1.0, 300.0, -2.5]
    assert T.round_to_dtype(x, T.I32).tolist() == [1, 300, -2]  # truncation toward zero
    assert T.round_to_dtype(x, T.F16).dtype == np.float16
