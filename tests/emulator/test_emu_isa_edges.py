"""Instructions at their edge values (±0, ±inf, NaN, subnormals, carries) against the PTX ISA's
definitions: the forms peer compilers emit that the emulator once read differently from the
hardware (docs/emulator.md, "Instruction coverage")."""

import bisect
from fractions import Fraction

import numpy as np
import pytest

INF, NAN = np.inf, np.nan
DENORM = np.float32(1e-40)             # an f32 subnormal


def _f32(*xs):
    return np.resize(np.array(xs, np.float32), 64)


def _same(got, want):
    """Bitwise-equal floats, any NaN equal to any NaN, and the sign of zero significant."""
    got, want = np.asarray(got), np.asarray(want, got.dtype)
    both_nan = np.isnan(got) & np.isnan(want)
    return bool(np.all(both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))))


# -- rsqrt / sqrt .approx.ftz of -0 keep the zero's sign -------------------------------------
EDGE = _f32(0.0, -0.0, INF, -INF, NAN, DENORM, -DENORM, 4.0, -1.0)


@pytest.mark.parametrize("opcode,want", [
    # the ISA's tables: rsqrt(±0) = ±inf, rsqrt(+inf) = +0, negative → NaN; .ftz flushes
    # subnormal inputs to a zero of their sign first
    ("rsqrt.approx.ftz.f32", [INF, -INF, 0.0, NAN, NAN, INF, -INF, 0.5, NAN]),
    ("rsqrt.approx.f32", [INF, -INF, 0.0, NAN, NAN, 1 / np.sqrt(float(DENORM)), NAN, 0.5, NAN]),
    ("sqrt.approx.ftz.f32", [0.0, -0.0, INF, NAN, NAN, 0.0, -0.0, 2.0, NAN]),
    ("sqrt.rn.f32", [0.0, -0.0, INF, NAN, NAN, np.sqrt(float(DENORM)), NAN, 2.0, NAN]),
])
def test_root_of_signed_zero_and_edges(hw, opcode, want):
    got = hw.elementwise(f"{opcode} {{d}}, {{a}};", [EDGE], np.float32)
    assert _same(got[:9], np.array(want, np.float32)), (opcode, got[:9])


# -- cvt to f16x2 rounds each half in the instruction's mode ---------------------------------
def _f16_grid():
    """Every finite f16 value as an exact fraction, sorted (the reference is built from the
    bit patterns, not from NumPy's conversion)."""
    vals = []
    for b in range(0x7C00):
        e, m = b >> 10, b & 0x3FF
        v = Fraction(m, 1 << 24) if e == 0 else Fraction(1024 + m, 1 << 10) * Fraction(2) ** (e - 15)
        vals.append((v, b))
    neg = [(-v, b | 0x8000) for v, b in vals if b]
    return sorted(vals + neg)


GRID = _f16_grid()
KEYS = [v for v, _ in GRID]


def f16_bits_directed(x: float, mode: str) -> int:
    """f32 value → f16 bits rounded toward zero (rz), -inf (rm) or +inf (rp)."""
    if np.isnan(x):
        return -1
    if np.isinf(x):
        return 0x7C00 if x > 0 else 0xFC00
    v = Fraction(float(x))
    i = bisect.bisect_left(KEYS, v)
    if i < len(KEYS) and KEYS[i] == v:
        return GRID[i][1] | (0x8000 if v == 0 and np.signbit(x) else 0)
    below = GRID[i - 1][1] if i > 0 else 0xFC00           # beyond the grid: the infinity
    above = GRID[i][1] if i < len(GRID) else 0x7C00
    if mode == "rm":
        r = below
    elif mode == "rp":
        r = above
    else:
        r = below if v > 0 else above                     # rz: toward zero
    # a result rounded to zero keeps the sign of the exact value (IEEE 754)
    return r | 0x8000 if r & 0x7FFF == 0 and v < 0 else r


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_cvt_f16x2_f32_directed_rounding(hw, mode):
    hi = _f32(59.74361, -3e5, 3e5, 1e-7, -1e-7, 65519.0, -0.0, 1.0 / 3, -2.0 / 3, 6e-8, 0.1)
    lo = _f32(-59.74361, 3e5, 1e-9, -1e-9, 70000.0, 65504.0, 0.0, -1.0 / 3, 2.0 / 3, -6e-8, -0.1)
    got = hw.elementwise(f"cvt.{mode}.f16x2.f32 {{d}}, {{a}}, {{b}};", [hi, lo], np.uint32)
    want = [(f16_bits_directed(h, mode) << 16) | f16_bits_directed(lo_, mode)
            for h, lo_ in zip(hi, lo)]
    assert [hex(int(g)) for g in got] == [hex(w) for w in want]
    if mode == "rz":     # the two numbers, spelled out
        assert int(got[0]) >> 16 == 0x5377 and int(got[1]) >> 16 == 0xFBFF


def test_cvt_f16x2_nan_and_infinities(hw):
    hi, lo = _f32(NAN, INF, -INF), _f32(-INF, NAN, 0.5)
    got = hw.elementwise("cvt.rz.f16x2.f32 {d}, {a}, {b};", [hi, lo], np.uint32)
    h = (got >> 16).astype(np.uint16).view(np.float16)
    lo16 = (got & 0xFFFF).astype(np.uint16).view(np.float16)
    assert np.isnan(h[0]) and h[1] == np.inf and h[2] == -np.inf
    assert lo16[0] == -np.inf and np.isnan(lo16[1]) and lo16[2] == 0.5


def test_cvt_rn_f16x2_still_nearest(hw):
    hi, lo = _f32(59.74361, -3e5, 1.0 / 3), _f32(65519.0, 65520.0, -1e-8)
    got = hw.elementwise("cvt.rn.f16x2.f32 {d}, {a}, {b};", [hi, lo], np.uint32)
    with np.errstate(over="ignore"):
        want_hi = hi.astype(np.float16).view(np.uint16).astype(np.uint32)
        want_lo = lo.astype(np.float16).view(np.uint16).astype(np.uint32)
    assert np.array_equal(got, (want_hi << 16) | want_lo)
    assert int(got[0]) >> 16 == 0x5378 and int(got[1]) & 0xFFFF == 0x7C00


# -- set with half-precision sources ----------------------------------------------------------
def _h2(lo, hi):
    lo = np.resize(np.array(lo, np.float16), 64).view(np.uint16).astype(np.uint32)
    hi = np.resize(np.array(hi, np.float16), 64).view(np.uint16).astype(np.uint32)
    return lo | (hi << 16)


def _halves(cond_lo, cond_hi, one):
    return ((np.where(cond_lo, one, 0) | (np.where(cond_hi, one, 0) << 16))
            .astype(np.uint32))


A_LO, A_HI = [1.0, NAN, -0.0, INF, 2.0, 6e-8], [NAN, 3.0, 0.0, -INF, -2.0, 1.0]
B_LO, B_HI = [2.0, 1.0, 0.0, INF, NAN, 0.0], [1.0, 3.0, -0.0, 0.0, -3.0, NAN]


def _ref(a, b, cmp):
    a = np.resize(np.array(a, np.float64), 64)
    b = np.resize(np.array(b, np.float64), 64)
    with np.errstate(invalid="ignore"):
        return {"lt": a < b, "nan": np.isnan(a) | np.isnan(b), "eq": a == b,
                "geu": (a >= b) | np.isnan(a) | np.isnan(b)}[cmp]


@pytest.mark.parametrize("cmp", ["lt", "nan", "eq", "geu"])
@pytest.mark.parametrize("dtype,one", [("f16x2", 0x3C00), ("u32", 0xFFFF), ("s32", 0xFFFF)])
def test_set_f16x2_writes_per_half(hw, cmp, dtype, one):
    a, b = _h2(A_LO, A_HI), _h2(B_LO, B_HI)
    got = hw.elementwise(f"set.{cmp}.{dtype}.f16x2 {{d}}, {{a}}, {{b}};", [a, b], np.uint32)
    want = _halves(_ref(A_LO, B_LO, cmp), _ref(A_HI, B_HI, cmp), one)
    assert np.array_equal(got, want), [hex(int(x)) for x in got[:6]]


def test_set_f16x2_ftz_flushes_subnormal_halves(hw):
    a, b = _h2([6e-8, 1.0], [-6e-8, 0.0]), _h2([0.0, 0.5], [0.0, 0.0])
    got = hw.elementwise("set.eq.ftz.f16x2.f16x2 {d}, {a}, {b};", [a, b], np.uint32)
    assert [hex(int(x)) for x in got[:2]] == ["0x3c003c00", "0x3c000000"]
    got = hw.elementwise("set.eq.f16x2.f16x2 {d}, {a}, {b};", [a, b], np.uint32)
    assert [hex(int(x)) for x in got[:2]] == ["0x0", "0x3c000000"]


def test_setp_f16x2_predicate_pair(hw):
    a, b = _h2(A_LO, A_HI), _h2(B_LO, B_HI)
    lo = hw.elementwise("setp.lt.f16x2 {d}|%p9, {a}, {b};", [a, b], None, out_pred=True)
    hi = hw.elementwise("setp.lt.f16x2 %p9|{d}, {a}, {b};", [a, b], None, out_pred=True)
    assert np.array_equal(lo, _ref(A_LO, B_LO, "lt").astype(np.uint32))
    assert np.array_equal(hi, _ref(A_HI, B_HI, "lt").astype(np.uint32))


@pytest.mark.parametrize("opcode,dt,one", [
    ("set.lt.f32.f32", np.float32, 1.0), ("set.lt.u32.f32", np.uint32, 0xFFFFFFFF),
    ("set.lt.s32.f32", np.uint32, 0xFFFFFFFF),
])
def test_set_scalar_destinations(hw, opcode, dt, one):
    a, b = _f32(1.0, 2.0, NAN, -0.0), _f32(2.0, 1.0, 1.0, 0.0)
    got = hw.elementwise(f"{opcode} {{d}}, {{a}}, {{b}};", [a, b], dt)
    with np.errstate(invalid="ignore"):
        want = np.where(a < b, dt(one), dt(0))
    assert np.array_equal(got, want)
