"""Arithmetic sm_100 added that Triton's Blackwell kernels use: packed `.f32x2` add/sub/mul/
fma on 64-bit registers (each half an f32, rounded on its own) and three-source `min/max.f32`
(PTX ISA 8.6/8.8), against NumPy float32 and exact arithmetic."""

from fractions import Fraction

import numpy as np
import pytest

import emu_support
from emu_support import Harness
from tilelang.emulator.errors import PTXParseError


@pytest.fixture
def hw100(monkeypatch):
    monkeypatch.setattr(emu_support, "HEADER", ".version 8.8\n.target sm_100a\n"
                        ".address_size 64\n")
    return Harness()


def _pairs(rng, n=256):
    x = (rng.standard_normal((n, 2)) * np.exp2(rng.integers(-30, 30, (n, 2)))).astype(np.float32)
    x[:4] = [[np.inf, -0.0], [np.nan, 1.0], [3e38, 3e38], [1e-45, -1e-45]]
    return x


@pytest.mark.parametrize("op,f", [("add", np.add), ("sub", np.subtract),
                                  ("mul", np.multiply)])
def test_packed_f32x2_halves_round_on_their_own(hw100, op, f):
    rng = np.random.default_rng(len(op))
    a, b = _pairs(rng), _pairs(rng)
    got = hw100.elementwise(f"{op}.rn.f32x2 {{d}}, {{a}}, {{b}};", [a.view(np.uint64).ravel(),
                                                                  b.view(np.uint64).ravel()],
                            np.uint64)
    with np.errstate(all="ignore"):
        want = f(a, b)
    assert np.array_equal(got.view(np.float32).reshape(-1, 2), want, equal_nan=True)


def test_packed_f32x2_rz_and_fma(hw100):
    rng = np.random.default_rng(2)
    a, b, c = _pairs(rng, 136)[8:], _pairs(rng, 136)[8:], _pairs(rng, 136)[8:]
    got = hw100.elementwise("mul.rz.f32x2 {d}, {a}, {b};", [a.view(np.uint64).ravel(),
                                                            b.view(np.uint64).ravel()],
                            np.uint64).view(np.float32).reshape(-1, 2)
    for x, y, r in zip(a.ravel(), b.ravel(), got.ravel()):
        if abs(np.float64(x) * np.float64(y)) < 3e38:
            exact = Fraction(float(x)) * Fraction(float(y))
            assert abs(Fraction(float(r))) <= abs(exact)           # toward zero
            assert abs(exact - Fraction(float(r))) < abs(Fraction(float(np.spacing(r)))) or \
                exact == 0
    got = hw100.elementwise("fma.rn.f32x2 {d}, {a}, {b}, {c};",
                            [a.view(np.uint64).ravel(), b.view(np.uint64).ravel(),
                             c.view(np.uint64).ravel()], np.uint64).view(np.float32)
    for x, y, z, r in zip(a.ravel(), b.ravel(), c.ravel(), got.ravel()):
        if np.isfinite([x, y, z]).all() and abs(np.float64(x) * y + z) < 3e38:
            exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            assert r == _round_f32(exact)                          # one rounding, fused


def _round_f32(q: Fraction) -> np.float32:
    """The float32 nearest to q, ties to the even significand."""
    r = np.float32(float(q))
    cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    best = min(cands, key=lambda v: (abs(Fraction(float(v)) - q),
                                     int(np.float32(v).view(np.uint32)) & 1))
    return best


@pytest.mark.parametrize("op", ["min", "max"])
def test_three_source_min_max(hw100, op):
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(256).astype(np.float32) for _ in range(3))
    a[:3], b[:3], c[:3] = [np.nan, 1.0, np.nan], [2.0, np.nan, np.nan], [1.0, 3.0, np.nan]
    f = np.fmin if op == "min" else np.fmax
    got = hw100.elementwise(f"{op}.f32 {{d}}, {{a}}, {{b}}, {{c}};", [a, b, c], np.float32)
    assert np.array_equal(got, f(f(a, b), c), equal_nan=True)    # NaN only if all three are
    g = np.minimum if op == "min" else np.maximum
    got = hw100.elementwise(f"{op}.NaN.f32 {{d}}, {{a}}, {{b}}, {{c}};", [a, b, c], np.float32)
    assert np.array_equal(got, g(g(a, b), c), equal_nan=True)


def test_f32x2_needs_sm_100(hw):
    a = np.ones(64, np.uint64)
    with pytest.raises(PTXParseError, match=r"add.rn.f32x2 needs sm_100 or newer"):
        hw.elementwise("add.rn.f32x2 {d}, {a}, {b};", [a, a], np.uint64)
