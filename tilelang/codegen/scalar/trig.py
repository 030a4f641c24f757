"""sin and cos for f32 and f64 registers: argument reduction modulo pi/2, then series on
[-pi/4, pi/4].

Reduction: |x| <= 105615 (f32) or 2^19 pi/2 (f64) uses Cody–Waite (pi/2 in three parts); larger
arguments branch to a Payne–Hanek reduction with integer arithmetic: the bits of 2/pi that
matter for |x|'s exponent are cut out of a table (`.const`, 176 bytes) with funnel shifts and
multiplied by the integer mantissa in 128-bit integers, which gives the quadrant and the
fraction exactly enough for every finite input (the closest a double comes to a multiple of
pi/2 is about 2^-61). The slow path is a branch, so `sin`/`cos` add basic blocks.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.scalar import consts as K
from tilelang.codegen.scalar.ir import F32, F64, I32, I64, IRKit

I128 = ir.IntType(128)
_PAD = 2
_WORDS = K.two_over_pi_words(pad_words=_PAD)
_F32_PIO2 = K.split(K.PI / 2, 3, None, True)
_F64_PIO2 = K.pio2_parts(33, 3, False)
_F32_LIMIT = 105615.0
_F64_LIMIT = 2.0 ** 19 * 1.5707963267948966
_SIN = {False: K.sin_series(5)[1:], True: K.sin_series(9)[1:]}
_COS = {False: K.cos_series(6)[2:], True: K.cos_series(9)[2:]}


def _table(k: IRKit) -> ir.GlobalVariable:
    name = "__tile_two_over_pi"
    g = k.module.globals.get(name)
    if g is None:
        ty = ir.ArrayType(I32, len(_WORDS))
        g = ir.GlobalVariable(k.module, ty, name, addrspace=4)
        g.global_constant = True
        g.linkage = "internal"
        g.align = 4
        g.initializer = ir.Constant(ty, [w - (1 << 32) if w >= 1 << 31 else w
                                         for w in _WORDS])
    return g


def reduce_pio2(k: IRKit, a):
    """For a = |x| (not NaN/inf: those give garbage the caller replaces): (q, r_hi, r_lo) with
    a = q * pi/2 + r_hi + r_lo, |r| <= ~pi/4, q an i32 (only q mod 4 matters)."""
    b = k.builder
    t = a.type
    is64 = t == F64
    fn = b.function
    big = b.fcmp_unordered(">", a, k.c(t, _F64_LIMIT if is64 else _F32_LIMIT))
    # Cody–Waite
    j = k.intrinsic("llvm.rint", [b.fmul(a, k.c(t, float(2 / K.PI)))])
    nj = b.fneg(j)
    if is64:
        p1, p2, p3 = _F64_PIO2
        tt = k.fma(nj, k.c(t, p1), a)               # exact: j*p1 has <= 53 bits
        w = b.fmul(j, k.c(t, p2))                   # exact
        r2 = b.fsub(tt, w)
        r2lo = b.fsub(b.fsub(tt, r2), w)
        w3 = b.fmul(j, k.c(t, p3))
        corr = b.fsub(r2lo, w3)
        r_hi = b.fadd(r2, corr)
        r_lo = b.fadd(b.fsub(r2, r_hi), corr)
    else:
        p1, p2, p3 = _F32_PIO2
        r = k.fma(nj, k.c(t, p1), a)
        r = k.fma(nj, k.c(t, p2), r)
        r_hi = k.fma(nj, k.c(t, p3), r)
        r_lo = k.c(t, 0.0)
    q = b.fptosi(b.select(big, k.c(t, 0.0), j), I32)
    entry = b.block
    slow = fn.append_basic_block("trig.slow")
    merge = fn.append_basic_block("trig.merge")
    b.cbranch(big, slow, merge)
    b.position_at_end(slow)
    q2, h2, l2 = _payne_hanek(k, a, is64)
    slow_end = b.block
    b.branch(merge)
    b.position_at_end(merge)
    outs = []
    for fast_v, slow_v in ((q, q2), (r_hi, h2), (r_lo, l2)):
        phi = b.phi(fast_v.type)
        phi.add_incoming(fast_v, entry)
        phi.add_incoming(slow_v, slow_end)
        outs.append(phi)
    return tuple(outs)


def _payne_hanek(k: IRKit, a, is64: bool):
    b = k.builder
    t = a.type
    it = I64 if is64 else I32
    mant, bias = (52, 1023) if is64 else (23, 127)
    bits = b.bitcast(a, it)
    e = b.sub(b.lshr(bits, ir.Constant(it, mant)), ir.Constant(it, bias))
    e = b.trunc(e, I32) if is64 else e
    e = b.select(b.icmp_signed(">", e, ir.Constant(I32, bias)), ir.Constant(I32, bias), e)
    m = b.or_(b.and_(bits, ir.Constant(it, (1 << mant) - 1)), ir.Constant(it, 1 << mant))
    # product bits of weight >= 4 vanish mod 4: the window starts at bit j0 = e - mant - 1 of
    # 2/pi (bit j has weight 2^-j), at index j0 - 1 + 32*_PAD in the padded table
    start = b.add(e, ir.Constant(I32, -mant - 2 + 32 * _PAD))
    word = b.lshr(start, ir.Constant(I32, 5))
    sh = b.and_(start, ir.Constant(I32, 31))
    nwords = 6 if is64 else 4
    tab = _table(k)
    raw = []
    for i in range(nwords + 1):
        idx = b.add(word, ir.Constant(I32, i))
        ptr = b.gep(tab, [ir.Constant(I32, 0), idx], inbounds=True)
        raw.append(b.load(ptr, typ=I32))
    fshl = k.declare("llvm.fshl.i32", I32, [I32, I32, I32])
    win = [b.call(fshl, [raw[i], raw[i + 1], sh]) for i in range(nwords)]   # big-endian

    def join(ws):
        acc = ir.Constant(I128, 0)
        for w in ws:
            acc = b.or_(b.shl(acc, ir.Constant(I128, 32)), b.zext(w, I128))
        return acc

    m128 = b.zext(m, I128)
    if not is64:
        prod = b.mul(m128, join(win))                  # (m * window) mod 2^128
        top = b.trunc(b.lshr(prod, ir.Constant(I128, 126)), I32)
        frac = b.shl(prod, ir.Constant(I128, 2))       # fraction, 128 bits
    else:
        g_lo = join(win[2:])                            # low 128 bits of the window
        g_hi = b.zext(join(win[:2]), I128)
        p0 = b.mul(m128, g_lo)                          # low 128 bits of m * g_lo
        hi_part = _mulhi_128(k, m, g_lo)                # bits 128.. of m * g_lo (64 bits)
        top64 = b.add(b.trunc(b.mul(m128, g_hi), I64), hi_part)
        top = b.trunc(b.lshr(top64, ir.Constant(I64, 62)), I32)
        frac = b.or_(b.shl(b.zext(top64, I128), ir.Constant(I128, 66)),
                     b.lshr(p0, ir.Constant(I128, 62)))
    # round to the nearest quadrant: a fraction >= 1/2 counts as the next quadrant, negative
    neg = b.icmp_signed("<", frac, ir.Constant(I128, 0))
    q = b.add(top, b.zext(neg, I32))
    mag = b.select(neg, b.neg(frac), frac)
    hi, lo = _fixed_to_float(k, mag, t)
    sign = b.select(neg, k.c(t, -1.0), k.c(t, 1.0))
    hi, lo = b.fmul(hi, sign), b.fmul(lo, sign)
    # times pi/2 (double-float / double-double product)
    c1, c2 = K.split(K.PI / 2, 2, None, not is64)
    r_hi = b.fmul(hi, k.c(t, c1))
    err = k.fma(hi, k.c(t, c1), b.fneg(r_hi))
    r_lo = b.fadd(err, k.fma(hi, k.c(t, c2), b.fmul(lo, k.c(t, c1))))
    s = b.fadd(r_hi, r_lo)
    r_lo = b.fsub(r_lo, b.fsub(s, r_hi))
    return q, s, r_lo


def _mulhi_128(k: IRKit, m, g):
    """floor(m * g / 2^128) mod 2^64 for a 53-bit m and a 128-bit g."""
    b = k.builder
    g0 = b.trunc(g, I64)
    g1 = b.trunc(b.lshr(g, ir.Constant(I128, 64)), I64)
    m128 = b.zext(m, I128)
    lo = b.lshr(b.mul(m128, b.zext(g0, I128)), ir.Constant(I128, 64))   # < 2^53
    mid = b.add(b.mul(m128, b.zext(g1, I128)), lo)
    return b.trunc(b.lshr(mid, ir.Constant(I128, 64)), I64)


def _fixed_to_float(k: IRKit, mag, t):
    """A non-negative 128-bit fixed-point fraction (value mag / 2^128) as hi + lo floats."""
    b = k.builder
    lz = b.trunc(k.intrinsic("llvm.ctlz", [mag, ir.Constant(ir.IntType(1), 0)]), I32)
    lz = b.select(b.icmp_unsigned(">=", lz, ir.Constant(I32, 120)), ir.Constant(I32, 120), lz)
    n = b.shl(mag, b.zext(lz, I128))
    top = b.trunc(b.lshr(n, ir.Constant(I128, 64)), I64)
    nxt = b.trunc(n, I64)
    if t == F64:
        hi = b.uitofp(b.lshr(top, ir.Constant(I64, 11)), F64)          # exact, 53 bits
        low_bits = b.or_(b.shl(b.and_(top, ir.Constant(I64, 0x7FF)), ir.Constant(I64, 42)),
                         b.lshr(nxt, ir.Constant(I64, 22)))
        lo = b.uitofp(low_bits, F64)                                     # exact, 53 bits
        hi = k.ldexp(hi, b.sub(ir.Constant(I32, 75 - 128), lz), F64)
        lo = k.ldexp(lo, b.sub(ir.Constant(I32, 22 - 128), lz), F64)
        return hi, lo
    hi = b.uitofp(b.lshr(top, ir.Constant(I64, 40)), F32)              # exact, 24 bits
    lo = b.uitofp(b.and_(b.lshr(top, ir.Constant(I64, 16)), ir.Constant(I64, 0xFFFFFF)), F32)
    hi = k.ldexp(hi, b.sub(ir.Constant(I32, 104 - 128), lz), F32)
    lo = k.ldexp(lo, b.sub(ir.Constant(I32, 80 - 128), lz), F32)
    return hi, lo


def _sin_kernel(k: IRKit, r, rlo, is64: bool):
    b = k.builder
    t = r.type
    z = b.fmul(r, r)
    poly = k.poly(z, _SIN[is64])                     # -1/6 + z/120 - ...
    # r + r^3 P(z) + rlo (1 - z/2)
    corr = b.fmul(rlo, k.fma(z, k.c(t, -0.5), k.c(t, 1.0)))
    return b.fadd(r, k.fma(b.fmul(r, z), poly, corr))


def _cos_kernel(k: IRKit, r, rlo, is64: bool):
    b = k.builder
    t = r.type
    z = b.fmul(r, r)
    hz = b.fmul(z, k.c(t, 0.5))
    w = b.fsub(k.c(t, 1.0), hz)
    tail = b.fsub(b.fmul(b.fmul(z, z), k.poly(z, _COS[is64])), b.fmul(r, rlo))
    return b.fadd(w, b.fadd(b.fsub(b.fsub(k.c(t, 1.0), w), hz), tail))


def sincos(k: IRKit, x, want: str):
    """sin(x) or cos(x) (`want`), NaN for NaN and ±inf."""
    b = k.builder
    t = x.type
    is64 = t == F64
    if getattr(k, "fast_math", False) and not is64:
        name = "llvm.nvvm.sin.approx.f" if want == "sin" else "llvm.nvvm.cos.approx.f"
        return b.call(k.declare(name, F32, [F32]), [x])
    a = k.fabs(x)
    q, r, rlo = reduce_pio2(k, a)
    s = _sin_kernel(k, r, rlo, is64)
    c = _cos_kernel(k, r, rlo, is64)
    if want == "cos":
        q = b.add(q, ir.Constant(I32, 1))           # cos(a) = sin(a + pi/2)
    q = b.and_(q, ir.Constant(I32, 3))
    odd = b.trunc(q, ir.IntType(1))
    neg = b.icmp_unsigned(">=", q, ir.Constant(I32, 2))
    v = b.select(odd, c, s)
    v = b.select(neg, b.fneg(v), v)
    if want == "sin":                                 # sin is odd
        v = b.select(b.fcmp_ordered("<", x, k.c(t, 0.0)), b.fneg(v), v)
        v = b.select(b.fcmp_ordered("==", x, k.c(t, 0.0)), x, v)   # keeps -0
    bad = b.or_(k.isnan(x), b.fcmp_ordered("==", a, k.c(t, float("inf"))))
    return b.select(bad, k.c(t, float("nan")), v)


def sin(k: IRKit, x):
    return sincos(k, x, "sin")


def cos(k: IRKit, x):
    return sincos(k, x, "cos")
