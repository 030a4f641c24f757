"""The OCP MX element formats of sm_100a/sm_120a in the emulator: e2m1 (4 bits), e2m3 and
e3m2 (6 bits) and the scale format ue8m0, decoded bit-exactly as ml_dtypes does for every
code, rounded as ml_dtypes rounds, and the `cvt` forms that pack them (PTX ISA: a's value in
the upper half of d, b's in the lower; 6-bit values padded with two zero bits)."""

import math

import ml_dtypes
import numpy as np
import pytest

import emu_support
from emu_support import Harness
from tilelang.emulator import fp8
from tilelang.emulator.errors import PTXParseError

ML = {"e2m1": (ml_dtypes.float4_e2m1fn, 4), "e2m3": (ml_dtypes.float6_e2m3fn, 6),
      "e3m2": (ml_dtypes.float6_e3m2fn, 6)}


def ml_decode(fmt):
    """ml_dtypes' value of every code (its sub-byte types hold one code per byte)."""
    t, width = ML[fmt]
    codes = np.arange(1 << width, dtype=np.uint8)
    return codes.view(t).astype(np.float64)


@pytest.mark.parametrize("fmt", sorted(ML))
def test_every_code_decodes_as_ml_dtypes(fmt):
    ref = ml_decode(fmt)
    got = fp8.decode(np.arange(len(ref)), fmt)
    assert np.array_equal(got, ref) and np.array_equal(np.signbit(got), np.signbit(ref))


def test_every_ue8m0_code_decodes_as_ml_dtypes():
    ref = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    got = fp8.decode_ue8m0(np.arange(256))
    assert np.array_equal(got, ref, equal_nan=True) and np.isnan(got[255])


@pytest.mark.parametrize("fmt", sorted(ML))
def test_rounding_matches_ml_dtypes_on_every_f16(fmt):
    t, width = ML[fmt]
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    top = float(ml_decode(fmt).max())
    inside = np.isfinite(x) & (np.abs(x) <= top)
    want = x[inside].astype(t).view(np.uint8)
    assert np.array_equal(fp8.encode(x[inside], fmt), want)
    # .satfinite: beyond the largest value (infinities too) clamps to it, sign kept; NaN
    # becomes the positive largest value (no NaN in these formats)
    big = np.array([top * 1.01, 1e30, np.inf, -np.inf, -top * 4, np.nan])
    codes = fp8.encode(big, fmt)
    assert list(fp8.decode(codes, fmt)) == [top, top, top, -top, -top, top]


def _ue8m0_reference(v, mode, satfinite):
    """From the definition, one value at a time in exact arithmetic."""
    if math.isnan(v):
        return 255
    a = abs(v)
    if math.isinf(a):
        return 254 if satfinite else 255
    if a == 0:
        return 0
    m, e = math.frexp(a)                       # a = m 2^e, 0.5 <= m < 1
    k = e - 1 if (mode == "rz" or m == 0.5) else e
    c = min(max(k + 127, 0), 255)
    return 254 if (c == 255 and satfinite) else c


@pytest.mark.parametrize("mode", ["rz", "rp"])
@pytest.mark.parametrize("satfinite", [False, True])
def test_ue8m0_rounding_toward_zero_and_up(mode, satfinite):
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2 ** 32, 4000, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):          # signalling NaN payloads among the bits
        f = bits.view(np.float32).astype(np.float64)
    x = np.concatenate([f,
                        [0.0, 2.0 ** -127, 2.0 ** -130, 1.0, 1.5, 2.0 ** 127, 3e38, np.inf]])
    got = fp8.encode_ue8m0(x, mode, satfinite)
    assert list(got) == [_ue8m0_reference(float(v), mode, satfinite) for v in x]
    # a power of two is exact either way; ml_dtypes agrees on those
    p = 2.0 ** np.arange(-127, 128)
    assert np.array_equal(fp8.encode_ue8m0(p, mode, satfinite),
                          p.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8))


@pytest.fixture
def hw100(monkeypatch):
    monkeypatch.setattr(emu_support, "HEADER", ".version 8.7\n.target sm_100a\n"
                        ".address_size 64\n")
    return Harness()


def _f16x2_halves(words):
    h = np.asarray(words, np.uint32).view(np.float16).reshape(-1, 2).astype(np.float64)
    return h[:, 1], h[:, 0]                   # (upper, lower)


@pytest.mark.parametrize("fmt", sorted(ML))
@pytest.mark.parametrize("relu", [False, True])
def test_cvt_pairs_round_trip_through_f16x2(hw100, fmt, relu):
    rng = np.random.default_rng(len(fmt) + relu)
    a = (rng.standard_normal(256) * 3).astype(np.float32)
    b = (rng.standard_normal(256) * 9).astype(np.float32)
    a[:3] = [np.inf, -50.0, 0.3]
    r = ".relu" if relu else ""
    reg = "%b9" if fmt == "e2m1" else "%h9"          # e2m1x2 is a .b8 value
    op = (f".reg .b8 %b9;\n  cvt.rn.satfinite{r}.{fmt}x2.f32 {reg}, {{a}}, {{b}};\n"
          f"  cvt.rn.f16x2.{fmt}x2 {{d}}, {reg};")
    got = hw100.elementwise(op, [a, b], np.uint32)
    hi, lo = _f16x2_halves(got)
    t = ML[fmt][0]
    top = float(ml_decode(fmt).max())

    def ref(v):
        v = np.clip(v.astype(np.float64), -top, top)
        if relu:
            v = np.maximum(v, 0)
        return v.astype(t).astype(np.float64)
    assert np.array_equal(hi, ref(a)) and np.array_equal(lo, ref(b))


def test_cvt_packs_the_upper_half_from_a(hw100):
    # 6-bit values sit in the low 6 bits of each byte, the top two bits zero; e2m1 in nibbles
    a, b = np.full(64, 6.0, np.float32), np.full(64, -0.5, np.float32)
    got = hw100.elementwise("cvt.rn.satfinite.e2m3x2.f32 {d}, {a}, {b};", [a, b], np.uint16)
    e6, m05 = (int(np.float64(v).astype(ml_dtypes.float6_e2m3fn).view(np.uint8))
               for v in (6.0, -0.5))
    assert set(got.tolist()) == {(e6 << 8) | m05} and e6 < 64 and m05 < 64
    got4 = hw100.elementwise(".reg .b8 %b9;\n  cvt.rn.satfinite.e2m1x2.f32 %b9, {a}, {b};\n"
                             "  cvt.u16.u8 {d}, %b9;", [a, b], np.uint16)
    assert set(got4.tolist()) == {(0x7 << 4) | 0x9}            # 6 = 0b0111, -0.5 = 0b1001


def test_cvt_ue8m0x2(hw100):
    rng = np.random.default_rng(8)
    a = np.abs(rng.standard_normal(128) * 1e3).astype(np.float32)
    b = np.abs(rng.standard_normal(128) * 1e-3).astype(np.float32)
    for mode in ("rz", "rp"):
        got = hw100.elementwise(f"cvt.{mode}.satfinite.ue8m0x2.f32 %h9, {{a}}, {{b}};\n"
                                f"  cvt.rn.bf16x2.ue8m0x2 {{d}}, %h9;", [a, b], np.uint32)
        hi = ((got >> 16) << 16).view(np.float32).astype(np.float64)
        lo = (got << 16).view(np.float32).astype(np.float64)
        want = {"rz": np.floor, "rp": np.ceil}[mode]
        assert np.array_equal(hi, 2.0 ** want(np.log2(a.astype(np.float64))))
        assert np.array_equal(lo, 2.0 ** want(np.log2(b.astype(np.float64))))


def test_mx_conversions_need_an_sm_100a_or_sm_120a_target(hw):
    a = np.ones(64, np.float32)
    with pytest.raises(PTXParseError, match=r"needs the arch-specific target sm_100a|needs "
                       r"sm_100 or newer"):
        hw.elementwise("cvt.rn.satfinite.e2m3x2.f32 {d}, {a}, {b};", [a, a], np.uint16)
