"""scalar/float_text.py and lower/debug.const_text, plain Python on the compile path, against
NumPy's own `str` (what the interpreter's `print` writes): samples of every f16 value, random
f32 and f64 bit patterns, the ends of every binade and the layout's switch points."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.codegen.lower.debug import const_text
from tilelang.codegen.scalar.float_text import float_text
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import DTYPES, round_to_dtype

SWITCH = [0.0, -0.0, 1e-4, 9.9e-5, 0.00010001, 999.0, 999.5, 1000.0, 65504.0, 999999.94,
          1e6, 1048576.0, 9999999999999998.0, 1e16, 0.1, 0.3, 1.5e-5, 5e-324, 1.4e-45,
          6e-8, 123456789.0, 1.7976931348623157e308, np.inf, -np.inf, np.nan]


# The text is NumPy 2's (positional below 1e3 for f16 and 1e6 for f32); NumPy 1.x writes
# scalars of every type positional up to 1e16, so its `str` is no reference there (the
# project supports NumPy 1.24: the interpreter's `print` then differs in that range).
numpy2 = pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0",
                            reason="the reference is NumPy 2's scalar text")


def _check(values: np.ndarray, fmt: str):
    bad = [(float(v), float_text(float(v), fmt), str(v)) for v in values
           if float_text(float(v), fmt) != str(v)]
    assert not bad, bad[:5]


@numpy2
def test_f16_every_seventh_value_and_the_ends():
    every = np.arange(0, 1 << 16, 7, dtype=np.uint16)
    ends = np.array([0x0000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0x8001, 0xFBFF], np.uint16)
    _check(np.concatenate([every, ends]).view(np.float16), "f16")
    with np.errstate(all="ignore"):
        _check(np.array(SWITCH).astype(np.float16), "f16")


@numpy2
def test_f32_random_and_binade_ends():
    rng = np.random.default_rng(5)
    e = np.arange(256, dtype=np.uint32) << 23
    bits = np.concatenate([rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32),
                           e, e + 1, e + 0x7FFFFF, e | 0x80000000])
    _check(bits.view(np.float32), "f32")
    with np.errstate(all="ignore"):
        _check(np.array(SWITCH).astype(np.float32), "f32")


def test_f64_random_and_switch_points():
    rng = np.random.default_rng(6)
    _check(rng.integers(0, 1 << 64, 2000, dtype=np.uint64).view(np.float64), "f64")
    _check(np.array(SWITCH, np.float64), "f64")


@pytest.mark.parametrize("name", ["f16", "bf16", "tf32", "f32", "f64", "f8e4m3", "f8e5m2",
                                  "i8", "u8", "i32", "u64", "bool"])
def test_const_text_is_the_interpreters(name):
    """`print` of a constant: the interpreter prints `str` of round_to_dtype's 0-d array."""
    dt = DTYPES[name]
    if dt.is_bool:
        values = [True, False]
    elif dt.is_int:
        values = [0, 1, -1, 5, dt.min, dt.max, dt.max // 3]
    else:
        values = [0.1, -2.5, 1e-5, 300.0, 0.3, 7.0, 1e-7, -0.0]
    for v in values:
        with np.errstate(all="ignore"):
            want = str(np.asarray(round_to_dtype(np.asarray(v), dt)))
        assert const_text(ConstValue(v, dt)) == want, (name, v)


def test_const_text_of_loose_constants():
    for v in [0.1, 1e16, 1e15, 1e-5, 3, -7, True, 2.0 ** 70, 12345678901234567890]:
        assert const_text(ConstValue(v)) == str(np.asarray(v)), v
