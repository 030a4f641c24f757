"""Every tcgen05 kernel the compiler emits on sm_100a runs race-free under the emulator's
strict race check (`race_check="strict"`: shared memory, tensor memory with tcgen05.wait::ld/
::st and the commit's mbarrier, the PTX ISA's thread-sync fences, and the clocks of a
cluster's CTAs: emulator/tmemrace.py): the example's default (the warp-specialized ring of
192 threads), the one-warp-group ring, the CTA pair (cta_group::2 over a cluster of two) and
a plain product outside a loop; results against NumPy. The same checks failing without each
synchronization step are tests/emulator/test_emu_tcgen05_races.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import wgmma_support
from tilelang.emulator.errors import SharedMemoryRace
from wgmma_support import compile_for, one_group_matmul, run

ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = (ROOT / "examples" / "matmul.tile").read_text()
ONE_GROUP = one_group_matmul()                      # 128 threads, clusters of two along x
NO_CLUSTER = ONE_GROUP.replace(", cluster = (2, 1, 1))", ")")
assert NO_CLUSTER != ONE_GROUP


def _arrays(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    return {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


@pytest.mark.parametrize("src,form", [
    (EXAMPLE, "tcgen05.mma.cta_group::2"),          # warp-specialized on the CTA pair
    (NO_CLUSTER, "tcgen05.mma.cta_group::1"),       # the ring in one warp group
    (ONE_GROUP, "tcgen05.mma.cta_group::2"),        # the CTA pair
], ids=["ws192", "ring128", "pair"])
def test_strict_race_check_passes(src, form):
    m, n, k = 256, 128, 320                         # 5 K-steps: the rings wrap
    arrays = _arrays(m, n, k, seed=k)
    res, rep = run(src, "matmul", arrays, (m // 128, n // 128), target="sm_100a",
                   race_check="strict")
    assert form in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    want = arrays["a"].astype(np.float64) @ arrays["b"].astype(np.float64)
    assert np.array_equal(arrays["c"], want)


def test_pair_peer_refill_without_the_empty_wait_is_a_race():
    # the odd CTA's issuer refills its stage of A rows while the even CTA's M = 256 product
    # may still read it: only the multicast commit to the odd CTA's empty mbarrier orders
    # that read before the copy (cross-CTA clocks)
    m, n, k = 256, 128, 320
    arrays = _arrays(m, n, k, seed=1)
    ptx = compile_for(ONE_GROUP, "matmul", arrays, target="sm_100a").ptx
    assert "tcgen05.mma.cta_group::2" in ptx
    # the loop's first wait after the MMAs' commit is for iteration j-1's empty mbarrier
    line = re.search(r"\{ \.reg \.pred p; (mbarrier\.try_wait\.parity\.shared::cta\.b64 p, "
                     r"\[%r\d+\], %r\d+;) (selp\.u32 %r\d+, 1, 0, p;) \}\n", ptx[
                         ptx.index("tcgen05.commit.cta_group::2"):])
    # the odd CTA (rank 1) no longer waits: it takes the phase as complete
    odd = ("{ .reg .pred p; .reg .b32 rk; mov.u32 rk, %cluster_ctarank; setp.ne.u32 p, rk, 0; "
           f"@!p {line.group(1)} {line.group(2)} }}\n")
    bad = ptx.replace(line.group(0), odd, 1)
    assert bad != ptx
    with pytest.raises(SharedMemoryRace, match=r"shared-memory race: the TMA copy at PTX line "
                       r"\d+ writes shared memory that the in-flight cluster rank 0's tcgen05 "
                       r"operation of warp group 0 read, and nothing orders the two"):
        _launch(bad, arrays)
    _launch(ptx, arrays)                 # with the wait: race-free (and right)
    assert np.array_equal(arrays["c"], arrays["a"].astype(np.float64) @
                          arrays["b"].astype(np.float64))


def _launch(ptx, arrays):
    """Run the pair kernel's PTX on the emulator with the strict race check."""
    saved = wgmma_support.compile_for

    class _Res:
        def __init__(self, res):
            self.codegen, self.ptx = res.codegen, ptx
    try:
        wgmma_support.compile_for = lambda *a, **k: _Res(saved(*a, **k))
        return run(ONE_GROUP, "matmul", arrays, (2, 1), target="sm_100a", race_check="strict")
    finally:
        wgmma_support.compile_for = saved


def test_strict_race_check_passes_attention_persistent_and_staged_products():
    from wgmma_support import attention_reference, product_bound
    # attention on sm_100a: both products on tcgen05 with M = 64, causal, a ragged key tile
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 70, 64)).astype(np.float16) for _ in range(3))
    o = np.full((1, 70, 64), np.nan, np.float16)
    scale = np.float32(0.125)
    res, rep = run((ROOT / "examples" / "attention.tile").read_text(), "attention",
                   {"q": q, "k": k, "v": v, "o": o}, (2, 1), scalars=[scale],
                   target="sm_100a", defines={"T": "f16", "BM": "64", "BN": "64", "D": "64",
                                              "CAUSAL": "true"}, race_check="strict")
    assert "tcgen05.mma" in res.ptx and rep.race_check == "checked: no shared-memory race"
    want = attention_reference(q[0], k[0], v[0], float(scale), "true")
    assert np.abs(o[0].astype(np.float64) - want).max() <= 4e-3 * np.abs(want).max()
    # the persistent example: the ring inside the tile loop, one TMEM allocation for all
    a, b = (rng.integers(-3, 4, s).astype(np.float16) for s in ((300, 200), (200, 200)))
    c = np.zeros((300, 200), np.float32)
    res, rep = run((ROOT / "examples" / "matmul_persistent.tile").read_text(),
                   "matmul_persistent", {"a": a, "b": b, "c": c}, (2,), target="sm_100a",
                   race_check="strict")
    assert "tcgen05.mma" in res.ptx and rep.race_check == "checked: no shared-memory race"
    assert np.array_equal(c, a.astype(np.float64) @ b.astype(np.float64))
    # without tensor maps each product stages its operands by cp.async (a product on its own)
    arrays = _arrays(256, 128, 96, seed=4)
    res, rep = run(NO_CLUSTER, "matmul", arrays, (2, 1), target="sm_100a", tma=False,
                   race_check="strict")
    assert "tcgen05.mma" in res.ptx and "cp.async.bulk.tensor" not in res.ptx
    assert np.array_equal(arrays["c"], arrays["a"].astype(np.float64) @
                          arrays["b"].astype(np.float64))


BLOCK_SCALED = """
@launch(reqntid = (128, 1, 1))
kernel mms(a: Array[f8e4m3, 2], sa: Array[ue8m0, 2], b: Array[f8e4m3, 2], sb: Array[ue8m0, 2],
           c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, 64), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, 64))) {
        let ta = load(a, index = (m, k), shape = (128, 64), padding = 0);
        let ts = load(sa, index = (m, k), shape = (128, 2), padding = 0);
        let tb = load(b, index = (k, n), shape = (64, 64), padding = 0);
        let us = load(sb, index = (k, n), shape = (2, 64), padding = 0);
        acc = mma_scaled(ta, ts, tb, us, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


def test_strict_race_check_passes_the_block_scaled_product():
    import ml_dtypes
    rng = np.random.default_rng(6)
    vals = [-1.0, -0.5, -0.25, 0.25, 0.5, 1.0]       # exact sums
    a = rng.choice(vals, (128, 128)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.choice(vals, (128, 64)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(125, 130, (128, 4)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    sb = rng.integers(125, 130, (4, 64)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    c = np.zeros((128, 64), np.float32)
    bits = {name: x.view(np.uint8) for name, x in (("a", a), ("sa", sa), ("b", b), ("sb", sb))}
    res, rep = run(BLOCK_SCALED, "mms", {**bits, "c": c}, (1, 1), target="sm_100a",
                   race_check="strict")       # (the emulator takes the bytes)
    assert "kind::mxf8f6f4.block_scale" in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    want = (a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, 1)) @ \
        (b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, 0))
    assert np.array_equal(c, want.astype(np.float32))
