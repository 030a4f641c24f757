"""Integer, logic and comparison instructions against NumPy."""

import numpy as np
import pytest


def i32(rng, n=256, lo=-2**31, hi=2**31):
    return rng.integers(lo, hi, n, dtype=np.int64).astype(np.int32)


def u32(rng, n=256):
    return rng.integers(0, 2**32, n, dtype=np.int64).astype(np.uint32)


def test_add_sub_mul_lo(hw, rng):
    a, b = i32(rng), i32(rng)
    with np.errstate(over="ignore"):
        assert np.array_equal(hw.elementwise("add.s32 {d}, {a}, {b};", [a, b], np.int32), a + b)
        assert np.array_equal(hw.elementwise("sub.s32 {d}, {a}, {b};", [a, b], np.int32), a - b)
        assert np.array_equal(hw.elementwise("mul.lo.s32 {d}, {a}, {b};", [a, b], np.int32),
                              a * b)


def test_mul_hi_and_wide(hw, rng):
    a, b = i32(rng), i32(rng)
    full = a.astype(np.int64) * b.astype(np.int64)
    assert np.array_equal(hw.elementwise("mul.hi.s32 {d}, {a}, {b};", [a, b], np.int32),
                          (full >> 32).astype(np.int32))
    assert np.array_equal(hw.elementwise("mul.wide.s32 {d}, {a}, {b};", [a, b], np.int64), full)
    ua, ub = u32(rng), u32(rng)
    fu = ua.astype(np.uint64) * ub.astype(np.uint64)
    assert np.array_equal(hw.elementwise("mul.hi.u32 {d}, {a}, {b};", [ua, ub], np.uint32),
                          (fu >> np.uint64(32)).astype(np.uint32))
    assert np.array_equal(hw.elementwise("mul.wide.u32 {d}, {a}, {b};", [ua, ub], np.uint64), fu)


def test_mul_hi_64(hw, rng):
    a = rng.integers(-2**63, 2**63, 256, dtype=np.int64)
    b = rng.integers(-2**63, 2**63, 256, dtype=np.int64)
    exp = np.array([(int(x) * int(y)) >> 64 for x, y in zip(a, b)], dtype=np.int64)
    assert np.array_equal(hw.elementwise("mul.hi.s64 {d}, {a}, {b};", [a, b], np.int64), exp)
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    expu = np.array([(int(x) * int(y)) >> 64 for x, y in zip(ua, ub)], dtype=np.uint64)
    assert np.array_equal(hw.elementwise("mul.hi.u64 {d}, {a}, {b};", [ua, ub], np.uint64),
                          expu)


def test_mad_lo_hi_wide(hw, rng):
    a, b, c = i32(rng), i32(rng), i32(rng)
    with np.errstate(over="ignore"):
        assert np.array_equal(hw.elementwise("mad.lo.s32 {d}, {a}, {b}, {c};", [a, b, c],
                                             np.int32), a * b + c)
    full = a.astype(np.int64) * b.astype(np.int64)
    assert np.array_equal(hw.elementwise("mad.hi.s32 {d}, {a}, {b}, {c};", [a, b, c], np.int32),
                          ((full >> 32) + c).astype(np.int32))
    c64 = rng.integers(-2**62, 2**62, 256, dtype=np.int64)
    assert np.array_equal(hw.elementwise("mad.wide.s32 {d}, {a}, {b}, {c};", [a, b, c64],
                                         np.int64), full + c64)


def test_div_rem_signed_truncates(hw, rng):
    a = i32(rng)
    b = i32(rng, lo=-1000, hi=1000)
    b[b == 0] = 7
    q = np.array([int(x / y) if abs(int(x)) < 2**52 else 0 for x, y in zip(a, b)])
    q = np.trunc(a.astype(np.float64) / b.astype(np.float64)).astype(np.int64)
    assert np.array_equal(hw.elementwise("div.s32 {d}, {a}, {b};", [a, b], np.int32), q)
    assert np.array_equal(hw.elementwise("rem.s32 {d}, {a}, {b};", [a, b], np.int32),
                          a - q * b)
    ua, ub = u32(rng), u32(rng) // 1000 + 1
    assert np.array_equal(hw.elementwise("div.u32 {d}, {a}, {b};", [ua, ub], np.uint32), ua // ub)
    assert np.array_equal(hw.elementwise("rem.u32 {d}, {a}, {b};", [ua, ub], np.uint32), ua % ub)


def test_min_max_neg_abs(hw, rng):
    a, b = i32(rng, lo=-2**31 + 1), i32(rng)
    assert np.array_equal(hw.elementwise("min.s32 {d}, {a}, {b};", [a, b], np.int32),
                          np.minimum(a, b))
    assert np.array_equal(hw.elementwise("max.u32 {d}, {a}, {b};", [a.view(np.uint32),
                                         b.view(np.uint32)], np.uint32),
                          np.maximum(a.view(np.uint32), b.view(np.uint32)))
    assert np.array_equal(hw.elementwise("neg.s32 {d}, {a};", [a], np.int32), -a)
    assert np.array_equal(hw.elementwise("abs.s32 {d}, {a};", [a], np.int32), np.abs(a))


def test_logic_and_shifts(hw, rng):
    a, b = u32(rng), u32(rng)
    s = (b % 40).astype(np.uint32)
    assert np.array_equal(hw.elementwise("and.b32 {d}, {a}, {b};", [a, b], np.uint32), a & b)
    assert np.array_equal(hw.elementwise("or.b32 {d}, {a}, {b};", [a, b], np.uint32), a | b)
    assert np.array_equal(hw.elementwise("xor.b32 {d}, {a}, {b};", [a, b], np.uint32), a ^ b)
    assert np.array_equal(hw.elementwise("not.b32 {d}, {a};", [a], np.uint32), ~a)
    exp_shl = np.where(s >= 32, 0, (a.astype(np.uint64) << np.minimum(s, 31).astype(np.uint64))
                       & 0xFFFFFFFF).astype(np.uint32)
    assert np.array_equal(hw.elementwise("shl.b32 {d}, {a}, {b};", [a, s], np.uint32), exp_shl)
    assert np.array_equal(hw.elementwise("shr.u32 {d}, {a}, {b};", [a, s], np.uint32),
                          np.where(s >= 32, 0, a >> np.minimum(s, 31)).astype(np.uint32))
    sa = a.view(np.int32)
    assert np.array_equal(hw.elementwise("shr.s32 {d}, {a}, {b};", [sa, s], np.int32),
                          sa >> np.minimum(s, 31).astype(np.int32))


@pytest.mark.parametrize("cmp,f", [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                                   ("ge", np.greater_equal), ("eq", np.equal),
                                   ("ne", np.not_equal)])
def test_setp_signed(hw, rng, cmp, f):
    a, b = i32(rng, lo=-5, hi=5), i32(rng, lo=-5, hi=5)
    got = hw.elementwise(f"setp.{cmp}.s32 {{d}}, {{a}}, {{b}};", [a, b], None, out_pred=True)
    assert np.array_equal(got, f(a, b).astype(np.uint32))


def test_setp_unsigned_and_bool_combine(hw, rng):
    a, b = u32(rng), u32(rng)
    got = hw.elementwise("setp.lo.u32 {d}, {a}, {b};", [a, b], None, out_pred=True)
    assert np.array_equal(got, (a < b).astype(np.uint32))
    c = (u32(rng) & 1).astype(np.uint32)
    op = ("setp.ne.u32 %p9, {c}, 0;\n  setp.hs.and.u32 {d}, {a}, {b}, %p9;")
    got = hw.elementwise(op, [a, b, c], None, out_pred=True)
    assert np.array_equal(got, ((a >= b) & (c != 0)).astype(np.uint32))


def test_selp_slct(hw, rng):
    a, b, c = i32(rng), i32(rng), i32(rng)
    op = "setp.gt.s32 %p9, {c}, 0;\n  selp.b32 {d}, {a}, {b}, %p9;"
    assert np.array_equal(hw.elementwise(op, [a, b, c], np.int32), np.where(c > 0, a, b))
    assert np.array_equal(hw.elementwise("slct.b32.s32 {d}, {a}, {b}, {c};", [a, b, c], np.int32),
                          np.where(c >= 0, a, b))


def test_bit_ops(hw, rng):
    a = u32(rng)
    a[:4] = [0, 1, 0x80000000, 0xFFFFFFFF]
    pop = np.array([bin(int(x)).count("1") for x in a], np.uint32)
    clz = np.array([32 - int(x).bit_length() for x in a], np.uint32)
    brev = np.array([int(f"{int(x):032b}"[::-1], 2) for x in a], np.uint32)
    assert np.array_equal(hw.elementwise("popc.b32 {d}, {a};", [a], np.uint32), pop)
    assert np.array_equal(hw.elementwise("clz.b32 {d}, {a};", [a], np.uint32), clz)
    assert np.array_equal(hw.elementwise("brev.b32 {d}, {a};", [a], np.uint32), brev)
    a64 = rng.integers(0, 2**63, 256, dtype=np.int64).view(np.uint64) >> (
        rng.integers(0, 63, 256).astype(np.uint64))
    clz64 = np.array([64 - int(x).bit_length() for x in a64], np.uint32)
    assert np.array_equal(hw.elementwise("clz.b64 {d}, {a};", [a64], np.uint32), clz64)


def _bfe_ref(x, pos, ln, signed):
    pos, ln = pos & 0xFF, ln & 0xFF
    bits = [(int(x) >> i) & 1 for i in range(32)]
    sbit = 0
    if signed and ln:
        sbit = bits[min(pos + ln - 1, 31)]
    out = 0
    for i in range(32):
        if i < ln and pos + i <= 31:
            b = bits[pos + i]
        else:
            b = sbit if signed else 0
        out |= b << i
    return out


def test_bfe_bfi(hw, rng):
    a = u32(rng)
    pos = rng.integers(0, 40, 256).astype(np.uint32)
    ln = rng.integers(0, 40, 256).astype(np.uint32)
    exp_u = np.array([_bfe_ref(x, p, l, False) for x, p, l in zip(a, pos, ln)], np.uint32)
    exp_s = np.array([_bfe_ref(x, p, l, True) for x, p, l in zip(a, pos, ln)], np.uint32)
    assert np.array_equal(hw.elementwise("bfe.u32 {d}, {a}, {b}, {c};", [a, pos, ln], np.uint32),
                          exp_u)
    assert np.array_equal(hw.elementwise("bfe.s32 {d}, {a}, {b}, {c};",
                                         [a.view(np.int32), pos, ln], np.uint32), exp_s)
    b = u32(rng)
    pos2 = rng.integers(0, 32, 256).astype(np.uint32)
    ln2 = rng.integers(0, 33, 256).astype(np.uint32)
    exp = []
    for x, y, p, l in zip(a, b, pos2, ln2):
        m = ((1 << min(int(l), 32 - int(p))) - 1) << int(p)
        exp.append((int(y) & ~m | (int(x) << int(p)) & m) & 0xFFFFFFFF)
    op = "mov.u32 %r20, {c};\n  shr.u32 %r21, %r20, 8;\n  and.b32 %r20, %r20, 255;\n" \
         "  bfi.b32 {d}, {a}, {b}, %r20, %r21;"
    got = hw.elementwise(op, [a, b, pos2 | (ln2 << 8)], np.uint32)
    assert np.array_equal(got, np.array(exp, np.uint32))


def _prmt_ref(a, b, s):
    bs = [(int(a) >> (8 * i)) & 0xFF for i in range(4)] + [(int(b) >> (8 * i)) & 0xFF
                                                          for i in range(4)]
    out = 0
    for k in range(4):
        sel = (int(s) >> (4 * k)) & 0xF
        v = bs[sel & 7]
        if sel & 8:
            v = 0xFF if v & 0x80 else 0
        out |= v << (8 * k)
    return out


def test_prmt(hw, rng):
    a, b, s = u32(rng), u32(rng), u32(rng) & 0xFFFF
    exp = np.array([_prmt_ref(x, y, z) for x, y, z in zip(a, b, s)], np.uint32)
    assert np.array_equal(hw.elementwise("prmt.b32 {d}, {a}, {b}, {c};", [a, b, s], np.uint32),
                          exp)


def test_mov_pack_unpack_and_immediates(hw, rng):
    a, b = u32(rng), u32(rng)
    op = "mov.b64 %rd20, {{{a}, {b}}};\n  mov.b64 {{%r20, %r21}}, %rd20;\n" \
         "  xor.b32 %r22, %r21, 0x0F0F0F0F;\n  add.s32 {d}, %r22, -3;"
    got = hw.elementwise(op.replace("{{", "{{").replace("}}", "}}"), [a, b], np.uint32)
    assert np.array_equal(got, ((b ^ 0x0F0F0F0F).astype(np.int64) - 3).astype(np.uint32))


def test_carry_chain_128_bit_add_and_sub(hw, rng):
    # (hi:lo) 128-bit arithmetic as LLVM emits it for i128: add.cc + addc, sub.cc + subc
    a = rng.integers(0, 2**64, (256, 2), dtype=np.uint64)
    b = rng.integers(0, 2**64, (256, 2), dtype=np.uint64)
    a[:8, 0] = np.uint64(2**64 - 1)          # force carries out of the low word
    ins = [a[:, 0].copy(), a[:, 1].copy(), b[:, 0].copy(), b[:, 1].copy()]
    A = [int(x) | int(y) << 64 for x, y in zip(ins[0], ins[1])]
    B = [int(x) | int(y) << 64 for x, y in zip(ins[2], ins[3])]
    words = lambda vals, k: np.array([(v >> (64 * k)) & (2**64 - 1) for v in vals], np.uint64)
    for opname, f in (("add", lambda x, y: (x + y) % 2**128),
                      ("sub", lambda x, y: (x - y) % 2**128)):
        exp = [f(x, y) for x, y in zip(A, B)]
        lo = hw.elementwise(f"{opname}.cc.u64 {{d}}, {{a}}, {{c}};\n"
                            f"  {opname}c.u64 %rd20, {{b}}, %x3;", ins, np.uint64)
        hi = hw.elementwise(f"{opname}.cc.u64 %rd20, {{a}}, {{c}};\n"
                            f"  {opname}c.u64 {{d}}, {{b}}, %x3;", ins, np.uint64)
        assert np.array_equal(lo, words(exp, 0)) and np.array_equal(hi, words(exp, 1)), opname


@pytest.mark.parametrize("numpy_has_it", [True, False])
def test_popcount_with_and_without_numpys_bitwise_count(monkeypatch, numpy_has_it):
    """`popc` counts with `np.bitwise_count` (NumPy 2) or, on NumPy 1.24-1.26, a SWAR sum."""
    from tilelang.emulator.ops_alu import _popcount
    if not numpy_has_it:
        monkeypatch.delattr(np, "bitwise_count", raising=False)
    rng = np.random.default_rng(4)
    for dt in (np.uint16, np.uint32, np.uint64):
        u = rng.integers(0, np.iinfo(dt).max, 500, dtype=dt, endpoint=True)
        u[:3] = [0, np.iinfo(dt).max, 1]
        got = _popcount(u)
        assert got.dtype == np.uint32
        assert got.tolist() == [bin(int(x)).count("1") for x in u]
