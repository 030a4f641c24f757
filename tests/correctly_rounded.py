"""Correctly rounded reference values of the math functions, for tests that measure errors in
ulps: computed with mpmath in a precision well above the target's and rounded once, by integer
arithmetic, to f16, f32 or f64 (round to nearest, ties to even; subnormals and overflow as IEEE
754). Unlike NumPy's transcendentals, whose float32 and float64 results differ by a few ulps
between CPUs (SIMD paths) and NumPy builds, these values are the same everywhere, so a bound
asserted against them measures the kernel alone.

Each value is found by Ziv's method: evaluate at P bits, round both ends of the interval the
evaluation error allows, and accept when they agree; otherwise double P. mpmath's elementary
functions are accurate to about one unit of their working precision, so an allowance of 2^-(P-8)
relative is generous. Results exactly halfway between two targets (`pow` can produce them) end
the search at the top precision, where they are exact, and round ties to even.

Special values (infinities, NaN, signed zeros, poles, domain errors) follow C99 Annex F, as the
IEEE math libraries and docs/numerics.md do.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

# (precision in bits including the hidden one, least normal exponent, greatest exponent)
FORMATS = {np.dtype(np.float16): (11, -14, 15), np.dtype(np.float32): (24, -126, 127),
           np.dtype(np.float64): (53, -1022, 1023)}
_START_BITS, _TOP_BITS = 128, 4096

mp = mpmath.mp
INF, NAN = math.inf, math.nan


def _round_scaled(man: int, exp: int, fmt) -> float:
    """man * 2**exp (man != 0) rounded to nearest-even in `fmt`, as a Python float (exact)."""
    p, emin, emax = fmt
    sign = -1.0 if man < 0 else 1.0
    man = abs(man)
    top = exp + man.bit_length() - 1            # floor(log2 |value|)
    if top > emax:
        return sign * INF
    if top < emin - p - 1:                      # below half the least subnormal
        return sign * 0.0
    q = max(top, emin) - (p - 1)                # exponent of the last place
    if exp >= q:
        n = man << (exp - q)
    else:
        shift = q - exp
        n, rest = man >> shift, man & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and n & 1):
            n += 1
    if n and n.bit_length() + q - 1 > emax:
        return sign * INF
    return math.copysign(math.ldexp(n, q), sign)


def round_mpf(v, np_dtype, rel_bits: int | None = None):
    """Round an mpmath value to `np_dtype`; with `rel_bits`, None when the interval
    v * (1 +- 2^-rel_bits) rounds to two different values (then more precision is needed)."""
    fmt = FORMATS[np.dtype(np_dtype)]
    if mpmath.isnan(v):
        return NAN
    if mpmath.isinf(v):
        return INF if v > 0 else -INF
    neg, man, exp, _ = v._mpf_                  # mpmath keeps the sign apart
    if man == 0:
        return 0.0
    man = -int(man) if neg else int(man)
    if rel_bits is None:
        return _round_scaled(man, exp, fmt)
    # widen to integers with room for the error term
    widen = rel_bits + 2
    m = man << widen
    err = (abs(man) << widen) >> rel_bits
    lo = _round_scaled(m - err, exp - widen, fmt)
    hi = _round_scaled(m + err, exp - widen, fmt)
    return lo if lo == hi else None


def _real(v):
    """mpmath answers a domain error with a complex number: that is NaN here."""
    return v if isinstance(v, mpmath.mpf) else mpmath.mpf("nan")


def _cbrt(x):
    return mpmath.cbrt(x) if x >= 0 else -mpmath.cbrt(-x)


def _atan2(y, x):
    return mpmath.atan2(y, x)


# The finite-argument functions, at the current mpmath precision.
UNARY = {
    "exp": mpmath.exp, "exp2": lambda x: mpmath.power(2, x), "expm1": mpmath.expm1,
    "log": mpmath.log, "log2": lambda x: mpmath.log(x, 2), "log10": mpmath.log10,
    "log1p": mpmath.log1p, "sqrt": mpmath.sqrt, "rsqrt": lambda x: 1 / mpmath.sqrt(x),
    "cbrt": _cbrt, "sin": mpmath.sin, "cos": mpmath.cos, "tan": mpmath.tan,
    "asin": mpmath.asin, "acos": mpmath.acos, "atan": mpmath.atan, "sinh": mpmath.sinh,
    "cosh": mpmath.cosh, "tanh": mpmath.tanh, "asinh": mpmath.asinh, "acosh": mpmath.acosh,
    "atanh": mpmath.atanh, "erf": mpmath.erf, "sigmoid": lambda x: 1 / (1 + mpmath.exp(-x)),
}
BINARY = {"pow": mpmath.power, "atan2": _atan2, "hypot": mpmath.hypot}

# f(-0) = -0 and f(+0) = +0 (and a result that underflows keeps the argument's sign)
ODD_AT_ZERO = {"expm1", "log1p", "sqrt", "cbrt", "sin", "tan", "asin", "atan", "sinh", "tanh",
               "asinh", "atanh", "erf"}
# f(+-inf): the limits (None: NaN)
AT_INF = {
    "exp": (INF, 0.0), "exp2": (INF, 0.0), "expm1": (INF, -1.0), "log": (INF, None),
    "log2": (INF, None), "log10": (INF, None), "log1p": (INF, None), "sqrt": (INF, None),
    "rsqrt": (0.0, None), "cbrt": (INF, -INF), "sin": (None, None), "cos": (None, None),
    "tan": (None, None), "asin": (None, None), "acos": (None, None), "atan": ("pi/2", "-pi/2"),
    "sinh": (INF, -INF), "cosh": (INF, INF), "tanh": (1.0, -1.0), "asinh": (INF, -INF),
    "acosh": (INF, None), "atanh": (None, None), "erf": (1.0, -1.0), "sigmoid": (1.0, 0.0),
}
# poles: argument -> result (the sign of a zero argument decides for rsqrt)
POLES = {"log": {0.0: -INF}, "log2": {0.0: -INF}, "log10": {0.0: -INF}, "log1p": {-1.0: -INF},
         "atanh": {1.0: INF, -1.0: -INF}}


def _ziv(f, args, np_dtype):
    bits = _START_BITS
    while True:
        with mpmath.workprec(bits):
            v = _real(f(*[mpmath.mpf(a) for a in args]))
        if bits >= _TOP_BITS:
            return round_mpf(v, np_dtype)
        r = round_mpf(v, np_dtype, rel_bits=bits - 8)
        if r is not None:
            return r
        bits *= 2


def _constant(text: str, np_dtype) -> float:
    sign = -1 if text.startswith("-") else 1
    num, _, den = text.lstrip("-").partition("/")
    factor = {"pi": 1, "3pi": 3}[num]
    return _ziv(lambda: sign * factor * mpmath.pi / int(den or 1), [], np_dtype)


def _unary_one(name: str, x: float, np_dtype) -> float:
    if math.isnan(x):
        return NAN
    if math.isinf(x):
        r = AT_INF[name][0 if x > 0 else 1]
        return NAN if r is None else (_constant(r, np_dtype) if isinstance(r, str) else r)
    if name == "rsqrt" and x == 0:
        return math.copysign(INF, x)
    pole = POLES.get(name, {}).get(abs(x) if name in ("log", "log2", "log10") else x)
    if pole is not None:
        return pole
    r = _ziv(UNARY[name], [x], np_dtype)
    if r == 0 and not math.isnan(r):
        odd = name in ODD_AT_ZERO
        return math.copysign(0.0, x) if odd else 0.0
    return r


def _odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == int(y) and int(y) % 2 == 1


def _pow_one(x: float, y: float, np_dtype) -> float:
    if y == 0 or x == 1:
        return 1.0
    if math.isnan(x) or math.isnan(y):
        return NAN
    odd = _odd_integer(y)
    if x == 0:
        if y < 0:
            return math.copysign(INF, x) if odd else INF
        return math.copysign(0.0, x) if odd else 0.0
    if math.isinf(y):
        if x == -1:
            return 1.0
        return (INF if abs(x) < 1 else 0.0) if y < 0 else (0.0 if abs(x) < 1 else INF)
    if math.isinf(x):
        if x < 0:
            return (-0.0 if odd else 0.0) if y < 0 else (-INF if odd else INF)
        return 0.0 if y < 0 else INF
    if x < 0 and y != int(y):
        return NAN
    # exact integers: the interval test needs an exact value, so compute in Fractions
    if y == int(y) and abs(y) <= 4096:
        exact = Fraction(x) ** int(y)
        r = _round_fraction(exact, np_dtype)
    else:
        r = _ziv(lambda a, b: mpmath.power(abs(a), b), [x, y], np_dtype)
        if x < 0 and odd:
            r = -r
    if r == 0:
        return -0.0 if (x < 0 and odd) else 0.0
    return r


def _round_fraction(q: Fraction, np_dtype) -> float:
    if q == 0:
        return 0.0
    fmt = FORMATS[np.dtype(np_dtype)]
    # scale to an integer with 2 * precision bits to spare, then round that (exact ties kept)
    num, den = q.numerator, q.denominator
    shift = max(0, den.bit_length() - num.bit_length() + 2 * fmt[0] + 4)
    man, rest = divmod(num << shift, den)
    exp = -shift
    if rest:                                    # a sticky bit below every rounding position
        man, exp = (man << 1) | 1, exp - 1
    return _round_scaled(man, exp, fmt)


def _atan2_one(y: float, x: float, np_dtype) -> float:
    if math.isnan(x) or math.isnan(y):
        return NAN
    neg = math.copysign(1.0, y) < 0
    sign = "-" if neg else ""
    if y == 0:
        if math.copysign(1.0, x) < 0:
            return _constant(sign + "pi", np_dtype)
        return -0.0 if neg else 0.0
    if math.isinf(y):
        if math.isinf(x):
            return _constant(sign + ("3pi/4" if x < 0 else "pi/4"), np_dtype)
        return _constant(sign + "pi/2", np_dtype)
    if x == 0:
        return _constant(sign + "pi/2", np_dtype)
    if math.isinf(x):
        return _constant(sign + "pi", np_dtype) if x < 0 else (-0.0 if neg else 0.0)
    r = _ziv(_atan2, [y, x], np_dtype)
    return math.copysign(0.0, y) if r == 0 else r


def _hypot_one(x: float, y: float, np_dtype) -> float:
    if math.isinf(x) or math.isinf(y):
        return INF
    if math.isnan(x) or math.isnan(y):
        return NAN
    return _ziv(mpmath.hypot, [x, y], np_dtype)


BINARY_ONE = {"pow": _pow_one, "atan2": _atan2_one, "hypot": _hypot_one}


def correctly_rounded(name: str, args, np_dtype) -> np.ndarray:
    """`name` applied element-wise to `args` (arrays or scalars, broadcast together), each
    result correctly rounded to `np_dtype` (float16, float32 or float64). The arguments are
    taken as exact binary values (their own dtype's)."""
    npd = np.dtype(np_dtype)
    arrays = np.broadcast_arrays(*[np.asarray(a) for a in args])
    flat = [a.astype(np.float64).ravel().tolist() for a in arrays]
    if name in UNARY:
        (xs,) = flat
        out = [_unary_one(name, x, npd) for x in xs]
    else:
        one = BINARY_ONE[name]
        out = [one(a, b, npd) for a, b in zip(*flat)]
    return np.array(out, np.float64).astype(npd).reshape(arrays[0].shape)



def fused_multiply_add(a, b, c, np_dtype) -> np.ndarray:
    """a * b + c with one rounding to `np_dtype` (what `fma` and a contracted multiply-add
    compute: docs/numerics.md, "Contraction"), element-wise over broadcast finite arrays."""
    npd = np.dtype(np_dtype)
    arrays = np.broadcast_arrays(*[np.asarray(v) for v in (a, b, c)])
    flat = [v.astype(np.float64).ravel().tolist() for v in arrays]
    out = []
    for x, y, z in zip(*flat):
        assert math.isfinite(x) and math.isfinite(y) and math.isfinite(z), (x, y, z)
        q = Fraction(x) * Fraction(y) + Fraction(z)
        r = _round_fraction(q, npd)
        out.append(-0.0 if r == 0 and q == 0 and math.copysign(1, x * y) < 0 and
                   math.copysign(1, z) < 0 else r)
    return np.array(out, np.float64).astype(npd).reshape(arrays[0].shape)
