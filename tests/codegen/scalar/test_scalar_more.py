"""The rounding, classification and extra float functions (round rint trunc sign isnan isinf
isfinite copysign fmod hypot log10 log1p expm1 cbrt tan atan asin acos sinh cosh asinh acosh
atanh) on the emulator: the exact ones bit for bit against NumPy (and equal to the registry's
reference), the others within the ulp bounds of docs/numerics.md against correctly rounded values
(tests/correctly_rounded.py: NumPy's own transcendentals vary by a few ulps between CPUs),
special values included; the PTX links."""

from __future__ import annotations

import numpy as np
import pytest

from correctly_rounded import correctly_rounded
from scalar_support import KernelBatch, assert_same, dtype, link_all, reference, ulp_distance

EXACT_UNARY = {"trunc": np.trunc, "rint": np.rint, "round": np.rint, "sign": np.sign}
CLASSIFY = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
ROUGH_UNARY = ("log10", "log1p", "expm1", "cbrt", "tan", "atan", "asin", "acos", "sinh", "cosh",
               "asinh", "acosh", "atanh")
BINARY = {"copysign": np.copysign, "fmod": np.fmod, "hypot": None}
# NumPy's routines aim at 4 ulps in float32 (SIMD paths), fewer in float64; the registry's
# reference is NumPy
NUMPY_ULPS = 4
# ulps against the exact value rounded to the dtype (docs/numerics.md)
BOUND = {n: dict.fromkeys([*ROUGH_UNARY, "hypot"], 2 if n == "f64" else 1)
         for n in ("f32", "f64", "f16")}
BOUND["f64"]["atanh"] = 3


def _values(name: str, rng) -> np.ndarray:
    npd = dtype(name).storage_np_dtype
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1.0, -1.0,
            1e-30, -1e-30, 1e-7, -1e-7, 3.0, 27.0, -8.0, 0.9999, -0.9999, 88.0, -88.0, 700.0,
            705.9]   # expm1(705.9) is finite in f64: (u - 1) x / log u must not overflow
    big = np.finfo(npd).max
    rand = np.concatenate([rng.standard_normal(300), rng.uniform(-30, 30, 300),
                           # magnitudes e^-60..e^60 (exact: NumPy's exp varies by CPU)
                           np.ldexp(rng.uniform(1, 2, 300), rng.integers(-87, 87, 300))
                           * rng.choice([-1, 1], 300),
                           rng.uniform(-1, 1, 100) * 1e-9, rng.uniform(-1, 1, 200),
                           [1.5707963267948966, -1.5707963267948966, 1e17, 710.0],
                           1 + np.ldexp(rng.uniform(1, 2, 100), rng.integers(-58, 5, 100))])
    with np.errstate(all="ignore"):
        x = np.concatenate([edge, [big, -big, np.finfo(npd).tiny], rand]).astype(npd)
    if name == "f64":
        x = np.concatenate([x, [5e-324, 1e300, -1e300, 0.1, 1e-300]])
    return x


@pytest.fixture(scope="module")
def ran():
    rng = np.random.default_rng(11)
    kb = KernelBatch("sm_90a")
    for name in ("f32", "f64", "f16"):
        d = dtype(name)
        x = _values(name, rng)
        y = np.roll(x, 7)
        for op in (*EXACT_UNARY, *CLASSIFY, *ROUGH_UNARY):
            kb.add(op, [x], [d])
        for op in BINARY:
            kb.add(op, [x, y], [d, d])
    for name in ("i8", "i32", "u16"):
        d = dtype(name)
        i = np.array([-5, 0, 7, -128, 127, 1, -1], np.int64)
        i = i.astype(d.storage_np_dtype)
        for op in ("trunc", "rint", "round", "sign", "isnan", "isinf", "isfinite"):
            kb.add(op, [i], [d])
    kb.compile()
    link_all(kb.ptx, ("sm_90a",))
    return kb.run()


def test_exact_ones_bit_for_bit(ran):
    for c in ran:
        if c.op in ROUGH_UNARY or c.op == "hypot":
            continue
        _, ref = reference(c.op, c.operands, c.dts)
        assert_same(c.out, ref, c.operands, f"{c.op} {c.dts[0]}")
        fn = {**EXACT_UNARY, **CLASSIFY, **BINARY}[c.op]
        with np.errstate(all="ignore"):
            ops = [np.asarray(o) for o in c.operands]
            want = fn(*ops)
        if c.op == "sign" and c.dts[0].is_float:
            want = np.where(want == 0, 0.0, want).astype(ops[0].dtype)   # NumPy: sign(-0) = 0
        assert_same(c.out, want, c.operands, f"{c.op} {c.dts[0]} vs NumPy")


@pytest.mark.parametrize("name", ["f32", "f64", "f16"])
def test_float_functions_within_their_ulp_bounds(ran, name):
    npd = dtype(name).storage_np_dtype
    measured = set()
    for c in ran:
        if c.dts[0] != dtype(name) or not (c.op in ROUGH_UNARY or c.op == "hypot"):
            continue
        want = correctly_rounded(c.op, c.operands, npd)
        d = ulp_distance(c.out, want, npd)
        worst = int(d.max())
        bad = np.flatnonzero(d > BOUND[name][c.op])[:4]
        assert worst <= BOUND[name][c.op], (c.op, name, worst,
                                            [(c.operands[0][i], c.out[i], want[i]) for i in bad])
        measured.add(c.op)
        # the registry's reference (NumPy in the dtype; the interpreter's) is near the exact
        # value too, within what NumPy's own routines promise
        _, ref = reference(c.op, c.operands, c.dts)
        assert int(ulp_distance(ref, want, npd).max()) <= BOUND[name][c.op] + NUMPY_ULPS
    assert measured == {*ROUGH_UNARY, "hypot"}
