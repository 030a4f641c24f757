"""The test suite's correctly rounded reference (tests/correctly_rounded.py) against values known
independently: Python's `decimal` (whose exp, ln, log10 and sqrt are correctly rounded) and
hand-worked cases — ties to even, subnormals, overflow, signed zeros and C99 special values."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

from correctly_rounded import correctly_rounded


@pytest.mark.parametrize("name,dec", [("exp", Decimal.exp), ("log", Decimal.ln),
                                      ("log10", Decimal.log10), ("sqrt", Decimal.sqrt)])
def test_agrees_with_decimal_in_f64(name, dec):
    rng = np.random.default_rng(3)
    if name == "exp":
        x = rng.uniform(-700, 700, 300)
    else:
        x = np.ldexp(rng.uniform(1, 2, 300), rng.integers(-1000, 1000, 300))
    with localcontext() as ctx:
        ctx.prec = 80
        want = [float(dec(Decimal(float(v)))) for v in x]    # Decimal -> float rounds once
    assert correctly_rounded(name, [x], np.float64).tolist() == want


def test_ties_round_to_even_and_sticky_bits_decide():
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: exactly halfway in f32, to the even neighbour
    x = np.float32(1 + 2.0 ** -12)
    assert correctly_rounded("pow", [[x], [2.0]], np.float32)[0] == np.float32(1 + 2.0 ** -11)
    # (1 + 2^-12 + 2^-23)^2 lies just above a tie: up
    y = np.float32(1 + 2.0 ** -12 + 2.0 ** -23)
    exact = (1 + 2.0 ** -12 + 2.0 ** -23) ** 2        # exact in f64 (48 bits)
    assert correctly_rounded("pow", [[y], [2.0]], np.float32)[0] == np.float32(exact)


def test_subnormals_overflow_and_signed_zeros():
    f32 = np.float32
    # e^-104 is below half the least f32 subnormal; e^-103.5 rounds up to it
    assert correctly_rounded("exp", [[-104.0, -103.5]], f32).tolist() == [0.0, 2.0 ** -149]
    assert correctly_rounded("exp", [[11.0898, 11.1]], np.float16).tolist() == [65504.0, math.inf]
    r = correctly_rounded("sin", [[-0.0, 0.0, -1e-45]], f32)
    assert [math.copysign(1, v) for v in r] == [-1, 1, -1] and r[2] == f32(-1e-45)
    assert math.copysign(1, correctly_rounded("cos", [[1e-30]], f32)[0]) == 1


def test_c99_special_values():
    nan, inf = math.nan, math.inf
    got = correctly_rounded("pow", [[nan, 1.0, -0.0, -0.0, -inf, -2.0, -1.0],
                                    [0.0, nan, -3.0, -2.0, 3.0, 0.5, inf]], np.float64)
    assert got.tolist()[:5] == [1.0, 1.0, -inf, inf, -inf] and math.isnan(got[5])
    assert got[6] == 1.0
    a = correctly_rounded("atan2", [[0.0, -0.0, -0.0, inf, -inf], [-0.0, -0.0, 1.0, -inf, 2.0]],
                          np.float64).tolist()
    assert a == [math.pi, -math.pi, -0.0, 3 * math.pi / 4, -math.pi / 2]
    assert math.copysign(1, a[2]) == -1
    assert correctly_rounded("hypot", [[inf], [nan]], np.float64)[0] == inf
    u = correctly_rounded("asin", [[2.0, -1.0]], np.float32)
    assert math.isnan(u[0]) and u[1] == np.float32(-math.pi / 2)
    assert correctly_rounded("atanh", [[1.0, -1.0]], np.float64).tolist() == [inf, -inf]
    assert correctly_rounded("rsqrt", [[-0.0, 0.0, inf]], np.float32).tolist() == [-inf, inf, 0]
    assert correctly_rounded("log", [[0.0, -0.0, -1.0]], np.float32)[:2].tolist() == [-inf, -inf]
