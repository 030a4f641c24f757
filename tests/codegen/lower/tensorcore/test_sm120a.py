"""sm_120a (docs/codegen.md, "sm_120a"): a pipelined mma.sync loop's operand tiles come by
TMA (plan/loops.py R8) into swizzled panel images that `ldmatrix` reads, on the TMA ring
protocol of the wgmma loop (one mbarrier per stage, one issuing thread); sm_120, the portable
target, keeps its cp.async ring. Results from the emulator, which decodes the tensor maps and
TMA's swizzle on its own, against NumPy: the inputs are multiples of 1/8 below 1, so every
product and partial sum is exact in f32 and the comparison is exact."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tilelang.codegen.generate import kernel_plans
from tilelang.codegen.plan.dump import format_plan
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.targets import get_target
from tilelang.tools import sass

from wgmma_support import compile_for, facts_of, run

ROOT = pathlib.Path(__file__).resolve().parents[4]
MATMUL = (ROOT / "examples" / "matmul.tile").read_text()
PERSISTENT = (ROOT / "examples" / "matmul_persistent.tile").read_text()
BULK = "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes"


def operands(m, n, k, dtype="f16", seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bf16":
        import ml_dtypes
        npdt = ml_dtypes.bfloat16
    else:
        npdt = np.float16
    a = (rng.integers(-8, 9, (m, k)) / 8).astype(npdt)
    b = (rng.integers(-8, 9, (k, n)) / 8).astype(npdt)
    return a, b


def matmul(m, n, k, *, dtype="f16", target="sm_120a", defines=None, race_check=True):
    src = MATMUL if dtype == "f16" else MATMUL.replace("f16", "bf16")
    a, b = operands(m, n, k, dtype, seed=m + n + k)
    c = np.full((m, n), np.nan, np.float32)
    bm = int((defines or {}).get("BM", 128))
    bn = int((defines or {}).get("BN", 128))
    res, _ = run(src, "matmul", {"a": a, "b": b, "c": c}, (-(-m // bm), -(-n // bn)),
                 target=target, defines=defines, race_check=race_check)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(c, ref), np.abs(c - ref).max()
    return res.ptx


def test_matmul_example_loads_operands_by_tma():
    a, b = operands(256, 256, 128)
    c = np.zeros((256, 256), np.float32)
    ptx = compile_for(MATMUL, "matmul", {"a": a, "b": b, "c": c}, target="sm_120a").ptx
    # no arch-specific instruction: the portable .target, sm_120a's PTX ISA
    assert ".target sm_120\n" in ptx and ".version 8.7" in ptx
    # per stage one box of A (128 x 64: one 128-byte panel) and two of B (64 x 128: two
    # 64-column panels): the prologue's two stages and the loop's refill
    assert ptx.count(BULK) == 9
    assert "cp.async.cg" not in ptx and "wgmma" not in ptx and "tcgen05" not in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    # the ldmatrix reads are fenced to the async proxy before the refill overwrites them
    # (the other fence is the epilogue's, before its TMA store of C)
    assert ptx.count("fence.proxy.async.shared::cta;") == 2
    assert ptx.count("mbarrier.try_wait.parity.shared::cta.b64") == 1


def test_plan_shows_the_tma_ring():
    res = compile_source(MATMUL, "matmul.tile", CompileOptions(target="sm_120a"), until="tir")
    a, b = operands(256, 256, 128)
    facts = {"matmul": facts_of({"a": a, "b": b, "c": np.zeros((256, 256), np.float32)})}
    (kernel, plan), = kernel_plans(res.ir, CompileOptions(target="sm_120a"), facts)
    text = format_plan(plan, kernel)
    assert "pipelined (mma.sync), TMA ring of 3 stages x 32 KB: 96 KB of 99 KB" in text
    res = compile_source(MATMUL, "matmul.tile", CompileOptions(target="sm_120"), until="tir")
    (kernel, plan), = kernel_plans(res.ir, CompileOptions(target="sm_120"), facts)
    assert "pipelined (mma.sync), cp.async ring of 3 stages" in format_plan(plan, kernel)


@pytest.mark.parametrize("m,n,k", [
    (256, 256, 192),        # whole tiles, the ring wraps
    (130, 136, 200),        # ragged in every dimension: TMA zero-fills the boxes' overhang
])
def test_matmul_matches_numpy(m, n, k):
    assert BULK in matmul(m, n, k)


def test_bf16():
    assert BULK in matmul(72, 136, 80, dtype="bf16")


def test_narrow_panels():
    # BK = 32: A's rows are 64 bytes (64-byte swizzled panels); BN = 64: each warp's 32
    # columns of B are half a panel (the fragment addresses' run-time chunk path)
    ptx = matmul(136, 200, 104, defines={"BK": "32", "BN": "64"})
    assert BULK in ptx


BATCHED = """
@launch(reqntid = (128, 1, 1))
kernel bloop(a: Array[f16, 3], b: Array[f16, 3], c: Array[f32, 3]) {
    let z = bid(0);
    var acc = zeros((2, 64, 64), f32);
    for k in range(num_tiles(a, axis = 2, shape = (2, 64, 32))) {
        let ta = load(a, index = (z, 0, k), shape = (2, 64, 32), padding = 0);
        let tb = load(b, index = (z, k, 0), shape = (2, 32, 64), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (z, 0, 0), tile = acc);
}
"""


def test_batched_ragged():
    # two batches a block, each image a 3-d box; 60 x 56 of the 64 x 64 tile is inside
    rng = np.random.default_rng(3)
    a = (rng.integers(-8, 9, (4, 60, 200)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (4, 200, 56)) / 8).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((4, 60, 56), np.nan, np.float32)}
    res, _ = run(BATCHED, "bloop", arrays, (2,), target="sm_120a", race_check=True)
    assert "cp.async.bulk.tensor.3d.shared::cta" in res.ptx and "cp.async.cg" not in res.ptx
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


MAJORS = """
@launch(reqntid = (128, 1, 1))
kernel majors(at: Array[f16, 2], bt: Array[f16, 2], c: Array[f32, 2]) {
    var acc = zeros((64, 128), f32);
    for k in range(num_tiles(at, axis = 0, shape = (64, 64))) {
        // a stored (K, M) and b stored (N, K): A's image rows run along M, B's along K
        let ta = load(at, index = (0, k), shape = (64, 64), order = (1, 0), padding = 0);
        let tb = load(bt, index = (k, 0), shape = (64, 128), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def test_transposed_majors():
    a, b = operands(64, 128, 160)
    arrays = {"at": np.ascontiguousarray(a.T), "bt": np.ascontiguousarray(b.T),
              "c": np.full((64, 128), np.nan, np.float32)}
    res, _ = run(MAJORS, "majors", arrays, (1, 1), target="sm_120a", race_check=True)
    # A read with .trans (its rows are M rows), B without
    assert BULK in res.ptx and "ldmatrix.sync.aligned.m8n8.x4.trans" in res.ptx
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


F8 = """
@launch(reqntid = (128, 1, 1))
kernel mm8(a: Array[f8e4m3, 2], bt: Array[f8e4m3, 2], c: Array[f32, 2]) {
    var acc = zeros((128, 128), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, 64))) {
        let ta = load(a, index = (bid(0), k), shape = (128, 64), padding = 0);
        let tb = load(bt, index = (k, bid(1)), shape = (64, 128), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (bid(0), bid(1)), tile = acc);
}
"""


def test_f8e4m3_k_major():
    # 8-bit operands, both K-major: 64-byte rows, 64-byte swizzled panels; m16n8k32 e4m3
    import ml_dtypes
    rng = np.random.default_rng(4)
    m, n, k = 130, 144, 208
    a = (rng.integers(-4, 5, (m, k)) / 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.integers(-4, 5, (k, n)) / 4).astype(ml_dtypes.float8_e4m3fn)
    arrays = {"a": a.view(np.uint8), "bt": np.ascontiguousarray(b.T).view(np.uint8),
              "c": np.full((m, n), np.nan, np.float32)}
    res, _ = run(F8, "mm8", arrays, (2, 2), target="sm_120a", race_check=True)
    assert BULK in res.ptx and "cp.async.cg" not in res.ptx
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in res.ptx
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


def test_rows_not_16_byte_multiples_take_cp_async():
    # N = 129: B's rows are 258 bytes, no tensor map; the ring is cp.async's
    ptx = matmul(70, 129, 40, race_check=False)
    assert BULK not in ptx and "cp.async.cg" in ptx


def test_portable_sm_120_keeps_cp_async():
    ptx = matmul(130, 136, 72, target="sm_120", race_check=False)
    assert BULK not in ptx and "cp.async.cg" in ptx     # (C's store is still TMA's)


def test_persistent_example_carries_the_ring_across_tiles():
    rng = np.random.default_rng(5)
    m, n, k = 200, 136, 104
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}
    res, _ = run(PERSISTENT, "matmul_persistent", arrays, (5,), target="sm_120a",
                 defines={"BM": "64", "BN": "64", "BK": "32", "GROUP_M": "2"})
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    assert BULK in res.ptx and "cp.async.cg" not in res.ptx


@pytest.mark.skipif(not sass.tools_available(), reason="cuobjdump/nvdisasm not installed")
def test_no_more_instructions_per_k_step_than_triton():
    # Triton 3.9's descriptor matmul for sm_120a at the same tile, warps and stages (TMA
    # loads, ldmatrix, mma.sync; the emulator fixture), assembled by the same nvJitLink:
    # 207 SASS instructions a K-step; Tile's loop 204 (benchmarks/blackwell_static.py)
    from tilelang.codegen.target.link import link_ptx
    target = get_target("sm_120a")
    theirs = (ROOT / "tests" / "emulator" / "fixtures" / "triton_tma_matmul_sm120.ptx")
    k_step = 128 * 128 * 64 // 4
    counts = []
    for ptx in (compile_source(MATMUL, "matmul.tile", CompileOptions(target="sm_120a"),
                               until="ptx").ptx, theirs.read_text()):
        link = link_ptx(ptx, target)
        (name,) = link.resources
        counts.append(sass.summarize(sass.disassemble(link.cubin)[name]).per_k_step(k_step))
    ours, triton = counts
    assert ours is not None and ours[0] <= triton[0], (ours, triton)


def test_cubin_has_no_local_memory():
    a, b = operands(256, 256, 128)
    c = np.zeros((256, 256), np.float32)
    res = compile_for(MATMUL, "matmul", {"a": a, "b": b, "c": c}, target="sm_120a",
                      until="cubin")
    (r,) = res.link.resources.values()
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
