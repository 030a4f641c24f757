"""log10, log1p, expm1, cbrt, hypot, tan, atan, asin, acos, sinh, cosh, asinh, acosh and atanh on
f32/f64 registers (docs/numerics.md has the bounds).

f32 is computed in f64 with the f64 routines and rounded once: every intermediate error is far
below half an f32 ulp, so the result is within 1 ulp (a near-tie can move). f64 uses the
classical identities that keep the small-argument accuracy:

- log10: the double-double log2 of pow (2^-100 relative) times log10(2) in two parts;
- log1p: u = 1 + x, log(u) * x / (u - 1) (Goldberg: the rounding of u cancels), x when u == 1;
- expm1: u = e^x, (u - 1) * x / log(u) (Kahan), x when u == 1, -1 when u - 1 == -1;
- cbrt: 2^(log2|x| / 3) by pow's double-double path, one Newton step, the sign of x;
- hypot: m sqrt(1 + (n/m)^2) with m = max(|a|, |b|), so nothing overflows on the way;
- tan: sin/cos's reduction once, sin(r)/cos(r) or -cos(r)/sin(r) by the quadrant;
- atan, asin, acos: atan2(x, 1), atan2(x, sqrt((1-x)(1+x))), atan2(sqrt((1-x)(1+x)), x);
- sinh: (E + E/(E+1))/2 with E = expm1|x|; cosh: (e^|x| + e^-|x|)/2; both (e^(|x|/2))^2/2
  beyond 700 so they overflow exactly where the result does.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.scalar import consts as K
from tilelang.codegen.scalar import trig
from tilelang.codegen.scalar.ir import F32, F64, IRKit
from tilelang.codegen.scalar.math import exp, exp2_dd, log, log2_dd
from tilelang.codegen.scalar.special import atan2


def _in_f64(fn):
    """Run an f64 routine for an f32 register and round the result once."""
    def run(k: IRKit, *args):
        if args[0].type == F64:
            return fn(k, *args)
        b = k.builder
        r = fn(k, *[b.fpext(a, F64) for a in args])
        return b.fptrunc(r, F32)
    return run


def _log2_dd(k: IRKit, x):
    return log2_dd(k, x)


@_in_f64
def log10(k: IRKit, x):
    b = k.builder
    hi, lo = _log2_dd(k, x)
    c_hi, c_lo = K.split(K.LOG10_2, 2, None, False)
    r = k.fma(hi, k.c(F64, c_hi), b.fadd(b.fmul(hi, k.c(F64, c_lo)),
                                         b.fmul(lo, k.c(F64, c_hi))))
    # ±inf and NaN from log2 (x = 0, inf, < 0, NaN) stay as they are
    return b.select(b.fcmp_ordered("<", k.fabs(hi), k.c(F64, float("inf"))), r, hi)


@_in_f64
def log1p(k: IRKit, x):
    b = k.builder
    one = k.c(F64, 1.0)
    u = b.fadd(one, x)
    d = b.fsub(u, one)
    r = b.fmul(log(k, u), b.fdiv(x, d))
    r = b.select(b.fcmp_ordered("==", d, k.c(F64, 0.0)), x, r)        # u == 1: log1p(x) = x
    return b.select(b.fcmp_ordered("==", x, k.c(F64, float("inf"))), x, r)


@_in_f64
def expm1(k: IRKit, x):
    b = k.builder
    one = k.c(F64, 1.0)
    u = exp(k, x)
    d = b.fsub(u, one)
    r = b.fmul(d, b.fdiv(x, log(k, u)))                # x / log(u) ~ 1: no overflow
    r = b.select(b.fcmp_ordered("==", d, k.c(F64, -1.0)), d, r)       # e^x rounds to 0
    r = b.select(b.fcmp_ordered("==", u, k.c(F64, float("inf"))), u, r)
    return b.select(b.fcmp_ordered("==", d, k.c(F64, 0.0)), x, r)     # e^x rounds to 1


@_in_f64
def cbrt(k: IRKit, x):
    b = k.builder
    a = k.fabs(x)
    hi, lo = _log2_dd(k, a)
    third = k.c(F64, 1.0 / 3.0)
    # (hi + lo) / 3 as a double-double: q = hi/3 rounded, plus the remainder's share
    q = b.fmul(hi, third)
    q_lo = b.fmul(b.fadd(k.fma(b.fneg(q), k.c(F64, 3.0), hi), lo), third)
    y = exp2_dd(k, q, q_lo)
    # one Newton step on y^3 = a where y^3 cannot under- or overflow
    y2 = b.fmul(y, y)
    e2 = k.fma(y, y, b.fneg(y2))                     # y*y = y2 + e2 exactly
    res = b.fadd(k.fma(y2, y, b.fneg(a)), b.fmul(e2, y))
    corr = b.fdiv(res, b.fmul(k.c(F64, 3.0), y2))
    ok = b.and_(b.fcmp_ordered(">=", a, k.c(F64, 2.0 ** -960)),
                b.fcmp_ordered("<=", a, k.c(F64, 2.0 ** 960)))
    y = b.select(ok, b.fsub(y, corr), y)
    y = b.select(b.fcmp_ordered("==", a, k.c(F64, 0.0)), a, y)
    return k.copysign(y, x)


def hypot(k: IRKit, x, y):
    b = k.builder
    t = x.type
    ax, ay = k.fabs(x), k.fabs(y)
    inf = k.c(t, float("inf"))
    is_inf = b.or_(b.fcmp_ordered("==", ax, inf), b.fcmp_ordered("==", ay, inf))
    if t == F32:
        wx, wy = b.fpext(ax, F64), b.fpext(ay, F64)
        r = k.intrinsic("llvm.sqrt", [k.fma(wx, wx, b.fmul(wy, wy))])
        return b.select(is_inf, inf, b.fptrunc(r, F32))
    gt = b.fcmp_ordered(">", ax, ay)
    m = b.select(gt, ax, ay)
    n = b.select(gt, ay, ax)
    q = b.fdiv(n, m)
    r = b.fmul(m, k.intrinsic("llvm.sqrt", [k.fma(q, q, k.c(t, 1.0))]))
    r = b.select(b.fcmp_ordered("==", m, k.c(t, 0.0)), k.c(t, 0.0), r)
    r = b.select(b.or_(k.isnan(x), k.isnan(y)), b.fadd(x, y), r)
    return b.select(is_inf, inf, r)


# ---------------------------------------------------------------------------------------------
# tan, atan, asin, acos, sinh, cosh

@_in_f64
def tan(k: IRKit, x):
    """sin(r) / cos(r) of |x| reduced (quadrant q: -cos/sin when q is odd), negated for
    negative x; NaN for ±inf and NaN, -0 kept."""
    b = k.builder
    a = k.fabs(x)
    q, r, rlo = trig.reduce_pio2(k, a)
    s = trig._sin_kernel(k, r, rlo, True)
    c = trig._cos_kernel(k, r, rlo, True)
    odd = b.trunc(q, ir.IntType(1))
    v = b.select(odd, b.fneg(b.fdiv(c, s)), b.fdiv(s, c))
    v = b.select(b.fcmp_ordered("<", x, k.c(F64, 0.0)), b.fneg(v), v)     # tan is odd
    v = b.select(b.fcmp_ordered("==", x, k.c(F64, 0.0)), x, v)
    bad = b.or_(k.isnan(x), b.fcmp_ordered("==", a, k.c(F64, float("inf"))))
    return b.select(bad, k.c(F64, float("nan")), v)


@_in_f64
def atan(k: IRKit, x):
    return atan2(k, x, k.c(F64, 1.0))


def _asin_parts(k: IRKit, x):
    """sqrt((1 - x)(1 + x)): accurate near ±1, where 1 - x is exact."""
    b = k.builder
    one = k.c(F64, 1.0)
    return k.intrinsic("llvm.sqrt", [b.fmul(b.fsub(one, x), b.fadd(one, x))])


@_in_f64
def asin(k: IRKit, x):
    b = k.builder
    r = atan2(k, x, _asin_parts(k, x))
    # |x| > 1 gives NaN (the square root of a negative number), -0 stays -0
    return b.select(b.fcmp_ordered("==", x, k.c(F64, 0.0)), x, r)


@_in_f64
def acos(k: IRKit, x):
    return atan2(k, _asin_parts(k, x), x)


def _exp_half_squared(k: IRKit, a):
    """e^a / 2 for large a without overflowing early: (e^(a/2))^2 / 2."""
    b = k.builder
    h = exp(k, b.fmul(a, k.c(F64, 0.5)))
    return b.fmul(b.fmul(h, k.c(F64, 0.5)), h)


@_in_f64
def sinh(k: IRKit, x):
    """(E + E / (E + 1)) / 2 with E = expm1(|x|) (no cancellation for small x), the sign of
    x; beyond 700 as (e^(|x|/2))^2 / 2."""
    b = k.builder
    a = k.fabs(x)
    e = expm1(k, a)
    r = b.fmul(k.c(F64, 0.5), b.fadd(e, b.fdiv(e, b.fadd(e, k.c(F64, 1.0)))))
    r = b.select(b.fcmp_ordered(">", a, k.c(F64, 700.0)), _exp_half_squared(k, a), r)
    return k.copysign(r, x)


@_in_f64
def cosh(k: IRKit, x):
    b = k.builder
    a = k.fabs(x)
    e = exp(k, a)
    r = b.fadd(b.fmul(k.c(F64, 0.5), e), b.fdiv(k.c(F64, 0.5), e))
    return b.select(b.fcmp_ordered(">", a, k.c(F64, 700.0)), _exp_half_squared(k, a), r)


# ---------------------------------------------------------------------------------------------
# asinh, acosh, atanh

@_in_f64
def asinh(k: IRKit, x):
    """log1p(a + a^2 / (1 + sqrt(1 + a^2))) for a = |x| (no cancellation near 0), the sign of
    x; beyond 2^28 log(a) + ln 2 (a^2 would overflow, and 1 + a^2 is a^2 anyway)."""
    b = k.builder
    one = k.c(F64, 1.0)
    a = k.fabs(x)
    a2 = b.fmul(a, a)
    small = log1p(k, b.fadd(a, b.fdiv(a2, b.fadd(one, k.intrinsic("llvm.sqrt",
                                                                      [b.fadd(one, a2)])))))
    big = b.fadd(log(k, a), k.c(F64, float(K.LN2)))
    r = b.select(b.fcmp_ordered(">", a, k.c(F64, 2.0 ** 28)), big, small)
    return k.copysign(r, x)


@_in_f64
def acosh(k: IRKit, x):
    """log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1); beyond 2^28 log(x) + ln 2;
    NaN below 1."""
    b = k.builder
    t = b.fsub(x, k.c(F64, 1.0))
    small = log1p(k, b.fadd(t, k.intrinsic("llvm.sqrt", [b.fmul(t, b.fadd(t, k.c(F64, 2.0)))])))
    big = b.fadd(log(k, x), k.c(F64, float(K.LN2)))
    r = b.select(b.fcmp_ordered(">", x, k.c(F64, 2.0 ** 28)), big, small)
    # below 1 (where t (t + 2) is positive again for t < -2) and NaN: NaN
    return b.select(b.fcmp_unordered("<", x, k.c(F64, 1.0)), k.c(F64, float("nan")), r)


@_in_f64
def atanh(k: IRKit, x):
    """log1p(2a / (1 - a)) / 2 for a = |x|, the sign of x: ±1 gives ±inf, |x| > 1 NaN."""
    b = k.builder
    a = k.fabs(x)
    r = b.fmul(k.c(F64, 0.5), log1p(k, b.fdiv(b.fadd(a, a), b.fsub(k.c(F64, 1.0), a))))
    return k.copysign(r, x)
