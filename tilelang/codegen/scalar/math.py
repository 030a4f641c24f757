"""The math library: float functions on f32 and f64 registers, built from additions,
multiplications, fused multiply-adds, integer bit operations and (fast paths) PTX `.approx`
instructions. Nothing here becomes a call, so no libdevice is needed.

Precise algorithms (the default): classical range reduction + polynomials whose
coefficients are exact series terms (scalar/consts.py), evaluated with fma. The accuracy of
each function is stated in docs/numerics.md and checked by tests/codegen/scalar/test_scalar_math.py.
While an op that may be approximated is emitted (`k.fast_math`, set per op by the emitter from
the precision mode), some are replaced by the hardware approximations (`ex2.approx`, `lg2.approx`,
`sin/cos.approx`, `tanh.approx`, `rsqrt.approx`), with the errors documented there.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.scalar import consts as K
from tilelang.codegen.scalar.ir import F32, F64, I32, I64, IRKit


class _Prec:
    """Per-precision parameters."""

    def __init__(self, t: ir.Type):
        d = t == F64
        self.t = t
        self.is64 = d
        self.itype = I64 if d else I32
        self.mant = 52 if d else 23
        self.bias = 1023 if d else 127
        self.to32 = not d
        # exp: clamp (beyond these exp overflows to inf / underflows to 0) and Taylor degree
        self.exp_lo, self.exp_hi = (-746.0, 710.0) if d else (-104.0, 89.0)
        self.exp_terms = K.taylor_exp(13 if d else 7)
        hi_bits = 42 if d else 16
        self.ln2 = K.split(K.LN2, 2, hi_bits, not d)
        self.log_terms = K.atanh_series(11 if d else 5)
        self.min_normal = 2.0 ** (1 - self.bias)
        self.sub_scale = 54 if d else 24


def _p(t: ir.Type) -> _Prec:
    return _Prec(t)


# ---------------------------------------------------------------------------------------------
# exp, exp2

def _scale_exp(k: IRKit, p: _Prec, poly, kf):
    """poly * 2**kf, with kf an integral float."""
    ki = k.builder.fptosi(kf, I32)
    return k.ldexp(poly, ki, p.t)


def exp(k: IRKit, x):
    p = _p(x.type)
    b = k.builder
    if getattr(k, "fast_math", False) and not p.is64:
        return _ex2_approx(k, b.fmul(x, k.c(p.t, float(K.LOG2E))))
    xc = _clamp(k, x, p.exp_lo, p.exp_hi)
    kf = k.intrinsic("llvm.rint", [b.fmul(xc, k.c(p.t, float(K.LOG2E)))])
    nk = b.fneg(kf)
    r = k.fma(nk, k.c(p.t, p.ln2[0]), xc)
    r = k.fma(nk, k.c(p.t, p.ln2[1]), r)
    return _scale_exp(k, p, k.poly(r, p.exp_terms), kf)


def exp2(k: IRKit, x):
    p = _p(x.type)
    b = k.builder
    if getattr(k, "fast_math", False) and not p.is64:
        return _ex2_approx(k, x)
    xc = _clamp(k, x, p.exp_lo * 1.4427, p.exp_hi * 1.4427 + 1)
    kf = k.intrinsic("llvm.rint", [xc])
    f = b.fsub(xc, kf)                                # exact
    # 2^f = e^(f ln2): the product in two parts keeps the argument's error below an ulp
    hi, lo = p.ln2
    r = b.fmul(f, k.c(p.t, hi + lo))
    r_err = k.fma(f, k.c(p.t, hi + lo), b.fneg(r))    # the product's rounding error
    r_err = k.fma(f, k.c(p.t, float(K.LN2 - K.Decimal(hi + lo))), r_err)
    e = k.poly(r, p.exp_terms)
    e = k.fma(e, r_err, e)                            # e^(r + d) = e^r (1 + d)
    return _scale_exp(k, p, e, kf)


def _clamp(k: IRKit, x, lo: float, hi: float):
    b = k.builder
    t = x.type
    x = b.select(b.fcmp_ordered("<", x, k.c(t, lo)), k.c(t, lo), x)
    return b.select(b.fcmp_ordered(">", x, k.c(t, hi)), k.c(t, hi), x)


def _ex2_approx(k: IRKit, x):
    # .ftz, as Triton's exp: without it ptxas wraps ex2 in a scale-and-test to keep subnormal
    # results (about 3 more instructions per element), which matter nowhere exp is approximated
    fn = k.declare("llvm.nvvm.ex2.approx.ftz.f", F32, [F32])
    return k.builder.call(fn, [x])


# ---------------------------------------------------------------------------------------------
# log, log2

def _log_parts(k: IRKit, x, p: _Prec):
    """x = 2^e * m with m in [sqrt(1/2), sqrt(2)); returns (e as float, f = m - 1,
    log(1+f) - f as the two terms (-hfsq, s*(hfsq+R)))."""
    b = k.builder
    t, it = p.t, p.itype
    small = b.fcmp_ordered("<", x, k.c(t, p.min_normal))
    xs = b.select(small, b.fmul(x, k.c(t, 2.0 ** p.sub_scale)), x)
    adj = b.select(small, ir.Constant(I32, -p.sub_scale), ir.Constant(I32, 0))
    bits = b.bitcast(xs, it)
    import struct
    if p.is64:
        sqrt_half = struct.unpack("<Q", struct.pack("<d", 0.7071067811865476))[0]
        one = 0x3FF0000000000000
    else:
        sqrt_half = struct.unpack("<I", struct.pack("<f", 0.70710677))[0]
        one = 0x3F800000
    ix = b.add(bits, ir.Constant(it, one - sqrt_half))
    e = b.sub(b.lshr(ix, ir.Constant(it, p.mant)), ir.Constant(it, p.bias))
    e32 = b.trunc(e, I32) if p.is64 else e
    e32 = b.add(e32, adj)
    mbits = b.add(b.and_(ix, ir.Constant(it, (1 << p.mant) - 1)), ir.Constant(it, sqrt_half))
    m = b.bitcast(mbits, t)
    f = b.fsub(m, k.c(t, 1.0))
    s = b.fdiv(f, b.fadd(f, k.c(t, 2.0)))
    z = b.fmul(s, s)
    R = b.fmul(z, k.poly(z, p.log_terms))
    hfsq = b.fmul(k.c(t, 0.5), b.fmul(f, f))
    tail = b.fmul(s, b.fadd(hfsq, R))
    ef = b.sitofp(e32, t)
    return ef, f, hfsq, tail


def _log_specials(k: IRKit, x, r):
    """log of x < 0 is NaN, of ±0 is -inf, of +inf is +inf, NaN stays."""
    b = k.builder
    t = x.type
    r = b.select(b.fcmp_ordered("==", x, k.c(t, 0.0)), k.c(t, float("-inf")), r)
    r = b.select(b.fcmp_ordered("<", x, k.c(t, 0.0)), k.c(t, float("nan")), r)
    r = b.select(b.fcmp_ordered("==", x, k.c(t, float("inf"))), x, r)
    return b.select(k.isnan(x), x, r)


def log(k: IRKit, x):
    p = _p(x.type)
    b = k.builder
    if getattr(k, "fast_math", False) and not p.is64:
        return b.fmul(_lg2_approx(k, x), k.c(F32, float(K.LN2)))
    ef, f, hfsq, tail = _log_parts(k, x, p)
    hi, lo = p.ln2
    # e*ln2_hi is exact (ln2_hi has few bits); the small terms are added first
    small = b.fsub(hfsq, k.fma(ef, k.c(p.t, lo), tail))
    r = b.fadd(b.fmul(ef, k.c(p.t, hi)), b.fsub(f, small))
    return _log_specials(k, x, r)


def log2(k: IRKit, x):
    p = _p(x.type)
    b = k.builder
    if getattr(k, "fast_math", False) and not p.is64:
        return _lg2_approx(k, x)
    ef, f, hfsq, tail = _log_parts(k, x, p)
    lm = b.fsub(f, b.fsub(hfsq, tail))                # log(m), |lm| <= 0.35
    hi, lo = K.split(K.LOG2E, 2, None, p.to32)
    # e + lm * log2e with log2e in two parts and one final rounding
    r = k.fma(lm, k.c(p.t, hi), k.fma(lm, k.c(p.t, lo), ef))
    return _log_specials(k, x, r)


def _lg2_approx(k: IRKit, x):
    fn = k.declare("llvm.nvvm.lg2.approx.f", F32, [F32])
    return k.builder.call(fn, [x])


# ---------------------------------------------------------------------------------------------
# sqrt, rsqrt, sigmoid

def sqrt(k: IRKit, x):
    return k.intrinsic("llvm.sqrt", [x])             # sqrt.rn: correctly rounded


def rsqrt(k: IRKit, x):
    b = k.builder
    if getattr(k, "fast_math", False) and x.type == F32:
        fn = k.declare("llvm.nvvm.rsqrt.approx.f", F32, [F32])
        return b.call(fn, [x])
    # the reference is 1.0 / sqrt(x): both steps correctly rounded, so this is bit-exact
    return b.fdiv(k.c(x.type, 1.0), sqrt(k, x))


def sigmoid(k: IRKit, x):
    """1 / (1 + exp(-x)), the reference's own formula (so within exp's error); approximated:
    `ex2.approx` and `rcp.approx` (exp(-x) = inf gives 0, = 0 gives 1, as the formula)."""
    b = k.builder
    e = exp(k, b.fneg(x))
    d = b.fadd(k.c(x.type, 1.0), e)
    if getattr(k, "fast_math", False) and x.type == F32:
        return b.fdiv(k.c(F32, 1.0), d, flags=("afn",))         # rcp.approx.f32
    return b.fdiv(k.c(x.type, 1.0), d)


# ---------------------------------------------------------------------------------------------
# double-double log2 / exp2 for pow

def log2_dd(k: IRKit, x):
    """log2(x) for x >= 0 (f64) as hi + lo with about 2^-100 relative error (specials: 0 →
    -inf, inf → inf, NaN → NaN in hi)."""
    b = k.builder
    p = _p(F64)
    t = F64
    small = b.fcmp_ordered("<", x, k.c(t, p.min_normal))
    xs = b.select(small, b.fmul(x, k.c(t, 2.0 ** 54)), x)
    adj = b.select(small, ir.Constant(I32, -54), ir.Constant(I32, 0))
    bits = b.bitcast(xs, I64)
    sqrt_half, one = 0x3FE6A09E667F3BCD, 0x3FF0000000000000
    ix = b.add(bits, ir.Constant(I64, one - sqrt_half))
    e = b.add(b.trunc(b.sub(b.lshr(ix, ir.Constant(I64, 52)), ir.Constant(I64, 1023)), I32), adj)
    m = b.bitcast(b.add(b.and_(ix, ir.Constant(I64, (1 << 52) - 1)),
                        ir.Constant(I64, sqrt_half)), t)
    f = b.fsub(m, k.c(t, 1.0))
    d_hi = b.fadd(k.c(t, 2.0), f)
    d_lo = b.fadd(b.fsub(k.c(t, 2.0), d_hi), f)
    s_hi = b.fdiv(f, d_hi)
    rem = b.fsub(k.fma(b.fneg(s_hi), d_hi, f), b.fmul(s_hi, d_lo))
    s_lo = b.fdiv(rem, d_hi)
    z = b.fmul(s_hi, s_hi)
    tail = b.fmul(b.fmul(s_hi, z), k.poly(z, K.atanh_series(12)))
    h0 = b.fadd(s_hi, s_hi)
    l0 = b.fadd(b.fadd(s_lo, s_lo), tail)
    h = b.fadd(h0, l0)
    l = b.fsub(l0, b.fsub(h, h0))
    c_hi, c_lo = K.split(K.LOG2E, 2, None, False)
    pr = b.fmul(h, k.c(t, c_hi))
    perr = k.fma(h, k.c(t, c_hi), b.fneg(pr))
    q = b.fadd(perr, b.fadd(b.fmul(h, k.c(t, c_lo)), b.fmul(l, k.c(t, c_hi))))
    ef = b.sitofp(e, t)
    s = b.fadd(ef, pr)
    bb = b.fsub(s, ef)
    err = b.fadd(b.fsub(ef, b.fsub(s, bb)), b.fsub(pr, bb))
    lo = b.fadd(err, q)
    hi = b.fadd(s, lo)
    lo = b.fsub(lo, b.fsub(hi, s))
    spec = _log_specials(k, x, hi)
    is_spec = b.or_(b.or_(k.isnan(x), b.fcmp_ordered("<=", x, k.c(t, 0.0))),
                    b.fcmp_ordered("==", x, k.c(t, float("inf"))))
    return spec, b.select(is_spec, k.c(t, 0.0), lo)


def exp2_dd(k: IRKit, hi, lo):
    """2^(hi + lo) in f64 (|lo| <= ulp(hi)), overflow to inf, underflow to 0."""
    b = k.builder
    p = _p(F64)
    t = F64
    # an infinite hi makes lo meaningless (it may be inf * 0 = NaN): drop it
    lo = b.select(b.fcmp_ordered("<", k.fabs(hi), k.c(t, 2048.0)), lo, k.c(t, 0.0))
    hc = _clamp(k, hi, -1080.0, 1030.0)
    kf = k.intrinsic("llvm.rint", [hc])
    f = b.fadd(b.fsub(hc, kf), lo)
    l1, l2 = p.ln2
    l1 = l1 + l2
    l2 = float(K.LN2 - K.Decimal(l1))
    r_hi = b.fmul(f, k.c(t, l1))
    r_lo = k.fma(f, k.c(t, l2), k.fma(f, k.c(t, l1), b.fneg(r_hi)))
    e = k.poly(r_hi, p.exp_terms)
    e = k.fma(e, r_lo, e)
    return _scale_exp(k, p, e, kf)
