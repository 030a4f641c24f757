"""Host conversions of the block-scaled formats (tilelang.runtime.mx_formats) against the
emulator's decode tables, which are built from the formats' definitions (fp8.py): every code
of every format, rounding on every f16 value, the f4 nibble order, and the refusals."""

import numpy as np
import pytest

from tilelang.emulator import fp8
from tilelang.runtime import mx_formats as mx

FORMATS = {"f4e2m1": ("e2m1", 16), "f6e2m3": ("e2m3", 64), "f6e3m2": ("e3m2", 64)}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_code_round_trips_and_matches_the_definition(fmt):
    emu, n = FORMATS[fmt]
    c = np.arange(n, dtype=np.uint8)
    v = mx.values(c, fmt)
    assert np.array_equal(v, fp8.decode(c, emu)) and np.array_equal(np.signbit(v),
                                                                   np.signbit(fp8.decode(c, emu)))
    assert np.array_equal(mx.codes(v, fmt), c)


def test_every_scale_code():
    c = np.arange(255, dtype=np.uint8)                  # 0xFF is NaN: not a scale
    v = mx.values(c, "ue8m0")
    assert np.array_equal(v, 2.0 ** (c.astype(np.float64) - 127))
    assert np.array_equal(mx.codes(v, "ue8m0"), c)
    e = np.arange(128, dtype=np.uint8)                  # e4m3 scales: the non-negative codes
    ve = mx.values(e[:-1], "f8e4m3")                    # 0x7F is NaN
    assert np.array_equal(ve, fp8.decode(e[:-1], "e4m3"))
    assert np.array_equal(mx.codes(ve, "f8e4m3"), e[:-1])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_rounding_on_every_f16_value(fmt):
    emu, _ = FORMATS[fmt]
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    top = float(fp8.decode(np.arange(FORMATS[fmt][1]), emu).max())
    x = x[np.isfinite(x) & (np.abs(x) <= top)]
    assert np.array_equal(mx.codes(x, fmt), fp8.encode(x, emu))


def test_f4_packs_the_lower_element_in_the_low_nibble():
    assert mx.pack_f4e2m1([0.5, 6.0, -1.0, 0.0]).tolist() == [0x71, 0x0A]
    b = np.arange(256, dtype=np.uint8)
    assert np.array_equal(mx.pack_f4e2m1(mx.unpack_f4e2m1(b)), b)
    assert mx.unpack_f4e2m1(np.array([[0x71]], np.uint8)).tolist() == [[0.5, 6.0]]


@pytest.mark.parametrize("call,message", [
    (lambda: mx.codes([7.0], "f4e2m1"), r"7.0 cannot be stored as f4e2m1: values must be "
                                        r"finite and at most 6 in magnitude"),
    (lambda: mx.codes([np.nan], "f6e3m2"), r"cannot be stored as f6e3m2"),
    (lambda: mx.codes([0.0], "ue8m0"), r"0.0 cannot be stored as ue8m0: values must be "
                                       r"positive"),
    (lambda: mx.codes([-2.0], "f8e4m3"), r"f8e4m3 scales are non-negative"),
    (lambda: mx.pack_f4e2m1([1.0, 2.0, 3.0]), r"the last axis \(3\) must be even"),
    (lambda: mx.codes([1.0], "f5"), r"unknown block-scaled format 'f5'"),
])
def test_refusals(call, message):
    with pytest.raises(ValueError, match=message):
        call()
