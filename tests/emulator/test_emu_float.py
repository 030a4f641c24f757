"""Float arithmetic, conversions (rounding modes, f16/bf16) and approximate functions."""

import numpy as np
import pytest

from correctly_rounded import correctly_rounded


def f32(rng, n=256, scale=100.0):
    return (rng.standard_normal(n) * scale).astype(np.float32)


def bf16_bits_ref(x):
    """Round-to-nearest-even f32 → bf16, written independently with Python ints."""
    out = []
    for v in np.asarray(x, np.float32).view(np.uint32):
        v = int(v)
        if (v & 0x7F800000) == 0x7F800000 and v & 0x7FFFFF:
            out.append(0x7FC0)
            continue
        low = v & 0xFFFF
        hi = v >> 16
        if low > 0x8000 or (low == 0x8000 and hi & 1):
            hi += 1
        out.append(hi & 0xFFFF)
    return np.array(out, np.uint16)


def test_f32_arith(hw, rng):
    a, b, c = f32(rng), f32(rng), f32(rng)
    assert np.array_equal(hw.elementwise("add.rn.f32 {d}, {a}, {b};", [a, b], np.float32), a + b)
    assert np.array_equal(hw.elementwise("sub.f32 {d}, {a}, {b};", [a, b], np.float32), a - b)
    assert np.array_equal(hw.elementwise("mul.rn.f32 {d}, {a}, {b};", [a, b], np.float32), a * b)
    assert np.array_equal(hw.elementwise("div.rn.f32 {d}, {a}, {b};", [a, b], np.float32), a / b)
    fma = (a.astype(np.float64) * b + c).astype(np.float32)
    assert np.array_equal(hw.elementwise("fma.rn.f32 {d}, {a}, {b}, {c};", [a, b, c], np.float32),
                          fma)
    assert np.array_equal(hw.elementwise("neg.f32 {d}, {a};", [a], np.float32), -a)
    assert np.array_equal(hw.elementwise("abs.f32 {d}, {a};", [a], np.float32), np.abs(a))


def test_f32_min_max_nan(hw):
    a = np.array([1.0, np.nan, -2.0, np.nan] * 16, np.float32)
    b = np.array([np.nan, 3.0, -1.0, np.nan] * 16, np.float32)
    got = hw.elementwise("min.f32 {d}, {a}, {b};", [a, b], np.float32)
    assert np.array_equal(got, np.fmin(a, b), equal_nan=True)
    got = hw.elementwise("max.NaN.f32 {d}, {a}, {b};", [a, b], np.float32)
    assert np.array_equal(got, np.maximum(a, b), equal_nan=True)


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_directed_rounding_add(hw, rng, mode):
    a, b = f32(rng), (f32(rng) * 1e-5).astype(np.float32)
    got = hw.elementwise(f"add.{mode}.f32 {{d}}, {{a}}, {{b}};", [a, b], np.float32)
    exact = a.astype(np.float64) + b.astype(np.float64)
    # the result is the neighbour of the exact sum in the mode's direction
    g = got.astype(np.float64)
    if mode == "rz":
        assert np.all(np.abs(g) <= np.abs(exact))
    elif mode == "rm":
        assert np.all(g <= exact)
    else:
        assert np.all(g >= exact)
    near = (exact).astype(np.float32)
    assert np.all(np.abs(got.view(np.int32).astype(np.int64) - near.view(np.int32)) <= 1)


def test_f64_arith(hw, rng):
    a, b = rng.standard_normal(256), rng.standard_normal(256)
    assert np.array_equal(hw.elementwise("add.f64 {d}, {a}, {b};", [a, b], np.float64), a + b)
    assert np.array_equal(hw.elementwise("mul.f64 {d}, {a}, {b};", [a, b], np.float64), a * b)
    assert np.array_equal(hw.elementwise("div.rn.f64 {d}, {a}, {b};", [a, b], np.float64), a / b)


def test_cvt_float_int(hw, rng):
    x = f32(rng, scale=1e3)
    x[:6] = [np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5]
    for mode, f in (("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)):
        exp = f(np.nan_to_num(x.astype(np.float64), nan=0.0))
        exp = np.clip(exp, -2**31, 2**31 - 1).astype(np.int32)
        got = hw.elementwise(f"cvt.{mode}.s32.f32 {{d}}, {{a}};", [x], np.int32)
        assert np.array_equal(got, exp), mode
    expu = np.clip(np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0)), 0,
                   2**32 - 1).astype(np.uint32)
    assert np.array_equal(hw.elementwise("cvt.rzi.u32.f32 {d}, {a};", [x], np.uint32), expu)
    i = rng.integers(-2**31, 2**31, 256, dtype=np.int64).astype(np.int32)
    assert np.array_equal(hw.elementwise("cvt.rn.f32.s32 {d}, {a};", [i], np.float32),
                          i.astype(np.float32))
    assert np.array_equal(hw.elementwise("cvt.f64.s32 {d}, {a};", [i], np.float64),
                          i.astype(np.float64))


def test_cvt_int_int(hw, rng):
    i = rng.integers(-2**31, 2**31, 256, dtype=np.int64).astype(np.int32)
    assert np.array_equal(hw.elementwise("cvt.s64.s32 {d}, {a};", [i], np.int64),
                          i.astype(np.int64))
    assert np.array_equal(hw.elementwise("cvt.u64.u32 {d}, {a};", [i.view(np.uint32)],
                                         np.uint64), i.view(np.uint32).astype(np.uint64))
    op = "cvt.s8.s32 %h9, {a};\n  cvt.s32.s8 {d}, %h9;"
    assert np.array_equal(hw.elementwise(op, [i], np.int32), i.astype(np.int8).astype(np.int32))
    op = "cvt.sat.s8.s32 %h9, {a};\n  cvt.s32.s8 {d}, %h9;"
    assert np.array_equal(hw.elementwise(op, [i], np.int32), np.clip(i, -128, 127))


def test_cvt_half_and_bf16(hw, rng):
    x = f32(rng, scale=10.0)
    x[:4] = [65504.0, 70000.0, 1e-8, -0.0]
    op = "cvt.rn.f16.f32 %h9, {a};\n  cvt.f32.f16 {d}, %h9;"
    with np.errstate(over="ignore"):                 # 70000 overflows to inf, as on the GPU
        expect = x.astype(np.float16).astype(np.float32)
    assert np.array_equal(hw.elementwise(op, [x], np.float32), expect)
    op = "cvt.rn.bf16.f32 %h9, {a};\n  mov.b32 {d}, {{0, %h9}};"
    got = hw.elementwise(op, [x], np.uint32)
    assert np.array_equal((got >> 16).astype(np.uint16), bf16_bits_ref(x))
    op = "cvt.rn.bf16.f32 %h9, {a};\n  cvt.f32.bf16 {d}, %h9;"
    back = (bf16_bits_ref(x).astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(hw.elementwise(op, [x], np.float32), back)


def test_cvt_f32_f64_rounding(hw, rng):
    x = rng.standard_normal(256) * 1e3
    assert np.array_equal(hw.elementwise("cvt.rn.f32.f64 {d}, {a};", [x], np.float32),
                          x.astype(np.float32))
    got = hw.elementwise("cvt.rz.f32.f64 {d}, {a};", [x], np.float32)
    assert np.all(np.abs(got.astype(np.float64)) <= np.abs(x))
    assert np.all(np.abs(got.astype(np.float64) - x) < np.abs(x) * 2.0**-22)


def test_half_arith(hw, rng):
    a = (rng.standard_normal(256)).astype(np.float16)
    b = (rng.standard_normal(256)).astype(np.float16)
    op = "add.rn.f16 %h9, {a}, {b};\n  mov.b16 {d}, %h9;"
    assert np.array_equal(hw.elementwise(op, [a, b], np.float16),
                          (a.astype(np.float64) + b).astype(np.float16))
    # packed f16x2 multiply: lanes independent
    pa = rng.standard_normal(512).astype(np.float16).view(np.uint32)
    pb = rng.standard_normal(512).astype(np.float16).view(np.uint32)
    got = hw.elementwise("mul.rn.f16x2 {d}, {a}, {b};", [pa, pb], np.uint32)
    exp = (pa.view(np.float16).astype(np.float64) * pb.view(np.float16)).astype(np.float16)
    assert np.array_equal(got.view(np.float16), exp)


def test_bf16_fma(hw, rng):
    x = rng.standard_normal(768).astype(np.float32)
    a, b, c = (bf16_bits_ref(x[i * 256:(i + 1) * 256]) for i in range(3))
    got = hw.elementwise("fma.rn.bf16 {d}, {a}, {b}, {c};", [a, b, c], np.uint16)
    fa, fb, fc = ((v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
                  for v in (a, b, c))
    exact = fa * fb + fc
    assert np.array_equal(got, bf16_bits_ref(exact.astype(np.float32)))


# the exact function: a name of tests/correctly_rounded.py (NumPy's transcendentals vary by
# CPU), or IEEE arithmetic (NumPy's, exact)
@pytest.mark.parametrize("name,f,lo,hi,rel", [
    ("ex2.approx.f32", "exp2", -10, 10, 2.0**-22),
    ("lg2.approx.f32", "log2", 0.01, 100, 2.0**-22),
    ("rcp.approx.f32", lambda x: 1 / x, 0.1, 10, 2.0**-23),
    ("rsqrt.approx.f32", "rsqrt", 0.1, 10, 2.0**-22),
    ("sqrt.rn.f32", np.sqrt, 0, 100, 2.0**-24),
    ("sin.approx.f32", "sin", -3, 3, 2.0**-21),
    ("cos.approx.f32", "cos", -3, 3, 2.0**-21),
    ("tanh.approx.f32", "tanh", -3, 3, 2.0**-11),
])
def test_approx_functions_within_bound(hw, rng, name, f, lo, hi, rel):
    x = rng.uniform(lo, hi, 256).astype(np.float32)
    got = hw.elementwise(f"{name} {{d}}, {{a}};", [x], np.float32)
    exact = (correctly_rounded(f, [x], np.float64) if isinstance(f, str)
             else f(x.astype(np.float64)))
    err = np.abs(got - exact)
    assert np.all(err <= rel * np.maximum(np.abs(exact), 1.0) + 1e-30)


def test_setp_float_unordered(hw):
    a = np.array([1.0, np.nan, 2.0, 3.0] * 16, np.float32)
    b = np.array([1.0, 1.0, np.nan, 4.0] * 16, np.float32)
    got = hw.elementwise("setp.ltu.f32 {d}, {a}, {b};", [a, b], None, out_pred=True)
    assert np.array_equal(got, ((a < b) | np.isnan(a) | np.isnan(b)).astype(np.uint32))
    got = hw.elementwise("setp.ne.f32 {d}, {a}, {b};", [a, b], None, out_pred=True)
    assert np.array_equal(got, ((a != b) & ~np.isnan(a) & ~np.isnan(b)).astype(np.uint32))


def test_cvt_wide_ints_round_once(hw):
    x = np.array([2**62 + 1, -(2**62) - 3, 123456789012345, 2**53 + 1] * 16, np.int64)
    assert np.array_equal(hw.elementwise("cvt.rn.f32.s64 {d}, {a};", [x], np.float32),
                          x.astype(np.float32))
    assert np.array_equal(hw.elementwise("cvt.rn.f64.s64 {d}, {a};", [x], np.float64),
                          x.astype(np.float64))
    y = np.array([16777217, -16777219] * 32, np.int32)        # not representable in f32
    assert np.array_equal(hw.elementwise("cvt.rz.f32.s32 {d}, {a};", [y], np.float32),
                          np.array([16777216, -16777218] * 32, np.float32))
    assert np.array_equal(hw.elementwise("cvt.rp.f32.s32 {d}, {a};", [y], np.float32),
                          np.array([16777218, -16777218] * 32, np.float32))


def test_ex2_ftz_flushes_subnormal_results(hw):
    # 2^-130 is subnormal in f32: kept by ex2.approx.f32, flushed to +0 by the .ftz form
    x = np.resize(np.array([-130.0, -126.0, -149.0, 0.0, 3.0, -1.0], np.float32), 64)
    plain = hw.elementwise("ex2.approx.f32 {d}, {a};", [x], np.float32)
    ftz = hw.elementwise("ex2.approx.ftz.f32 {d}, {a};", [x], np.float32)
    assert plain[0] == np.float32(2.0 ** -130) and plain[2] == np.float32(2.0 ** -149)
    assert list(ftz[:6]) == [0.0, np.float32(2.0 ** -126), 0.0, 1.0, 8.0, 0.5]
    assert not np.signbit(ftz[0])
