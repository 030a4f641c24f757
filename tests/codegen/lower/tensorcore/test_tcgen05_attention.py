"""examples/attention.tile on sm_100a (docs/codegen.md, "sm_100a"): both of its products,
s = q @ k^T and acc = p @ v with BM = 64 query rows, run on tcgen05 with M = 64 (the
accumulator in TMEM rows 16w .. 16w + 15 of warp w's lane quarter, read with the 16x32bx2
shape), and the example's results on the emulator match NumPy's float64 attention, causal
and not, ragged (keys past the end masked), both dtypes and head dimensions; the race
checker follows the products' commits. M = 64 matmul tiles take the same path."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

from wgmma_support import attention_reference, compile_for, product_bound, run

ROOT = pathlib.Path(__file__).resolve().parents[4]
ATTENTION = (ROOT / "examples" / "attention.tile").read_text()
MATMUL = (ROOT / "examples" / "matmul.tile").read_text()


def _attention(dtype, d, bn, causal, seq, heads=2, seed=0):
    import ml_dtypes
    npdt = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(npdt) for _ in range(3))
    o = np.full((heads, seq, d), np.nan, npdt)
    scale = 1.0 / np.sqrt(d)
    defines = {"T": dtype, "BM": "64", "BN": str(bn), "D": str(d), "CAUSAL": causal}
    res, rep = run(ATTENTION, "attention", {"q": q, "k": k, "v": v, "o": o},
                   (-(-seq // 64), heads), scalars=[np.float32(scale)], target="sm_100a",
                   defines=defines, race_check=True)
    want = np.stack([attention_reference(q[h], k[h], v[h], scale, causal)
                     for h in range(heads)])
    err = np.abs(o.astype(np.float64) - want).max() / np.abs(want).max()
    return res, rep, err


@pytest.mark.parametrize("dtype,d,bn,causal,seq", [
    ("f16", 64, 64, "false", 70),      # one whole key tile and a ragged one
    ("f16", 64, 64, "true", 70),
    ("bf16", 128, 32, "true", 40),     # the example's key tile at D = 128 (N = 32 and 128)
])
def test_attention_matches_numpy(dtype, d, bn, causal, seq):
    res, rep, err = _attention(dtype, d, bn, causal, seq)
    # both products on tcgen05 with M = 64: four k-steps of 16 of q @ k^T (K = D) ...
    steps = len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", res.ptx))
    assert steps >= d // 16 + bn // 16
    assert "tcgen05.ld.sync.aligned.16x32bx2" in res.ptx and "mma.sync" not in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    assert np.isfinite(err) and err <= (2e-2 if dtype == "bf16" else 4e-3)


def test_plan_puts_both_products_on_tcgen05():
    # BM = BN = 64 (the sm_100a default is 128 x 128: test_tcgen05_attention_tmem.py)
    defines = {"BM": "64", "BN": "64"}
    res = compile_source(ATTENTION, "attention.tile", CompileOptions(target="sm_100a",
                                                                     defines=defines),
                         until="ptx")
    assert res.ok, render_all(res.diagnostics)
    from tilelang.cli import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(ROOT / "examples" / "attention.tile"), "--arch", "sm_100a",
                   "--emit", "plan", "-D", "BM=64", "-D", "BN=64"])
    assert rc in (0, None)
    # both products of both loops (the key loop is split in two for the mask)
    assert out.getvalue().count("tcgen05 kind::f16 m64n64k16: 4 instruction(s) per product, "
                                "64 TMEM columns (R4)") == 4


@pytest.mark.parametrize("d", [64, 128])
def test_attention_links_without_local_memory(d):
    from tilelang import nvjitlink as lib
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    bn = 64 if d == 64 else 32
    res = compile_source(ATTENTION, "attention.tile", CompileOptions(
        target="sm_100a", defines={"D": str(d), "BM": "64", "BN": str(bn), "CAUSAL": "true"}),
        until="cubin")
    assert res.ok, render_all(res.diagnostics)
    r = res.link.resources["attention"]
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    assert "tcgen05.mma" in res.ptx


def test_m64_matmul_tiles_match_numpy():
    # BM = BN = 64: the TMA ring with an M = 64 instruction (N = 64 in the descriptor)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((100, 160)).astype(np.float16)
    b = rng.standard_normal((160, 72)).astype(np.float16)
    c = np.full((100, 72), np.nan, np.float32)
    res, rep = run(MATMUL, "matmul", {"a": a, "b": b, "c": c}, (2, 2), target="sm_100a",
                   defines={"BM": 64, "BN": 64}, race_check=True)
    assert "cp.async.bulk.tensor" in res.ptx and "tcgen05.ld.sync.aligned.16x32bx2" in res.ptx
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(c - ref) <= product_bound(a, b)).all()
