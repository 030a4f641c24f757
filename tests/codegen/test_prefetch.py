"""A loop whose body does more than load -> one product (attention) copies its product
operands one iteration ahead into a ring of images of their own (lower/mma_prefetch.py):
results on the emulator against NumPy under the race checker, over enough iterations for the
ring to wrap, ragged and empty loops, and the PTX of the loop (one copy wait and one barrier
per iteration, the copies of the next iteration before the products)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilelang.tools.sass import ptx_loop_lines
from wgmma_support import run

ROOT = Path(__file__).resolve().parents[2]

# two products per iteration with element-wise work between them, both B operands loaded
# in the loop (one through a transpose), A kept from before the loop
TWO = """
@launch(reqntid = (128, 1, 1))
kernel two(a: Array[f16, 2], k: Array[f16, 2], v: Array[f16, 2], c: Array[f32, 2], n: i32) {
    let ta = load(a, index = (0, 0), shape = (64, 64));
    var acc = zeros((64, 64), f32);
    for j in range(n) {
        let tk = load(k, index = (j, 0), shape = (64, 64), padding = 0);
        let tv = load(v, index = (j, 0), shape = (64, 64), padding = 0);
        let s = mma(ta, transpose(tk), zeros((64, 64), f32)) * 0.25;
        acc = mma(astype(s, f16), tv, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def _two_reference(a, k, v, n):
    pad = -k.shape[0] % 64
    kk = np.concatenate([k, np.zeros((pad, 64), k.dtype)]).astype(np.float64)
    vv = np.concatenate([v, np.zeros((pad, 64), v.dtype)]).astype(np.float64)
    acc = np.zeros((64, 64))
    for j in range(0, 64 * n, 64):
        s = (a.astype(np.float64) @ kk[j:j + 64].T * 0.25).astype(np.float16)
        acc = s.astype(np.float64) @ vv[j:j + 64] + acc
    return acc


@pytest.mark.parametrize("rows,n", [(64 * 5, 5), (200, 4), (64, 0)])
def test_two_products_per_iteration(rows, n):
    # 5 iterations: the two-stage ring wraps; 200 rows: a ragged last tile (zero-filled);
    # n = 0: the loop never runs and the prologue's copies are waited for at the exit
    rng = np.random.default_rng(rows)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    k = rng.integers(-3, 4, (rows, 64)).astype(np.float16)
    v = rng.integers(-3, 4, (rows, 64)).astype(np.float16)
    arrays = {"a": a, "k": k, "v": v, "c": np.full((64, 64), np.nan, np.float32)}
    res, _ = run(TWO, "two", arrays, (1,), scalars=[np.int32(n)], race_check=True)
    assert np.array_equal(arrays["c"], _two_reference(a, k, v, n))
    lines = res.ptx.splitlines()
    loop = [lines[n - 1] for n in ptx_loop_lines(res.ptx)]
    text = "\n".join(loop)
    # the ring is its own buffer of two stages of two 8 KiB images
    assert re.search(r"\.shared \.align 1024 \.b8 __tile_kept\d+_two\[32768\];", res.ptx)
    # one wait for the copies, one barrier, the next iteration's copies (two 8 KiB tiles
    # over 128 threads: 4 chunks of 16 bytes each per thread), then the MMAs
    assert text.count("cp.async.wait_group") == 1 and text.count("bar.sync") == 1
    assert text.count("cp.async.cg.shared.global") == 8
    assert text.index("cp.async.commit_group") < text.index("wgmma.mma_async")
    assert "st.shared" not in text


def test_attention_loop_is_prefetched():
    from tilelang.diagnostics import render_all
    from tilelang.driver import Options, compile_source
    src = (ROOT / "examples" / "attention.tile").read_text()
    res = compile_source(src, "attention.tile", Options(
        target="sm_90a", defines={"BM": "64", "BN": "64", "D": "64", "CAUSAL": "false"}),
        kernels=["attention_f16"], until="ptx")
    assert res.ok, render_all(res.diagnostics)
    lines = res.ptx.splitlines()
    text = "\n".join(lines[n - 1] for n in ptx_loop_lines(res.ptx))
    assert text.count("cp.async.wait_group") == 1 and text.count("bar.sync") == 1
    assert text.count("fence.proxy.async") == 1
    # K and V of the next key tile: 4 chunks each per thread
    assert text.count("cp.async.cg.shared.global") == 8
    assert text.count("wgmma.mma_async") == 8


ATTENTION_SMALL = ROOT / "examples" / "attention.tile"


@pytest.mark.parametrize("d,bn,causal,seq", [(64, 64, "false", 200), (128, 32, "true", 100)])
def test_attention_under_the_race_checker(d, bn, causal, seq):
    # several key tiles per block (the ring wraps), ragged; the emulator's race checker sees
    # every shared-memory access of the ring, the kept Q image and the exchanges
    rng = np.random.default_rng(d)
    q, k, v = (rng.standard_normal((1, seq, d)).astype(np.float16) for _ in range(3))
    arrays = {"q": q, "k": k, "v": v, "o": np.full((1, seq, d), np.nan, np.float16)}
    scale = 1.0 / np.sqrt(d)
    defines = {"BM": "64", "BN": str(bn), "D": str(d), "CAUSAL": causal}
    run(ATTENTION_SMALL.read_text(), "attention_f16", arrays, (-(-seq // 64), 1),
        scalars=[np.float32(scale)], defines=defines, race_check=True)
    qq, kk, vv = (x[0].astype(np.float64) for x in (q, k, v))
    s = qq @ kk.T * scale
    if causal == "true":
        s = np.where(np.arange(seq)[None, :] <= np.arange(seq)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ vv
    got = arrays["o"][0].astype(np.float64)
    assert np.abs(got - want).max() / np.abs(want).max() < 4e-3
