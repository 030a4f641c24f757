"""Mathematical constants for the math library, computed with 60-digit decimal arithmetic (so
every split constant is exact to the last bit), and the exact series coefficients the
polynomials use.

The constants (LN2, LOG2E, LN10, LOG10_2, PI) and `Decimal` are module attributes made on
first use: most kernels call no math function, and importing `decimal` and `fractions` and
computing the constants was ~3 ms of every cold compile. The first use sets the thread's
decimal precision to 60 digits, as importing this module used to.
"""

from __future__ import annotations

import math

from tilelang.codegen.scalar import rounding

_LAZY = ("LN2", "LOG2E", "LN10", "LOG10_2", "PI", "Decimal")


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from decimal import Decimal, getcontext
    getcontext().prec = 60
    ln2 = Decimal(2).ln()
    g = globals()
    g.update(Decimal=Decimal, LN2=ln2, LOG2E=1 / ln2, LN10=Decimal(10).ln(),
             LOG10_2=Decimal(2).log10(), PI=_pi(Decimal))
    return g[name]


def _const(name: str):
    """A lazy constant from inside this module (where `__getattr__` is not consulted)."""
    g = globals()
    return g[name] if name in g else __getattr__(name)


def _pi(Decimal):
    # Machin: pi = 16 atan(1/5) - 4 atan(1/239)
    def atan_inv(n: int):
        x = Decimal(1) / n
        x2, term, total, k = x * x, x, x, 1
        while True:
            term *= -x2
            d = term / (2 * k + 1)
            if abs(d) < Decimal(10) ** -58:
                return total
            total += d
            k += 1
    return 16 * atan_inv(5) - 4 * atan_inv(239)


def f32(x) -> float:
    return rounding.f32(float(x))


def split(value: Decimal, parts: int, bits: int | None, to32: bool) -> list[float]:
    """`value` as a sum of `parts` floats; the leading ones keep only `bits` significant bits
    (so that k * part is exact for small integers k); the last one is rounded normally."""
    Decimal = _const("Decimal")                # and the 60-digit precision
    out = []
    rest = value
    for i in range(parts):
        if i == parts - 1 or bits is None:
            v = float(rest)
            v = f32(v) if to32 else v
        else:
            e = math.frexp(float(rest))[1]
            scale = Decimal(2) ** (bits - e)
            v = float(int(rest * scale) / scale)   # truncate to `bits` bits
        out.append(v)
        rest -= Decimal(v)
    return out


def taylor_exp(n: int) -> list[float]:
    """1/k! for k = 0..n."""
    return [1.0 / math.factorial(k) for k in range(n + 1)]


def tanh_series(n: int) -> list[float]:
    """Coefficients c_k of tanh(x) = x * sum c_k x^(2k), k = 0..n-1 (from Bernoulli numbers:
    c_k = 2^(2k+2) (2^(2k+2) - 1) B_(2k+2) / (2k+2)!)."""
    from fractions import Fraction
    bern = _bernoulli(2 * n + 2)
    out = []
    for k in range(n):
        m = 2 * k + 2
        c = Fraction(2 ** m * (2 ** m - 1)) * bern[m] / math.factorial(m)
        out.append(float(c))
    return out


def _bernoulli(n: int) -> list[Fraction]:
    from fractions import Fraction
    b = [Fraction(0)] * (n + 1)
    b[0] = Fraction(1)
    for m in range(1, n + 1):
        b[m] = -sum(Fraction(math.comb(m + 1, j)) * b[j] for j in range(m)) / (m + 1)
    return b


def sin_series(n: int) -> list[float]:
    """sin(x) = x * sum (-1)^k x^(2k) / (2k+1)!, k = 0..n-1."""
    return [(-1) ** k / math.factorial(2 * k + 1) for k in range(n)]


def cos_series(n: int) -> list[float]:
    """cos(x) = sum (-1)^k x^(2k) / (2k)!, k = 0..n-1."""
    return [(-1) ** k / math.factorial(2 * k) for k in range(n)]


def atanh_series(n: int) -> list[float]:
    """2 / (2k + 1) for k = 1..n: log(1+f) = f - f²/2 + s (f²/2 + R(s²)), R = sum c_k z^k."""
    return [2.0 / (2 * k + 1) for k in range(1, n + 1)]


def atan_series(n: int) -> list[float]:
    """atan(x) = x * sum (-1)^k x^(2k) / (2k+1), k = 0..n-1 (used for |x| <= tan(pi/24))."""
    return [(-1) ** k / (2 * k + 1) for k in range(n)]


def erf_series(n: int) -> list[float]:
    """erf(x) = x * sum a_k x^(2k): a_k = 2/sqrt(pi) (-1)^k / (k! (2k+1))."""
    c = 2 / _const("PI").sqrt()
    return [float(c * (-1) ** k / (math.factorial(k) * (2 * k + 1))) for k in range(n)]


def two_over_pi_words(nbits: int = 1344, pad_words: int = 2) -> list[int]:
    """The bits of 2/pi after the binary point as big-endian 32-bit words, preceded by
    `pad_words` zero words (the integer part and a margin for small exponents)."""
    from decimal import Decimal, localcontext
    with localcontext() as ctx:
        ctx.prec = nbits * 30 // 100 + 40
        two_pi = 2 / _pi_at(ctx.prec)
        v = int(two_pi * (Decimal(2) ** nbits))        # floor(2/pi * 2^nbits)
    words = []
    for i in range(nbits // 32):
        shift = nbits - 32 * (i + 1)
        words.append((v >> shift) & 0xFFFFFFFF)
    return [0] * pad_words + words


def _pi_at(prec: int) -> Decimal:
    from decimal import Decimal, localcontext
    with localcontext() as ctx:
        ctx.prec = prec + 10
        eps = Decimal(10) ** -(prec + 5)

        def atan_inv(n: int) -> Decimal:
            x = Decimal(1) / n
            x2, term, total, k = x * x, x, x, 1
            while True:
                term *= -x2
                d = term / (2 * k + 1)
                if abs(d) < eps:
                    return total
                total += d
                k += 1
        return 16 * atan_inv(5) - 4 * atan_inv(239)


def pio2_parts(bits: int, parts: int, to32: bool) -> list[float]:
    """pi/2 split into `parts` floats, the leading ones with `bits` significant bits."""
    return split(_const("PI") / 2, parts, bits, to32)
