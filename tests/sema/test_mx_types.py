"""The block-scaled formats as dtypes (docs/language.md "Block-scaled formats"): f4e2m1,
f6e2m3, f6e3m2 and ue8m0. Values and codes against ml_dtypes (an independent implementation
of the OCP MX formats) and against the emulator's `cvt` encoders; constants; the diagnostics
for arithmetic on them."""

from __future__ import annotations

import numpy as np
import pytest

from sema_helpers import errors_of, run_check
from tilelang.diagnostics import render
from tilelang.sema import constants as C
from tilelang.sema.builtins_dtype import from_bits, to_bits
from tilelang.sema.types import DTYPES, round_scalar, round_to_dtype

ml_dtypes = pytest.importorskip("ml_dtypes")

ML = {"f4e2m1": ml_dtypes.float4_e2m1fn, "f6e2m3": ml_dtypes.float6_e2m3fn,
      "f6e3m2": ml_dtypes.float6_e3m2fn}
WIDTH = {"f4e2m1": 4, "f6e2m3": 6, "f6e3m2": 6}


def _values(top: float) -> np.ndarray:
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(4000) * top / 3,
                        np.exp(rng.uniform(-14, np.log(top), 4000)) * rng.choice([-1, 1], 4000)])
    return x[np.abs(x) <= top]


@pytest.mark.parametrize("name", sorted(ML))
def test_rounding_and_codes_match_ml_dtypes(name):
    d = DTYPES[name]
    x = _values(d.max_finite)
    ml = x.astype(ML[name])
    got = round_to_dtype(x, d)
    assert np.array_equal(got.astype(np.float64), ml.astype(np.float64))
    assert np.array_equal(to_bits(got, d), np.asarray(ml).view(np.uint8))
    every = np.arange(1 << WIDTH[name], dtype=np.uint8)
    assert np.array_equal(from_bits(every, d).astype(np.float64),
                          every.view(ML[name]).astype(np.float64))
    for v in x[:200]:                   # constants round in plain Python, the same way
        assert round_scalar(float(v), d) == float(got[np.flatnonzero(x == v)[0]])


@pytest.mark.parametrize("name", sorted(ML))
def test_saturation_and_nan_follow_the_emulated_cvt(name):
    from tilelang.emulator import fp8
    d = DTYPES[name]
    x = np.array([np.nan, np.inf, -np.inf, 1e9, -1e9, d.max_finite * 1.2, 0.0, -0.0, 1e-30])
    codes = fp8.encode(x, name[2:])
    assert np.array_equal(to_bits(round_to_dtype(x, d), d), codes)
    assert round_to_dtype(np.array([np.nan]), d)[0] == d.max_finite   # no NaN: the largest


def test_ue8m0_values_codes_and_rounding():
    from tilelang.emulator import fp8
    d = DTYPES["ue8m0"]
    every = np.arange(256, dtype=np.uint8)
    want = every.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    got = from_bits(every, d).astype(np.float64)
    assert np.array_equal(got[:255], want[:255]) and np.isnan(got[255]) and np.isnan(want[255])
    x = np.array([0.0, 1.0, 1.5, 3.0, -3.0, 2.0 ** -130, 2.0 ** -127, 1e39, np.inf, np.nan])
    r = round_to_dtype(x, d)
    assert np.array_equal(to_bits(r, d), fp8.encode_ue8m0(x, "rp", satfinite=True))
    assert [round_scalar(float(v), d) for v in x[:-1]] == r[:-1].astype(np.float64).tolist()
    assert d.min == 2.0 ** -127 and d.max == 2.0 ** 127


def test_constants_out_of_range_and_negative_scales_are_refused():
    r = run_check("kernel k(c: Array[f32, 1]) {\n    let x = f4e2m1(7.0);\n"
                  "    let y = ue8m0(-1.0);\n    store(c, (0,), astype(x, f32));\n}\n")
    errs = errors_of(r)
    assert [e.message for e in errs] == ["float constant 7.0 does not fit in f4e2m1",
                                        "float constant -1.0 does not fit in ue8m0"]
    assert errs[0].help == "f4e2m1 holds finite values up to ±6.0"
    assert errs[1].help == ("ue8m0 holds positive values 2^-127 to 2^127 (they round up to a "
                            "power of two)")
    assert C.fits(6.0, DTYPES["f4e2m1"]) and C.fits(0.25, DTYPES["ue8m0"])


@pytest.mark.parametrize("name", ["f4e2m1", "f6e2m3", "f6e3m2", "ue8m0"])
def test_arithmetic_on_a_block_scaled_format_is_refused_with_a_span(name):
    src = (f"kernel k(a: Array[{name}, 1], c: Array[f32, 1]) {{\n"
           f"    let x = load(a, (0,), (16,));\n    store(c, (0,), x * x);\n}}\n")
    errs = errors_of(run_check(src))
    assert len(errs) == 1 and errs[0].code == "E0311"
    assert render(errs[0]).splitlines()[:2] == [
        f"error[E0311]: the left operand of `*` cannot be Tile[{name}, 16]",
        " --> t.tile:3:20"]
    assert errs[0].help == (f"{name} is a restricted float: only load, store, astype, bitcast "
                            f"and mma_scaled accept it; convert with `astype(x, f32)` first")
