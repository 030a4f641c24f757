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
        v = Fraction(m, 1 << 24) if e == 0 else \
            Fraction(1024 + m, 1 << 10) * Fraction(2) ** (e - 15)
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
    if mode == "rz":     # 59.74361 -> 0x5377 and -3e5 -> -65504, spelled out
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


# -- mad.cc / madc: multiply-add carry chains ------------------------------------------------
def _words(rng, bits, n=64):
    edge = [0, 1, (1 << bits) - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1]
    vals = edge + [int(v) for v in rng.integers(0, 1 << 62, n - len(edge), dtype=np.uint64)]
    if bits == 64:
        vals = edge + [(int(v) << 2) ^ int(w) for v, w in
                       zip(rng.integers(0, 1 << 62, n - len(edge), dtype=np.uint64),
                           rng.integers(0, 1 << 62, n - len(edge), dtype=np.uint64))]
    return np.array([v % (1 << bits) for v in vals], np.uint32 if bits == 32 else np.uint64)


def _mad_ref(a, b, c, cin, half, signed, bits):
    """d and the carry out of (a*b).half + c + cin, from Python integers."""
    def val(x):
        x = int(x)
        return x - (1 << bits) if signed and x >> (bits - 1) else x
    prod = val(a) * val(b) % (1 << (2 * bits))
    part = prod >> bits if half == "hi" else prod % (1 << bits)
    total = part + int(c) + cin
    return total % (1 << bits), total >> bits


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("form", ["mad.lo.cc.{t}", "mad.hi.cc.{t}", "madc.lo.{t}",
                                  "madc.hi.cc.{t}", "madc.lo.cc.{t}", "mad.hi.cc.s{b}",
                                  "madc.lo.cc.s{b}"])
@pytest.mark.parametrize("cin", [0, 1])
def test_mad_carry_chain_forms(hw, rng, bits, form, cin):
    t = f"u{bits}"
    opcode = form.format(t=t, b=bits)
    signed = ".s" in opcode
    a, b, c = _words(rng, bits), _words(rng, bits)[::-1].copy(), _words(rng, bits)
    rng.shuffle(c)
    # CF = cin: max + cin carries exactly when cin is 1
    setc = f"add.cc.u{bits} %rd20, {(1 << bits) - 1}, {cin};" if bits == 64 else \
        f"add.cc.u32 %r20, {(1 << bits) - 1}, {cin};"
    tmp = "%rd21" if bits == 64 else "%r21"
    d = hw.elementwise(f"{setc}\n  {opcode} {{d}}, {{a}}, {{b}}, {{c}};", [a, b, c], a.dtype)
    carry = hw.elementwise(f"{setc}\n  {opcode} {tmp}, {{a}}, {{b}}, {{c}};\n"
                           f"  addc.u{bits} {{d}}, 0, 0;", [a, b, c], a.dtype)
    uses_cf = opcode.startswith("madc")
    for i in range(a.size):
        want_d, want_c = _mad_ref(a[i], b[i], c[i], cin if uses_cf else 0,
                                  "hi" if ".hi" in opcode else "lo", signed, bits)
        assert int(d[i]) == want_d, (opcode, i)
        if ".cc" in opcode:
            assert int(carry[i]) == want_c, (opcode, i)
        else:                                  # no .cc: the flag is left as it was
            assert int(carry[i]) == cin, (opcode, i)


def test_mad_carry_chain_multiplies_96_bits(hw, rng):
    # libdevice's Payne-Hanek reduction: a 32-bit word times a 64-bit one, low to high
    a, b0, b1 = (_words(rng, 32) for _ in range(3))
    rng.shuffle(b0)
    chain = ("mul.lo.u32 %r20, {a}, {b};\n  mul.hi.u32 %r21, {a}, {b};\n"
             "  mad.lo.cc.u32 %r22, {a}, {c}, %r21;\n  madc.hi.u32 %r23, {a}, {c}, 0;\n")
    words = [hw.elementwise(chain + f"  mov.b32 {{d}}, %r{20 + k};", [a, b0, b1], np.uint32)
             for k in (0, 2, 3)]
    for i in range(a.size):
        got = int(words[0][i]) | int(words[1][i]) << 32 | int(words[2][i]) << 64
        assert got == int(a[i]) * (int(b0[i]) | int(b1[i]) << 32), i


def test_mad_carry_refuses_other_types(hw):
    from tilelang.emulator.errors import PTXParseError
    with pytest.raises(PTXParseError, match=r"mad.lo.cc.f32: carry chains take .u32, .s32, "
                       r".u64 or .s64"):
        hw.elementwise("mad.lo.cc.f32 {d}, {a}, {a}, {a};", [_f32(1.0)], np.float32)


# -- f16 / bf16 atomics (scalar and packed x2) ------------------------------------------------
FORMATS = {"f16": (10, -14, 15), "bf16": (7, -126, 127)}       # mantissa bits, emin, emax


def _round_ne(v: Fraction, fmt: str) -> float:
    """Exact value → nearest-even value of the format (inf past the largest), from integers."""
    man, emin, emax = FORMATS[fmt]
    if v == 0:
        return 0.0
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - man)
    q = a / quantum
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2):
        n += 1
    r = n * quantum
    if r >= Fraction(2) ** (emax + 1):
        return float("inf") if v > 0 else float("-inf")
    return float(r) if v > 0 else -float(r)


def _to_float(bits: int, fmt: str) -> float:
    if fmt == "f16":
        return float(np.uint16(bits).view(np.float16))
    return float(np.uint32(bits << 16).view(np.float32))


def _to_bits(x: float, fmt: str) -> int:
    if np.isnan(x):
        return -1                                              # any NaN
    if fmt == "f16":
        return int(np.float16(x).view(np.uint16))              # x is exactly representable
    return int(np.float32(x).view(np.uint32)) >> 16


def _half_op(op: str, x: float, y: float, fmt: str) -> float:
    if np.isnan(x) or np.isnan(y):
        if op == "add":
            return float("nan")
        return y if np.isnan(x) else x
    if op == "min" or op == "max":
        if x == y == 0:
            neg = np.signbit(x) or np.signbit(y) if op == "min" else \
                np.signbit(x) and np.signbit(y)
            return -0.0 if neg else 0.0
        return min(x, y) if op == "min" else max(x, y)
    if np.isinf(x) or np.isinf(y):
        return x + y                                           # IEEE: inf - inf is NaN
    s = Fraction(x) + Fraction(y)
    if s == 0:
        return -0.0 if np.signbit(x) and np.signbit(y) else 0.0
    return _round_ne(s, fmt)


def _half_values(rng, fmt, n, infinities=True):
    """Edge values (±0, subnormals, the largest finite, ±inf) among random ones; without
    infinities a sum stays finite long enough to check every rounding step."""
    edge = [0.0, -0.0, 6e-8, -6e-8, 1e-40, -1e-40, 1.5e-5] + \
        ([np.inf, -np.inf, 65504.0, 3.0e38] if infinities else [])
    xs = np.concatenate([edge, rng.standard_normal(n - len(edge)) * 50])
    if fmt == "f16":
        with np.errstate(over="ignore"):
            return xs.astype(np.float16).view(np.uint16)
    return (xs.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


ATOM_HALF = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  ld.param.u64 %rd3, [k_p2];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, {w};
  add.s64 %rd5, %rd2, %rd4;
  ld.global.b{bits} %v1, [%rd5];
  and.b32 %r2, %r1, {mask};
  mul.wide.u32 %rd6, %r2, {w};
  add.s64 %rd7, %rd1, %rd6;
  atom.global.gpu.relaxed.{op}.{ty} %v2, [%rd7], %v1;
  add.s64 %rd8, %rd3, %rd4;
  st.global.b{bits} [%rd8], %v2;
  ret;
"""


@pytest.mark.parametrize("ty", ["noftz.f16", "noftz.bf16", "noftz.f16x2", "noftz.bf16x2"])
@pytest.mark.parametrize("op,cells", [("add", 4), ("add", 1), ("min", 4), ("max", 2)])
def test_half_precision_atomics_serialize_and_round_once(hw, rng, ty, op, cells):
    from emu_support import kernel_ptx
    fmt = ty.split(".")[1].rstrip("x2")
    packed = ty.endswith("x2")
    n = 256
    halves = _half_values(rng, fmt, n * (2 if packed else 1), infinities=op != "add")
    rng.shuffle(halves)
    vals = halves.view(np.uint32) if packed else halves
    init = _half_values(rng, fmt, 16)[-cells * (2 if packed else 1):]
    init = init.view(np.uint32) if packed else init
    bits = 32 if packed else 16
    ptx = kernel_ptx(ATOM_HALF.format(w=bits // 8, bits=bits, mask=cells - 1, op=op, ty=ty),
                     nparams=3, extra_regs=f"  .reg .b{bits} %v<4>;\n")
    d = hw.dev
    cell_p, val_p, old_p = d.to_device(init.copy()), d.to_device(vals), d.malloc(n * bits // 8)
    hw.run(ptx, (1,), (n,), [cell_p, val_p, old_p])
    got_cells = d.from_device(cell_p, (cells,), init.dtype)
    got_olds = d.from_device(old_p, (n,), init.dtype)
    # the reference: threads in order, each half separately, one rounding per step
    lanes_of = (lambda w: [int(w) & 0xFFFF, int(w) >> 16]) if packed else (lambda w: [int(w)])
    cur = {c: [_to_float(h, fmt) for h in lanes_of(init[c])] for c in range(cells)}

    def same(word, want_lanes):
        for h, x in zip(lanes_of(word), want_lanes):
            b = _to_bits(x, fmt)
            if (b == -1) != np.isnan(_to_float(h, fmt)) or (b != -1 and h != b):
                return False
        return True

    for t in range(n):
        c = t & (cells - 1)
        assert same(got_olds[t], cur[c]), (t, hex(int(got_olds[t])), cur[c])
        cur[c] = [_half_op(op, x, _to_float(y, fmt), fmt)
                  for x, y in zip(cur[c], lanes_of(vals[t]))]
    for c in range(cells):
        assert same(got_cells[c], cur[c]), (c, hex(int(got_cells[c])), cur[c])


def test_bf16_atomics_need_sm90(hw):
    from emu_support import kernel_ptx
    from tilelang.emulator.errors import PTXParseError
    ptx = kernel_ptx(ATOM_HALF.format(w=2, bits=16, mask=0, op="add", ty="noftz.bf16"),
                     nparams=3, extra_regs="  .reg .b16 %v<4>;\n").replace("sm_90", "sm_80")
    with pytest.raises(PTXParseError, match="needs sm_90 or newer"):
        hw.dev.load_module(ptx).get_function("k")


# -- mixed-precision add/sub/fma (f32 with a half-precision a, b): LLVM emits them for sm_120
def _halfbits(x, fmt):
    x = np.resize(np.array(x, np.float64), 64)
    if fmt == "f16":
        return x.astype(np.float16).view(np.uint16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("fmt", ["f16", "bf16"])
@pytest.mark.parametrize("op", ["add", "sub"])
def test_mixed_precision_add_sub(hw, fmt, op):
    a = _halfbits([1.5, -0.0, 65504.0, 3.0, -2.0, 0.1], fmt)
    c = _f32(1e-8, -0.0, 1.0, -3.0, np.inf, 1.0 / 3)
    got = hw.elementwise(f"{op}.rn.f32.{fmt} {{d}}, {{a}}, {{b}};", [a, c], np.float32)
    av = np.array([_to_float(int(v), fmt) for v in a])
    want = (av + c.astype(np.float64)) if op == "add" else (av - c.astype(np.float64))
    assert _same(got, want.astype(np.float32))


def test_mixed_precision_fma_rounds_once(hw):
    a = _halfbits([1.0 + 2.0 ** -10, 3.0, -0.5], "f16")
    b = _halfbits([1.0 - 2.0 ** -10, 7.0, 0.25], "f16")
    c = _f32(-1.0, 0.1, 0.125)
    got = hw.elementwise("fma.rn.f32.f16 {d}, {a}, {b}, {c};", [a, b, c], np.float32)
    exact = [Fraction(_to_float(int(x), "f16")) * Fraction(_to_float(int(y), "f16"))
             + Fraction(float(z)) for x, y, z in zip(a[:3], b[:3], c[:3])]
    assert list(got[:3]) == [np.float32(float(v)) for v in exact]
    assert got[0] == np.float32(-(2.0 ** -20))       # the product's low bits survive


# -- bf16 rounding in every mode, from f32 and packed ------------------------------------------
def bf16_bits_exact(x: float, mode: str) -> int:
    """f32 value -> bf16 bits by the mode, from exact fractions over the bf16 grid."""
    if np.isnan(x):
        return -1
    if np.isinf(x):
        return 0x7F80 if x > 0 else 0xFF80
    bits = int(np.float32(x).view(np.uint32))
    lo, rest = bits & 0xFFFF, bits >> 16
    if lo == 0:
        return rest
    neg = bits >> 31
    down = rest                                     # toward zero
    up = rest + 1                                   # away from zero
    if mode == "rz":
        return down
    if mode == "rm":
        return up if neg else down
    if mode == "rp":
        return down if neg else up
    if lo > 0x8000 or (lo == 0x8000 and rest & 1):
        return up
    return down


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_bf16_every_mode(hw, rng, mode):
    x = _f32(1.0 + 2.0 ** -8, -(1.0 + 2.0 ** -8), 1.0 + 3 * 2.0 ** -9, 3.3e38, -3.3e38,
             1e-40, -1e-40, 0.0, -0.0, np.inf, np.nan, 1.0 / 3, -2.0 / 3)
    x[13:] = (rng.standard_normal(51) * 1000).astype(np.float32)
    got = hw.elementwise(f"cvt.{mode}.bf16.f32 {{d}}, {{a}};", [x], np.uint16)
    want = [bf16_bits_exact(float(v), mode) for v in x]
    for g, w, v in zip(got, want, x):
        assert (w == -1 and (int(g) & 0x7F80) == 0x7F80 and int(g) & 0x7F) or int(g) == w, \
            (mode, float(v), hex(int(g)), hex(w))
    # packed: the same per half (hi from a, lo from b)
    got2 = hw.elementwise(f"cvt.{mode}.bf16x2.f32 {{d}}, {{a}}, {{b}};", [x, x[::-1].copy()],
                          np.uint32)
    assert [int(g) >> 16 for g in got2[:9]] == [int(g) for g in got[:9]]


@pytest.mark.parametrize("dtype,one", [("f16", 0x3C00), ("bf16", 0x3F80), ("u16", 0xFFFF)])
def test_set_half_destination_of_scalar_sources(hw, dtype, one):
    a, b = _f32(1.0, 2.0, NAN, -0.0), _f32(2.0, 1.0, 1.0, 0.0)
    got = hw.elementwise(f"set.lt.{dtype}.f32 {{d}}, {{a}}, {{b}};", [a, b], np.uint16)
    with np.errstate(invalid="ignore"):
        want = np.where(a < b, one, 0).astype(np.uint16)
    assert np.array_equal(got, want)
