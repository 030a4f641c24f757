"""The emulator judges Hopper PTX it did not see being written: Triton 3.9's matmuls for sm_90a.

* `triton_matmul_sm90`: the tutorial-style matmul of test_emu_triton_matmul.py compiled for
  sm_90a with 8 warps (128 x 128 x 64 tiles): two warp groups issue
  `wgmma.mma_async.m64n128k16` with 128-byte-swizzled shared-memory descriptors (B
  MN-major, `imm-trans-b` 1), fed by cp.async, with `wgmma.wait_group 1` keeping one group
  in flight.
* `triton_matmul_e4m3_sm90`: e4m3 inputs (`m64n64k32`, 4 warps, 64 x 64 x 64).
* `triton_tma_matmul_sm90`: a matmul over host tensor descriptors: `cp.async.bulk.tensor.2d`
  loads completing on mbarriers with `expect_tx` and `try_wait.parity`, wgmma, and a
  `cp.async.bulk.tensor` store of C. Its tensor maps are built with
  `tilelang.emulator.tensormap.encode`.

* `triton_attention_{causal,full}_sm90`: a FlashAttention-style forward whose P @ V takes
  wgmma's A operand from registers.

* `triton_tma_matmul_cluster2_sm90`: the TMA matmul in clusters of two CTAs (64-byte swizzle).
* `triton_matmul_tn_*_sm90`: A given transposed (MN-major A and B; 32- and 64-byte swizzles).

Made by benchmarks/triton_ref/gen_matmul_ptx.py, gen_tma_matmul_ptx.py, gen_attention_ptx.py
and gen_matmul_tn_ptx.py (JSON beside each).
If our reading of the wgmma descriptor, the canonical layouts, the swizzle, the accumulator
fragment or TMA's boxes were wrong, these would disagree with NumPy.
"""

import json
import re
import math
import pathlib

import numpy as np
import pytest

from tilelang.emulator import EmulatorDevice
from tilelang.emulator.tensormap import encode

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def _load(stem):
    return (FIXTURES / f"{stem}.ptx").read_text(), \
        json.loads((FIXTURES / f"{stem}.json").read_text())


def _bound(a, b):
    # exact products (f16/e4m3 significands); one f32 rounding per k16/k32 step at most
    steps = math.ceil(a.shape[1] / 16)
    return steps * 2.0 ** -23 * (np.abs(a) @ np.abs(b)) + 1e-30


def run_wgmma(stem, M, N, K, dtype="f16", seed=0):
    ptx, info = _load(stem)
    assert ".target sm_90a" in ptx and "wgmma.mma_async.sync.aligned" in ptx
    rng = np.random.default_rng(seed)
    if dtype == "f16":
        A = rng.standard_normal((M, K)).astype(np.float16)
        B = rng.standard_normal((K, N)).astype(np.float16)
        raw_a, raw_b = A, B
        a, b = A.astype(np.float64), B.astype(np.float64)
    else:
        import ml_dtypes
        A = (rng.integers(-8, 9, (M, K)) / 2).astype(ml_dtypes.float8_e4m3fn)
        B = rng.integers(-8, 9, (K, N)).astype(ml_dtypes.float8_e4m3fn)
        raw_a, raw_b = A.view(np.uint8), B.view(np.uint8)
        a, b = A.astype(np.float64), B.astype(np.float64)
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pa, pb, pc = dev.to_device(raw_a), dev.to_device(raw_b), dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)                    # NaN: every element must be written
    BM, BN = info["constexprs"]["BM"], info["constexprs"]["BN"]
    grid = (math.ceil(M / BM) * math.ceil(N / BN), 1, 1)
    args = [pa, pb, pc] + [np.int32(v) for v in (M, N, K, K, N, N)] + [0, 0]
    rep = dev.launch(fn, grid, tuple(info["block"]), args, shared_mem=info["shared_bytes"])
    # the cp.async ring and the wgmma operands in flight (issue to wait_group) pass the check
    assert rep.race_check == "checked: no shared-memory race"
    C = dev.from_device(pc, (M, N), np.float32).astype(np.float64)
    return a, b, C, rep


@pytest.mark.parametrize("shape", [(256, 256, 192), (127, 208, 80)], ids=["square", "ragged"])
def test_wgmma_matmul_two_warp_groups(shape):
    a, b, C, rep = run_wgmma("triton_matmul_sm90", *shape, seed=sum(shape))
    assert np.all(np.abs(C - a @ b) <= _bound(a, b))
    M, N, K = shape
    # per block: 2 warp groups x ceil(K/64) k-tiles x 4 k16 steps, 128 threads each
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    assert rep.instructions["wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"] == \
        tiles * 2 * math.ceil(K / 64) * 4 * 128


def test_wgmma_matmul_e4m3():
    a, b, C, _ = run_wgmma("triton_matmul_e4m3_sm90", 100, 80, 128, dtype="e4m3")
    assert np.array_equal(C, a @ b)          # small multiples of 1/2: exact in f32


def run_tma(M, N, K, seed=0, stem="triton_tma_matmul_sm90",
            product="wgmma.mma_async.sync.aligned.m64n"):
    ptx, info = _load(stem)
    for form in ("cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes",
                 "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity",
                 "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group", product):
        assert form in ptx
    c = info["constexprs"]
    BM, BN, BK = c["BM"], c["BN"], c["BK"]
    meta = info["tensordesc_meta"]
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pa, pb, pc = dev.to_device(A), dev.to_device(B), dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)

    def tmap(ptr, rows, cols, esize, m):
        # dimension 0 is the contiguous one: (cols, rows); the box as Triton chose it
        box = m["block_size"]
        return encode(m["elem_type"], 2, int(ptr), (cols, rows), (cols * esize,),
                      (box[1], box[0]), (1, 1), 0, m["swizzle"], 2, 0)

    ta = tmap(pa, M, K, 2, meta[0])
    tb = tmap(pb, K, N, 2, meta[1])
    tc = tmap(pc, M, N, 4, meta[2])
    i32, i64 = np.int32, np.int64
    args = [ta, i32(M), i32(K), i64(K), i64(1), tb, i32(K), i32(N), i64(N), i64(1),
            tc, i32(M), i32(N), i64(N), i64(1), i32(M), i32(N), i32(K), 0, 0]
    ctas = info["num_ctas"]
    grid = (ctas * math.ceil(M / BM) * math.ceil(N / BN), 1, 1)
    rep = dev.launch(fn, grid, tuple(info["block"]), args, shared_mem=info["shared_bytes"],
                     cluster=(ctas, 1, 1) if ctas > 1 else None)
    C = dev.from_device(pc, (M, N), np.float32).astype(np.float64)
    return A.astype(np.float64), B.astype(np.float64), C, rep, BK


@pytest.mark.parametrize("shape", [(128, 128, 192), (100, 72, 136)], ids=["square", "ragged"])
def test_tma_matmul_in_clusters_of_two(shape):
    # each CTA of a cluster computes half of the tile's columns: B boxes of 64 x 32 with the
    # 64-byte swizzle (wgmma descriptors with swizzle mode 64 B), barrier.cluster at the start
    ptx, info = _load("triton_tma_matmul_cluster2_sm90")
    assert ".reqnctapercluster 2" in ptx and "barrier.cluster.wait" in ptx
    assert info["tensordesc_meta"][1]["swizzle"] == 2
    a, b, C, rep, _ = run_tma(*shape, seed=sum(shape) + 1,
                              stem="triton_tma_matmul_cluster2_sm90")
    assert np.all(np.abs(C - a @ b) <= _bound(a, b))


@pytest.mark.parametrize("shape", [(128, 128, 192), (100, 72, 136)], ids=["square", "ragged"])
def test_tma_matmul(shape):
    # ragged: partial boxes in every dimension read zeros and store only the inside
    a, b, C, rep, BK = run_tma(*shape, seed=sum(shape))
    assert np.all(np.abs(C - a @ b) <= _bound(a, b))
    M, N, K = shape
    blocks = math.ceil(M / 64) * math.ceil(N / 64)
    loads = "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes"
    assert rep.instructions[loads] == blocks * 2 * math.ceil(K / BK)     # one elected thread


@pytest.mark.parametrize("causal,n", [(False, 128), (True, 100)], ids=["full", "causal"])
def test_attention_forward(causal, n):
    """Triton's FlashAttention-style forward for sm_90a (gen_attention_ptx.py): Q @ K^T from
    shared-memory descriptors, P @ V with P from registers (wgmma's register-A fragment)."""
    import math as m
    stem = f"triton_attention_{'causal' if causal else 'full'}_sm90"
    ptx, info = _load(stem)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 \{%r\d+(,%r\d+)"
                     r"{31}\}, \{%r\d+,%r\d+,%r\d+,%r\d+\}, %rd\d+", ptx)    # A in registers
    BH, D = 2, info["constexprs"]["HEAD_DIM"]
    rng = np.random.default_rng(n)
    q, k, v = (rng.standard_normal((BH, n, D)).astype(np.float16) for _ in range(3))
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    o = dev.malloc(2 * BH * n * D)
    scale = 1 / m.sqrt(D)
    rep = dev.launch(fn, (m.ceil(n / info["constexprs"]["BLOCK_M"]), BH, 1),
                     tuple(info["block"]), [dev.to_device(q), dev.to_device(k), dev.to_device(v),
                                            o, np.float32(scale), np.int32(n), 0, 0],
                     shared_mem=info["shared_bytes"])
    assert rep.race_check == "checked: no shared-memory race"
    out = dev.from_device(o, (BH, n, D), np.float16).astype(np.float64)
    s = np.einsum("bmd,bnd->bmn", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    # P is rounded to f16 before P @ V (relative 2^-11) and the output is f16
    np.testing.assert_allclose(out, ref, atol=3e-3, rtol=0)


def _descriptor_swizzles(ptx):
    """Swizzle modes (bytes) of the constant descriptor halves Triton ORs in."""
    from tilelang.emulator.ops_wgmma import decode_descriptor
    out = set()
    for c in re.findall(r"or\.b64\s+%rd\d+, %rd\d+, (-?\d+);", ptx):
        out.add(decode_descriptor(int(c) % (1 << 64))["swizzle"])
    return out


@pytest.mark.parametrize("stem,swizzles,shape", [
    ("triton_matmul_tn_64x8x16_sm90", {128}, (128, 40, 48)),     # B: no swizzle (run time)
    ("triton_matmul_tn_64x16x16_sm90", {128, 32}, (128, 48, 80)),
    ("triton_matmul_tn_64x32x32_sm90", {128, 64}, (112, 96, 72)),
])
def test_transposed_a_and_narrow_swizzles(stem, swizzles, shape):
    """A given transposed: both operands MN-major (imm-trans-a and -b 1); B rows of 32 and 64
    bytes: the 32- and 64-byte swizzles."""
    ptx, info = _load(stem)
    assert re.search(r"wgmma\.mma_async.*, %p\d+, 1, 1, 1, 1;", ptx)
    assert _descriptor_swizzles(ptx) == swizzles
    M, N, K = shape
    rng = np.random.default_rng(M)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pc = dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)
    c = info["constexprs"]
    grid = (math.ceil(M / c["BM"]) * math.ceil(N / c["BN"]), 1, 1)
    args = [dev.to_device(np.ascontiguousarray(A.T)), dev.to_device(B), pc] + \
        [np.int32(v) for v in (M, N, K, M, N, N)] + [0, 0]
    rep = dev.launch(fn, grid, tuple(info["block"]), args, shared_mem=info["shared_bytes"])
    assert rep.race_check == "checked: no shared-memory race"
    a, b = A.astype(np.float64), B.astype(np.float64)
    C = dev.from_device(pc, (M, N), np.float32).astype(np.float64)
    assert np.all(np.abs(C - a @ b) <= _bound(a, b))
