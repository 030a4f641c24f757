"""Constants rounded to a narrow float format, and their bit patterns, in plain Python.

Code generation only needs these one value at a time, so they use `struct` (f32 via 'f' and
f16 via 'e': both round a double to nearest even, and raise OverflowError where the result
would be infinite) and bit arithmetic, never NumPy or ml_dtypes, whose imports would cost more
than a whole small compile. The results are the registry's (sema/types.py `round_to_*`,
builtins_dtype.py `to_bits`), which tests/codegen/scalar/test_rounding.py checks value for value.
"""

from __future__ import annotations

import math
import struct

from tilelang.sema.types import BF16, DType, round_scalar

_F8 = {"f8e4m3": (3, 7, 0x7F), "f8e5m2": (2, 15, 0x7C)}  # fraction bits, bias, code of inf


def _narrow(fmt: str, x: float) -> float:
    try:
        return struct.unpack(fmt, struct.pack(fmt, x))[0]
    except OverflowError:               # finite, but rounds past the largest value
        return math.copysign(math.inf, x)


def f32(x: float) -> float:
    """The f32 value nearest to `x` (ties to even; ±inf past the range)."""
    return _narrow("<f", float(x))


def f16(x: float) -> float:
    """The f16 value nearest to `x` (ties to even; ±inf past the range)."""
    return _narrow("<e", float(x))


def f32_bits(x: float) -> int:
    """The bit pattern of f32(x) (NaN: the quiet NaN with x's sign)."""
    return struct.unpack("<I", struct.pack("<f", f32(x)))[0]


def bf16_bits(x: float) -> int:
    """The bf16 bit pattern of the bf16 value nearest to `x` (ties to even, overflow to inf):
    the top half of the f32 that holds it exactly."""
    return f32_bits(round_scalar(float(x), BF16)) >> 16


def round_to(x: float, dtype: DType) -> float:
    """`x` rounded to a float dtype's value (what `astype` gives a constant); f64 as it is."""
    name = dtype.name
    if name == "f32":
        return f32(x)
    if name == "f16":
        return f16(x)
    if name == "f64":
        return float(x)
    return f32(round_scalar(float(x), dtype))   # bf16, tf32, f8: exact in f32


def f8_code(x: float, dtype: DType) -> int:
    """The f8 code of `x` (`to_bits`): rounded to nearest even, finite overflow saturating,
    an infinity kept (e4m3 has none: its NaN code), NaN 0x7F; the sign bit as x's."""
    mant, bias, inf_code = _F8[dtype.name]
    x = float(x)
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return 0x7F | sign
    if math.isinf(x):
        return inf_code | sign
    return sign | magnitude_code(abs(round_scalar(x, dtype)), bias, mant)


def magnitude_code(a: float, bias: int, mant: int) -> int:
    """The exponent and mantissa fields of a non-negative value `a` that the small float
    format (`bias`, `mant` mantissa bits) holds exactly: 0 for zero, the subnormal step's
    multiple below the smallest normal."""
    if a == 0:
        return 0
    m, e = math.frexp(a)                # a = m * 2^e, 0.5 <= m < 1
    field = e - 1 + bias
    if field >= 1:
        return field << mant | int((m * 2 - 1) * (1 << mant))
    return int(a / 2.0 ** (1 - bias - mant))   # subnormal: a multiple of the step
