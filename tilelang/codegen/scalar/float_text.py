"""A float as NumPy prints a scalar of its type (`str` of a 0-d array, the interpreter's
`print`), computed at compile time in plain Python for constants that `print` shows.

The rules are emit/format.py's, which does the same on the device: the shortest digits that
read back to the same value, nearest to it, ties to the even digit (the rounding interval
includes its ends when the mantissa is even); positional for 0 and 1e-4 <= |x| < 1e3 (f16),
1e6 (f32), 1e16 (f64), else scientific with a signed exponent of at least two digits.
Exact rational arithmetic, so every value gets NumPy's text; only `print` pays for it.
"""

from __future__ import annotations

import math

# name: (explicit mantissa bits, smallest normal exponent, positional below)
FORMATS = {"f16": (10, -14, 1e3), "f32": (23, -126, 1e6), "f64": (52, -1022, 1e16)}


def _interval(v: float, mant: int, emin: int) -> tuple[Fraction, Fraction, bool]:
    """The values that read back to v > 0: [low, high], ends included iff inclusive."""
    from fractions import Fraction      # only `print` of a constant pays for its import
    m, e = math.frexp(v)                          # v = m * 2^e, 0.5 <= m < 1
    exp = max(e - 1, emin)                        # v = M * 2^(exp - mant)
    ulp = Fraction(2) ** (exp - mant)
    big = int(Fraction(v) / ulp)
    below = ulp / 2 if big == 1 << mant and exp > emin else ulp   # a binade's first value
    x = Fraction(v)
    return x - below / 2, x + ulp / 2, big % 2 == 0


def shortest_digits(v: float, fmt: str) -> tuple[str, int]:
    """(digits, k) for v > 0 of format `fmt`: v reads as 0.d1d2... * 10^(k + 1), the digits
    the fewest that read back to v, nearest to v, ties to an even last digit."""
    from fractions import Fraction
    mant, emin, _ = FORMATS[fmt]
    low, high, inclusive = _interval(v, mant, emin)
    x = Fraction(v)
    k = math.floor(math.log10(v))
    while Fraction(10) ** k > x:                 # the exact decimal exponent of v
        k -= 1
    while Fraction(10) ** (k + 1) <= x:
        k += 1
    for n in range(1, 40):
        scale = Fraction(10) ** (k - n + 1)
        q = x / scale
        best = None
        for c in (math.floor(q), math.floor(q) + 1):
            y = c * scale
            inside = low <= y <= high if inclusive else low < y < high
            if c > 0 and inside:
                d = abs(y - x)
                if best is None or d < best[0] or d == best[0] and c % 2 == 0:
                    best = (d, c)
        if best is not None:
            digits = str(best[1])
            if len(digits) > n:                  # rounded up to the next power of ten
                return digits.rstrip("0") or "1", k + 1
            return digits.rstrip("0") or "0", k
    raise AssertionError(f"no digits for {v!r}")


def float_text(v: float, fmt: str) -> str:
    """`str(np.asarray(v, <fmt's dtype>))` for a value v exactly representable in fmt."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    sign = "-" if math.copysign(1.0, v) < 0 else ""
    a = abs(v)
    if a == 0:
        return sign + "0.0"
    digits, k = shortest_digits(a, fmt)
    if 1e-4 <= a < FORMATS[fmt][2]:
        if k >= 0:
            whole = digits[:k + 1].ljust(k + 1, "0")
            return f"{sign}{whole}.{digits[k + 1:] or '0'}"
        return f"{sign}0.{'0' * (-k - 1)}{digits}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if k < 0 else '+'}{abs(k):02d}"
