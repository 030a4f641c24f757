"""codegen/scalar/rounding.py (plain Python, on the compile path) against the registry's NumPy
reference (sema `round_to_dtype`, `to_bits`): every f16 and f8 value, the midpoints between
neighbours and the values just beside them, the ends of each range, and random doubles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilelang.codegen.scalar import rounding as R
from tilelang.sema.builtins_dtype import to_bits
from tilelang.sema.types import DTYPES, round_to_dtype


def _around(values: np.ndarray) -> list[float]:
    """The values, the midpoints of neighbours and the doubles just beside each of those."""
    v = np.unique(values[np.isfinite(values)].astype(np.float64))
    mids = (v[1:] + v[:-1]) / 2
    pts = np.concatenate([v, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    return pts.tolist()


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1.0, -1.0, 0.1, 1e-300, 1e300,
           -1e300, 5e-324, 3.4028234663852886e38, 3.4028235677973366e38, 3.402823669209385e38,
           65504.0, 65519.99, 65520.0, -65520.0, 6e-8, 2.9802322387695312e-08, 1.4e-45,
           7.006492321624085e-46, 7.006492321624087e-46, 448.0, 464.0, 464.1, 57344.0, 61440.0]


def _random(n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    mags = np.exp2(rng.uniform(-160, 140, n))
    return (mags * rng.choice([-1.0, 1.0], n)).tolist()


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                  math.copysign(1, b))


def _all_f16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16)


def _all_f32_edges() -> np.ndarray:
    # every f32 exponent's first, second and last two values, both signs
    e = np.arange(256, dtype=np.uint32) << 23
    bits = np.concatenate([e, e + 1, e + 0x7FFFFF, e + 0x7FFFFE])
    bits = np.concatenate([bits, bits | 0x80000000])
    return bits.view(np.float32)


def _all_bf16() -> np.ndarray:
    return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


def _points(name: str, seed: int) -> list[float]:
    """SPECIAL, random doubles, and around every value of the format (f32, tf32 and f64:
    around the ends of every f32 binade)."""
    from tilelang.sema.builtins_dtype import F8_DECODE
    values = {"f16": _all_f16, "bf16": _all_bf16}.get(name, _all_f32_edges)()
    if name in F8_DECODE:
        values = np.asarray(F8_DECODE[name])
    return SPECIAL + _random(5000, seed) + _around(values)


@pytest.mark.parametrize("name", ["f16", "f32", "bf16", "tf32", "f8e4m3", "f8e5m2", "f64"])
def test_round_to_matches_the_registry(name):
    dt = DTYPES[name]
    pts = _points(name, 1)
    with np.errstate(all="ignore"):
        want = round_to_dtype(np.array(pts, np.float64), dt).astype(np.float64).tolist()
    got = [R.round_to(x, dt) for x in pts]
    bad = [(x, g, w) for x, g, w in zip(pts, got, want) if not _same(g, w)]
    assert not bad, bad[:5]


def test_f32_bits():
    pts = _points("f32", 2)
    with np.errstate(all="ignore"):
        want = np.array(pts, np.float64).astype(np.float32)
    assert [R.f32_bits(x) for x in pts] == want.view(np.uint32).tolist()


@pytest.mark.parametrize("name", ["bf16", "f8e4m3", "f8e5m2"])
def test_bit_patterns_match_to_bits(name):
    dt = DTYPES[name]
    pts = _points(name, 3) + np.linspace(-70000, 70000, 2001).tolist()
    with np.errstate(all="ignore"):
        want = to_bits(np.array(pts, np.float64), dt).astype(np.int64).tolist()
    fn = R.bf16_bits if name == "bf16" else (lambda x: R.f8_code(x, dt))
    got = [fn(x) for x in pts]
    bad = [(x, g, w) for x, g, w in zip(pts, got, want) if g != w]
    assert not bad, bad[:5]


def test_every_f8_code_round_trips():
    """Each of the 256 codes decodes (the registry's table) to a value that encodes back to it
    (the NaN codes to the canonical NaN)."""
    from tilelang.sema.builtins_dtype import F8_DECODE
    for name in ("f8e4m3", "f8e5m2"):
        table = F8_DECODE[name]
        for code in range(256):
            v = float(table[code])
            want = 0x7F if math.isnan(v) else code   # the table's NaNs carry no sign
            assert R.f8_code(v, DTYPES[name]) == want, (name, hex(code), v)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "**"])
def test_constant_folding_arithmetic_is_numpys(op):
    """sema folds `a op b` of float constants as NumPy's float64 does: in plain Python (no
    NumPy import) for every operator but `**`, zero divisors and infinities included."""
    from tilelang.sema.constants import _float_op
    rng = np.random.default_rng(7)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e308, -1e308, 5e-324, -5e-324, 1e-310,
            math.inf, -math.inf, math.nan, -math.nan, 0.1, 2.0 ** 53, 1 / 3] + \
        (np.exp(rng.uniform(-40, 40, 60)) * rng.choice([-1, 1], 60)).tolist() + \
        rng.integers(-9, 9, 20).astype(float).tolist()
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
          "//": np.floor_divide, "%": np.mod, "**": np.power}[op]
    bad = []
    for x in vals:
        for y in vals:
            with np.errstate(all="ignore"):
                want = float(fn(np.float64(x), np.float64(y)))
            if not _same(_float_op(op, x, y), want):
                bad.append((x, y, _float_op(op, x, y), want))
    assert not bad, bad[:5]
