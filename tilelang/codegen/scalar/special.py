"""tanh, erf, atan2, pow and the float remainder family (`%`, floor division) on f32/f64
registers, with NumPy's special cases. See docs/numerics.md for the accuracy of each."""

from __future__ import annotations

import math

import llvmlite.ir as ir

from tilelang.codegen.scalar import consts as K
from tilelang.codegen.scalar.ir import F32, F64, I1, I32, I64, IRKit

# ---------------------------------------------------------------------------------------------
# tanh


def tanh(k: IRKit, x, exp):
    """|x| < 0.55: the odd Taylor series; otherwise 1 - 2 / (exp(2|x|) + 1) (no cancellation
    there: the result is at least 0.5). exp overflowing to inf gives exactly ±1."""
    b = k.builder
    t = x.type
    is64 = t == F64
    if getattr(k, "fast_math", False) and not is64:
        return b.call(k.declare("llvm.nvvm.tanh.approx.f32", F32, [F32]), [x])
    a = k.fabs(x)
    z = b.fmul(x, x)
    small = b.fmul(x, k.poly(z, K.tanh_series(18 if is64 else 9)))
    e = exp(k, b.fadd(a, a))
    big = b.fsub(k.c(t, 1.0), b.fdiv(k.c(t, 2.0), b.fadd(e, k.c(t, 1.0))))
    big = k.copysign(big, x)
    return b.select(b.fcmp_ordered("<", a, k.c(t, 0.55)), small, big)


# ---------------------------------------------------------------------------------------------
# erf: Taylor series below 0.9, Chebyshev fits of erfc on a few intervals above, 1 beyond the
# point where erf rounds to 1.

def _pairwise_sum(v: list[float]) -> float:
    """A sum in NumPy's order for up to 128 terms (eight running sums, combined pairwise, then
    the leftovers), so that the fits below keep the exact coefficients they had with NumPy."""
    if len(v) < 8:
        return sum(v, 0.0)
    assert len(v) <= 128
    r = v[:8]
    end = len(v) - len(v) % 8
    for i in range(8, end, 8):
        r = [a + b for a, b in zip(r, v[i:i + 8])]
    s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for x in v[end:]:
        s += x
    return s


def _erfc_fit(a: float, b: float, deg: int) -> list[float]:
    """Chebyshev coefficients of erfc on [a, b] from its values at the deg + 1 nodes."""
    n = deg + 1
    th = [math.pi * (i + 0.5) / n for i in range(n)]
    f = [math.erfc((a + b) / 2 + (b - a) / 2 * math.cos(t)) for t in th]
    c = [2.0 / n * _pairwise_sum([y * math.cos(j * t) for y, t in zip(f, th)])
         for j in range(n)]
    c[0] /= 2
    return c


_ERF_PIECES = {
    False: ([(0.9, 2.2, _erfc_fit(0.9, 2.2, 11)), (2.2, 3.92, _erfc_fit(2.2, 3.92, 11))], 3.92),
    True: ([(0.9, 2.0, _erfc_fit(0.9, 2.0, 19)), (2.0, 3.5, _erfc_fit(2.0, 3.5, 19)),
            (3.5, 5.95, _erfc_fit(3.5, 5.95, 19))], 5.95),
}


def erf(k: IRKit, x):
    b = k.builder
    t = x.type
    is64 = t == F64
    a = k.fabs(x)
    z = b.fmul(x, x)
    small = b.fmul(x, k.poly(z, K.erf_series(18 if is64 else 11)))
    pieces, sat = _ERF_PIECES[is64]
    # pick the interval's coefficients with selects, then one Clenshaw recurrence
    deg = len(pieces[0][2]) - 1
    conds = [b.fcmp_ordered("<", a, k.c(t, hi)) for _, hi, _ in pieces[:-1]]

    def pick(vals):
        v = k.c(t, vals[-1])
        for cond, val in reversed(list(zip(conds, vals[:-1]))):
            v = b.select(cond, k.c(t, val), v)
        return v
    lo_v = pick([p[0] for p in pieces])
    hi_v = pick([p[1] for p in pieces])
    # t = (2a - (lo + hi)) / (hi - lo)
    u = b.fdiv(b.fsub(b.fadd(a, a), b.fadd(lo_v, hi_v)), b.fsub(hi_v, lo_v))
    u2 = b.fadd(u, u)
    b1 = k.c(t, 0.0)
    b2 = k.c(t, 0.0)
    for j in range(deg, 0, -1):
        cj = pick([p[2][j] for p in pieces])
        b1, b2 = b.fadd(b.fsub(b.fmul(u2, b1), b2), cj), b1
    c0 = pick([p[2][0] for p in pieces])
    erfc = b.fadd(b.fsub(b.fmul(u, b1), b2), c0)
    mid = k.copysign(b.fsub(k.c(t, 1.0), erfc), x)
    one = k.copysign(k.c(t, 1.0), x)
    r = b.select(b.fcmp_ordered(">=", a, k.c(t, sat)), one, mid)
    r = b.select(b.fcmp_ordered("<", a, k.c(t, 0.9)), small, r)
    return b.select(k.isnan(x), x, r)


# ---------------------------------------------------------------------------------------------
# atan2

_ATAN_TERMS = {False: K.atan_series(11), True: K.atan_series(23)}


def _atan01(k: IRKit, a, is64: bool):
    """atan(a) for a in [0, 1]: above tan(pi/8), atan(a) = pi/4 + atan((a-1)/(a+1))."""
    b = k.builder
    t = a.type
    red = b.fcmp_ordered(">", a, k.c(t, 0.41421356237309503))
    v = b.select(red, b.fdiv(b.fsub(a, k.c(t, 1.0)), b.fadd(a, k.c(t, 1.0))), a)
    s = b.fmul(v, k.poly(b.fmul(v, v), _ATAN_TERMS[is64]))
    q1, q2 = K.split(K.PI / 4, 2, None, not is64)
    return b.select(red, b.fadd(k.c(t, q1), b.fadd(s, k.c(t, q2))), s)


def atan2(k: IRKit, y, x):
    b = k.builder
    t = x.type
    is64 = t == F64
    ax, ay = k.fabs(x), k.fabs(y)
    swap = b.fcmp_ordered(">", ay, ax)
    num = b.select(swap, ax, ay)
    den = b.select(swap, ay, ax)
    ratio = b.fdiv(num, den)
    both_inf = b.and_(b.fcmp_ordered("==", ax, k.c(t, math.inf)),
                      b.fcmp_ordered("==", ay, k.c(t, math.inf)))
    ratio = b.select(both_inf, k.c(t, 1.0), ratio)
    ratio = b.select(b.fcmp_ordered("==", num, k.c(t, 0.0)), k.c(t, 0.0), ratio)
    th = _atan01(k, ratio, is64)
    h1, h2 = K.split(K.PI / 2, 2, None, not is64)
    p1, p2 = K.split(K.PI, 2, None, not is64)
    th = b.select(swap, b.fadd(k.c(t, h1), b.fsub(k.c(t, h2), th)), th)
    xneg = b.icmp_signed("<", b.bitcast(x, I64 if is64 else I32),
                         ir.Constant(I64 if is64 else I32, 0))       # -0 counts as negative
    th = b.select(xneg, b.fadd(k.c(t, p1), b.fsub(k.c(t, p2), th)), th)
    r = k.copysign(th, y)
    return b.select(b.or_(k.isnan(x), k.isnan(y)), b.fadd(x, y), r)


# ---------------------------------------------------------------------------------------------
# pow

def _is_int(k: IRKit, y):
    b = k.builder
    return b.fcmp_ordered("==", k.intrinsic("llvm.floor", [y]), y)


def _is_odd_int(k: IRKit, y):
    b = k.builder
    h = b.fmul(y, k.c(y.type, 0.5))
    return b.and_(_is_int(k, y), b.fcmp_ordered("!=", k.intrinsic("llvm.floor", [h]), h))


def pow_(k: IRKit, x, y, log2_dd, exp2_dd):
    """x ** y with C99/NumPy special cases. f32 is computed in f64 (|y log2 x| < 2^8 keeps
    the error far below an f32 ulp); f64 uses a double-double log2 (`log2_dd`)."""
    b = k.builder
    t = x.type
    is64 = t == F64
    ax = k.fabs(x)
    if is64:
        lh, ll = log2_dd(k, ax)
        ph = b.fmul(y, lh)
        pl = b.fadd(k.fma(y, lh, b.fneg(ph)), b.fmul(y, ll))
        mag = exp2_dd(k, ph, pl)
    else:
        y64 = b.fpext(y, F64)
        lh, ll = log2_dd(k, b.fpext(ax, F64))
        mag = b.fptrunc(exp2_dd(k, b.fmul(y64, lh), b.fmul(y64, ll)), F32)
    one = k.c(t, 1.0)
    neg_x = b.fcmp_ordered("<", x, k.c(t, 0.0))
    finite_x = b.fcmp_ordered("<", ax, k.c(t, math.inf))
    yint = _is_int(k, y)
    r = b.select(b.and_(b.or_(neg_x, _sign_bit(k, x)), _is_odd_int(k, y)), b.fneg(mag), mag)
    bad = b.and_(b.and_(neg_x, finite_x),
                 b.and_(b.xor(yint, ir.Constant(I1, 1)),
                        b.fcmp_ordered("<", k.fabs(y), k.c(t, math.inf))))
    r = b.select(bad, k.c(t, math.nan), r)
    # |x| == 1 with y = ±inf, and y == 0, x == 1: exactly 1 (NaN operands included)
    r = b.select(b.and_(b.fcmp_ordered("==", ax, one),
                        b.fcmp_ordered("==", k.fabs(y), k.c(t, math.inf))), one, r)
    r = b.select(b.fcmp_ordered("==", y, k.c(t, 0.0)), one, r)
    return b.select(b.fcmp_ordered("==", x, one), one, r)


def _sign_bit(k: IRKit, x):
    b = k.builder
    it = ir.IntType(64 if x.type == F64 else 32)
    return b.icmp_signed("<", b.bitcast(x, it), ir.Constant(it, 0))


# ---------------------------------------------------------------------------------------------
# fmod (exact), Python-style remainder and floor division on floats

def fmod(k: IRKit, x, y):
    """C fmod: exact remainder with the sign of x (an integer long-division loop over the
    exponent difference: at most 277 steps for f32, 2098 for f64)."""
    b = k.builder
    t = x.type
    is64 = t == F64
    it = I64 if is64 else I32
    mant = 52 if is64 else 23
    fn = b.function
    ux = b.bitcast(x, it)
    sx = b.and_(ux, ir.Constant(it, -(1 << (it.width - 1))))
    ax = b.and_(ux, ir.Constant(it, (1 << (it.width - 1)) - 1))
    ay = b.and_(b.bitcast(y, it), ir.Constant(it, (1 << (it.width - 1)) - 1))
    inf_bits = ir.Constant(it, ((1 << (it.width - 1 - mant)) - 1) << mant)
    special = b.or_(b.or_(b.icmp_unsigned(">=", ax, inf_bits), b.icmp_unsigned(">", ay, inf_bits)),
                    b.icmp_unsigned("==", ay, ir.Constant(it, 0)))
    small = b.icmp_unsigned("<", ax, ay)

    def split(v):
        e = b.trunc(b.lshr(v, ir.Constant(it, mant)), I32) if is64 else b.lshr(v, ir.Constant(it, mant))
        frac = b.and_(v, ir.Constant(it, (1 << mant) - 1))
        # subnormal: normalize with the leading-zero count
        lz = b.trunc(k.intrinsic("llvm.ctlz", [frac, ir.Constant(I1, 0)]), I32) if is64 else \
            k.intrinsic("llvm.ctlz", [frac, ir.Constant(I1, 0)])
        sub_shift = b.sub(lz, ir.Constant(I32, it.width - 1 - mant))
        is_sub = b.icmp_unsigned("==", e, ir.Constant(I32, 0))
        sub_m = b.shl(frac, b.zext(sub_shift, it) if is64 else sub_shift)
        sub_e = b.sub(ir.Constant(I32, 1), sub_shift)
        m = b.select(is_sub, sub_m, b.or_(frac, ir.Constant(it, 1 << mant)))
        return b.select(is_sub, sub_e, e), m
    ex, mx = split(ax)
    ey, my = split(ay)
    pre = b.block
    loop = fn.append_basic_block("fmod.loop")
    done = fn.append_basic_block("fmod.done")
    go = b.and_(b.xor(b.or_(special, small), ir.Constant(I1, 1)),
                b.icmp_signed(">", ex, ey))
    b.cbranch(go, loop, done)
    b.position_at_end(loop)
    pe = b.phi(I32)
    pm = b.phi(it)
    pe.add_incoming(ex, pre)
    pm.add_incoming(mx, pre)
    d = b.sub(pm, my)
    m1 = b.select(b.icmp_signed(">=", d, ir.Constant(it, 0)), d, pm)
    m2 = b.shl(m1, ir.Constant(it, 1))
    e2 = b.sub(pe, ir.Constant(I32, 1))
    pe.add_incoming(e2, loop)
    pm.add_incoming(m2, loop)
    b.cbranch(b.icmp_signed(">", e2, ey), loop, done)
    b.position_at_end(done)
    fe = b.phi(I32)
    fm = b.phi(it)
    fe.add_incoming(ex, pre)
    fm.add_incoming(mx, pre)
    fe.add_incoming(e2, loop)
    fm.add_incoming(m2, loop)
    d = b.sub(fm, my)
    m = b.select(b.icmp_signed(">=", d, ir.Constant(it, 0)), d, fm)
    zero = b.icmp_unsigned("==", m, ir.Constant(it, 0))
    # normalize: shift the leading one up to bit `mant`
    lz = k.intrinsic("llvm.ctlz", [m, ir.Constant(I1, 0)])
    lz = b.trunc(lz, I32) if is64 else lz
    sh = b.sub(lz, ir.Constant(I32, it.width - 1 - mant))
    sh = b.select(zero, ir.Constant(I32, 0), sh)
    m = b.shl(m, b.zext(sh, it) if is64 else sh)
    e = b.sub(fe, sh)
    # subnormal result: shift right (exact: the remainder is smaller than |y|)
    under = b.icmp_signed("<", e, ir.Constant(I32, 1))
    rs = b.sub(ir.Constant(I32, 1), e)
    rs = b.select(under, rs, ir.Constant(I32, 0))
    rs = b.select(b.icmp_signed(">", rs, ir.Constant(I32, it.width - 1)),
                  ir.Constant(I32, it.width - 1), rs)
    m_sub = b.lshr(m, b.zext(rs, it) if is64 else rs)
    e_bits = b.select(under, ir.Constant(it, 0),
                      b.shl(b.zext(e, it) if is64 else e, ir.Constant(it, mant)))
    bits = b.or_(e_bits, b.and_(b.select(under, m_sub, m), ir.Constant(it, (1 << mant) - 1)))
    bits = b.select(zero, ir.Constant(it, 0), bits)
    res = b.bitcast(b.or_(bits, sx), t)
    res = b.select(small, x, res)
    return b.select(special, k.c(t, math.nan), res)


def divmod_parts(k: IRKit, a, bv):
    """NumPy's npy_divmod: (floor quotient, remainder with the divisor's sign)."""
    b = k.builder
    t = a.type
    zero = k.c(t, 0.0)
    mod = fmod(k, a, bv)
    div = b.fdiv(b.fsub(a, mod), bv)
    mod_nz = b.fcmp_unordered("!=", mod, zero)
    flip = b.and_(mod_nz, b.xor(b.fcmp_ordered("<", bv, zero), b.fcmp_ordered("<", mod, zero)))
    mod = b.select(flip, b.fadd(mod, bv), mod)
    div = b.select(flip, b.fsub(div, k.c(t, 1.0)), div)
    mod = b.select(mod_nz, mod, k.copysign(zero, bv))
    fl = k.intrinsic("llvm.floor", [div])
    fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), k.c(t, 0.5)), b.fadd(fl, k.c(t, 1.0)), fl)
    q = b.select(b.fcmp_unordered("!=", div, zero), fl, k.copysign(zero, b.fdiv(a, bv)))
    return q, mod


def float_mod(k: IRKit, a, bv):
    _, mod = divmod_parts(k, a, bv)      # a zero divisor: fmod's NaN passes through
    return mod


def float_floordiv(k: IRKit, a, bv):
    b = k.builder
    q, _ = divmod_parts(k, a, bv)
    return b.select(b.fcmp_ordered("==", bv, k.c(a.type, 0.0)), b.fdiv(a, bv), q)


__all__ = ["atan2", "erf", "float_floordiv", "float_mod", "fmod", "pow_", "tanh"]
