"""8-bit floats (sm_89+): cvt to/from e4m3x2 and e5m2x2, and mma.sync m16n8k32 with e4m3."""

import numpy as np
import pytest

from emu_support import kernel_ptx
from test_emu_tensor import a_pos_s8, b_pos_s8, c_pos, fragments, run_mma, unfrag_c


def format_values(exp_bits, man_bits, max_finite):
    """Every finite non-negative value of the format, built from its definition."""
    bias = 2 ** (exp_bits - 1) - 1
    vals = [m * 2.0 ** (1 - bias - man_bits) for m in range(2 ** man_bits)]      # subnormals
    e = 1
    while True:
        row = [(1 + m / 2 ** man_bits) * 2.0 ** (e - bias) for m in range(2 ** man_bits)]
        vals += [v for v in row if v <= max_finite]
        if row[-1] >= max_finite:
            return np.array(vals)
        e += 1


E4M3 = format_values(4, 3, 448.0)
E5M2 = format_values(5, 2, 57344.0)


def round_ref(x, values):
    """Nearest value, ties to the even code; saturate to the largest finite value."""
    out = []
    for v in x:
        if np.isnan(v):
            out.append(np.nan)
            continue
        a = min(abs(float(v)), values[-1])
        k = int(np.argmin(np.abs(values - a)))
        if k + 1 < len(values) and abs(values[k + 1] - a) == abs(values[k] - a) and k % 2:
            k += 1
        out.append(np.copysign(values[k], v))
    return np.array(out)


@pytest.mark.parametrize("fmt,values", [("e4m3", E4M3), ("e5m2", E5M2)])
def test_cvt_f32_pairs_to_fp8_and_back(hw, rng, fmt, values):
    a = (rng.standard_normal(256) * np.exp2(rng.integers(-12, 12, 256))).astype(np.float32)
    b = (rng.standard_normal(256) * 4).astype(np.float32)
    a[:4] = [np.inf, -1e6, 0.5 * values[1], 1.5 * values[1]]
    op = (f"cvt.rn.satfinite.{fmt}x2.f32 %h9, {{a}}, {{b}};\n"
          f"  cvt.rn.f16x2.{fmt}x2 {{d}}, %h9;")
    got = hw.elementwise(op, [a, b], np.uint32)
    halves = got.view(np.float16).reshape(-1, 2).astype(np.float64)   # (lo, hi)
    assert np.array_equal(halves[:, 1], round_ref(a, values).astype(np.float16), equal_nan=True)
    assert np.array_equal(halves[:, 0], round_ref(b, values).astype(np.float16), equal_nan=True)


def test_cvt_f16x2_to_e4m3x2_relu(hw, rng):
    x = (rng.standard_normal(512) * 20).astype(np.float16)
    op = ("cvt.rn.satfinite.relu.e4m3x2.f16x2 %h9, {a};\n"
          "  cvt.rn.f16x2.e4m3x2 {d}, %h9;")
    got = hw.elementwise(op, [x.view(np.uint32)], np.uint32).view(np.float16)
    assert np.array_equal(got.astype(np.float64),
                          round_ref(np.maximum(x.astype(np.float64), 0), E4M3))


def test_mma_m16n8k32_e4m3(hw, rng):
    # small integers are exact in e4m3: codes for 0..7 and negatives
    A = rng.integers(-6, 7, (16, 32)).astype(np.float64)
    B = rng.integers(-6, 7, (32, 8)).astype(np.float64)
    enc = lambda m: np.vectorize(lambda v: (0x80 | int(np.flatnonzero(E4M3 == -v)[0]))
                                 if v < 0 else int(np.flatnonzero(E4M3 == v)[0]))(m)
    Aw = fragments(enc(A), a_pos_s8, 16, 8)
    Bw = fragments(enc(B), b_pos_s8, 8, 8)
    Cw = fragments(np.zeros((16, 8), np.float32).view(np.uint32), c_pos, 4, 32)
    out, _ = run_mma(hw, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                     "{d}, {a}, {b}, {c};", 4, 2, Aw, Bw, Cw)
    D = unfrag_c(out).view(np.float32)[0]
    assert np.array_equal(D, (A @ B).astype(np.float32))
