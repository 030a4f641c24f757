"""Warp-group MMA on sm_90a (issue 16, item 2): `mma` / `@` with tiles of whole 64-row
instruction tiles in blocks of whole warp groups lower to `wgmma.mma_async` with shared-memory
descriptors over 128-byte-swizzled images, the fence / commit / wait protocol, and the launch
contract of seed 000 (`.reqntid` a multiple of 128, `.maxnreg` computed, `.target sm_90a`,
E0721 when the thread count rules it out).

Results come from the emulator (its wgmma decodes descriptors and swizzles per the PTX ISA on
its own) and are compared with NumPy: square, ragged, batched, bf16, both operand majors,
register operands, two warp groups, N = 256. ptxas and the SASS wheels are optional
cross-checks that skip when absent."""

from __future__ import annotations

import functools
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pytest

from tilelang.tools import sass

from wgmma_support import compile_for, one_group_matmul, product_bound, run

ROOT = pathlib.Path(__file__).resolve().parents[4]
MATMUL = one_group_matmul()      # the example at 128 x 128 x 64, one warp group
needs_sass = pytest.mark.skipif(not sass.tools_available(),
                                reason="cuobjdump/nvdisasm wheels not installed")
needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


def operands(shape_a, shape_b, dtype=np.float16, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bf16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    # small integers times 1/8: every product and partial sum is exact in f32
    a = (rng.integers(-8, 9, shape_a) / 8).astype(dtype)
    b = (rng.integers(-8, 9, shape_b) / 8).astype(dtype)
    return a, b


def matmul_arrays(M, N, K, dtype=np.float16):
    a, b = operands((M, K), (K, N), dtype)
    return {"a": a, "b": b, "c": np.full((M, N), np.nan, np.float32)}


@functools.lru_cache(maxsize=None)
def example_ptx(target="sm_90a"):
    return compile_for(MATMUL, "matmul", matmul_arrays(256, 256, 256), target=target,
                       until="cubin")


# ---------------------------------------------------------------------------------------------
# PTX structure and the launch contract

def test_example_ptx_uses_wgmma():
    # the cp.async ring (arrays TMA cannot read, or TMA off; test_tma.py has the TMA ring)
    ptx = compile_for(MATMUL, "matmul", matmul_arrays(256, 256, 256), tma=False).ptx
    assert re.search(r"^\.target sm_90a$", ptx, re.M)
    assert ".reqntid 128, 1, 1" in ptx and ".maxnreg 168" in ptx
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    loop = [ptx.splitlines()[n - 1] for n in sass.ptx_loop_lines(ptx)]
    body = "\n".join(loop)
    # 128 x 128 x 64 per iteration, one warp group: 2 m64 tiles x 4 k16 steps of m64n128k16
    assert body.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == 8
    # the protocol, in order: copies landed and published, proxy fence, fence, MMAs, commit,
    # wait leaving one group in flight, then the next stage's copies
    order = ["cp.async.wait_group", "bar.sync", "fence.proxy.async.shared::cta",
             "wgmma.fence.sync.aligned", "wgmma.mma_async", "wgmma.commit_group.sync.aligned",
             "wgmma.wait_group.sync.aligned 1", "cp.async.cg.shared.global",
             "cp.async.commit_group"]
    pos = [body.find(s) for s in order]
    assert -1 not in pos and pos == sorted(pos), list(zip(order, pos))
    # descriptors: 128-byte swizzle (bits 62-63 = 1), SBO 1024 bytes; B (row-major (K, N))
    # is MN-major: transposed (imm-trans-b 1), LBO = one 64-row panel of 128 bytes
    assert re.search(r"m64n128k16\.f32\.f16\.f16 \{[^}]*\}, %rd\d+, %rd\d+, %p\d+, 1, 1, 0, 1;",
                     body)
    consts = {int(c) for c in re.findall(r"\b(46116\d{14})\b", ptx)}
    assert (1 << 62) | (64 << 32) | (1 << 16) in consts                # A: K-major
    assert (1 << 62) | (64 << 32) | ((64 * 128 >> 4) << 16) in consts  # B: MN-major


def test_example_default_is_tma_and_wgmma():
    ptx = example_ptx().ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "wgmma.mma_async" in ptx
    assert "cp.async.cg" not in ptx


def test_example_below_sm90a_keeps_mma_sync():
    for target in ("sm_80", "sm_90"):
        ptx = example_ptx(target).ptx
        assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


SMALL = """
@launch(maxntid = (96, 1, 1))
kernel small(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    store(c, index = (0, 0), tile = load(a, index = (0, 0), shape = (64, 64)) @
                                    load(b, index = (0, 0), shape = (64, 64)));
}
"""


def test_thread_count_not_whole_warp_groups_is_e0721():
    res = compile_for(SMALL, "small", {"a": np.zeros((64, 64), np.float16),
                                       "b": np.zeros((64, 64), np.float16),
                                       "c": np.zeros((64, 64), np.float32)})
    notes = [d for d in res.diagnostics if d.code == "E0721"]
    assert len(notes) == 1 and "multiple of 128 threads" in notes[0].message
    assert "wgmma" not in res.ptx and "mma.sync" in res.ptx and ".maxnreg" not in res.ptx


def test_maxnreg_is_computed_from_the_accumulator():
    src = MATMUL.replace(", maxnreg = by_target(sm_90a = 168)", "").replace("BN: i32 = 128", "BN: i32 = 64")
    res = compile_for(src, "matmul", matmul_arrays(128, 128, 128))
    # 128 x 64 f32 over 128 threads: 64 accumulator registers + 32 working + 8 slack
    assert ".maxnreg 104" in res.ptx and "m64n64k16" in res.ptx


@needs_ptxas
def test_ptxas_accepts_and_does_not_serialize(tmp_path):
    p = tmp_path / "m.ptx"
    p.write_text(example_ptx().ptx)
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(p), "-o", str(tmp_path / "m.o")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "serialized" not in out.stderr, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr


@needs_sass
def test_sass_has_hgmma_and_no_local_memory():
    res = example_ptx()
    s = sass.summarize(sass.disassemble(res.cubin)["matmul"])
    assert s.ops.get("HGMMA", 0) >= 8, s.ops.most_common(12)
    assert s.local == 0 and s.hmma == 0
    r = res.link.resources["matmul"]
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0), r


# ---------------------------------------------------------------------------------------------
# Results on the emulator

@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 190)])
def test_example_matches_numpy(M, N, K):
    arrays = matmul_arrays(M, N, K)
    res, _ = run(MATMUL, "matmul", arrays, (-(-M // 128), -(-N // 128)))
    assert "wgmma.mma_async" in res.ptx
    a, b = arrays["a"].astype(np.float64), arrays["b"].astype(np.float64)
    assert np.array_equal(arrays["c"], a @ b)          # exact: see operands()


def test_bf16_random_values():
    src = MATMUL.replace("f16", "bf16")
    rng = np.random.default_rng(3)
    import ml_dtypes
    a = rng.standard_normal((128, 192)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((192, 128)).astype(ml_dtypes.bfloat16)
    arrays = {"a": a, "b": b, "c": np.full((128, 128), np.nan, np.float32)}
    res, _ = run(src, "matmul", arrays, (1, 1))
    assert "m64n128k16.f32.bf16.bf16" in res.ptx
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(arrays["c"] - want) <= product_bound(a, b))


MAJORS = """
@launch(reqntid = (128, 1, 1))
kernel majors(at: Array[f16, 2], bt: Array[f16, 2], c: Array[f32, 2]) {
    var acc = zeros((64, 128), f32);
    for k in range(num_tiles(at, axis = 0, shape = (64, 64))) {
        // a stored (K, M) and b stored (N, K): A is M-major, B is K-major
        let ta = load(at, index = (0, k), shape = (64, 64), order = (1, 0), padding = 0);
        let tb = load(bt, index = (k, 0), shape = (64, 128), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (0, 0), tile = acc);
}
"""


def test_transposed_majors():
    a, b = operands((64, 160), (160, 128))
    arrays = {"at": np.ascontiguousarray(a.T), "bt": np.ascontiguousarray(b.T),
              "c": np.full((64, 128), np.nan, np.float32)}
    res, _ = run(MAJORS, "majors", arrays, (1, 1))
    # A transposed by the instruction, B not
    assert re.search(r"m64n128k16\.f32\.f16\.f16 \{[^}]*\}, %rd\d+, %rd\d+, %p\d+, 1, 1, 1, 0;",
                     res.ptx)
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


BATCHED = """
@launch(reqntid = (128, 1, 1))
kernel batched(a: Array[f16, 3], b: Array[f16, 3], c: Array[f32, 3]) {
    let z = bid(0);
    let ta = load(a, index = (z, 0, 0), shape = (2, 64, 64));
    let tb = load(b, index = (z, 0, 0), shape = (2, 64, 64));
    store(c, index = (z, 0, 0), tile = ta @ tb);
}
"""


def test_batched():
    a, b = operands((4, 64, 64), (4, 64, 64))
    arrays = {"a": a, "b": b, "c": np.full((4, 64, 64), np.nan, np.float32)}
    res, _ = run(BATCHED, "batched", arrays, (2,))
    assert res.ptx.count("wgmma.mma_async") == 2 * 4     # 2 batches x 4 k-steps, m64n64
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


REGISTERS = """
@launch(reqntid = (256, 1, 1))
kernel regs(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    // an operand computed in registers is stored into its image by the threads
    let ta = astype(load(a, index = (0, 0), shape = (128, 64)) * 2.0, f16);
    let tb = load(b, index = (0, 0), shape = (64, 256));
    store(c, index = (0, 0), tile = mma(ta, tb, full((128, 256), 1.0, f32)));
}
"""


def test_register_operand_two_warp_groups_n256():
    a, b = operands((128, 64), (64, 256))
    arrays = {"a": a, "b": b, "c": np.full((128, 256), np.nan, np.float32)}
    res, _ = run(REGISTERS, "regs", arrays, (1,))
    assert "m64n256k16" in res.ptx
    want = 2 * a.astype(np.float64) @ b.astype(np.float64) + 1
    assert np.array_equal(arrays["c"], want)


def test_two_warp_groups_pipelined():
    src = MATMUL.replace("reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168)", "reqntid = (256, 1, 1)")
    arrays = matmul_arrays(256, 128, 320)
    res, _ = run(src, "matmul", arrays, (2, 1), tma=False)
    assert "wgmma.wait_group.sync.aligned 0" in res.ptx
    assert "wgmma.wait_group.sync.aligned 1" not in res.ptx     # see wgmma_product.wait_depth
    a, b = arrays["a"].astype(np.float64), arrays["b"].astype(np.float64)
    assert np.array_equal(arrays["c"], a @ b)


@pytest.mark.parametrize("bk,span_mode", [(32, 2), (16, 3)])
def test_narrow_k_uses_narrower_swizzles(bk, span_mode):
    # K = 32 (16) f16 is 64 (32) bytes: the operand images use the 64-byte (32-byte) swizzle
    # (descriptor layout type 2 (3), SBO = 8 rows of it)
    src = MATMUL.replace("BK: i32 = 64", f"BK: i32 = {bk}")
    arrays = matmul_arrays(128, 192, 96)
    res, _ = run(src, "matmul", arrays, (1, 2))
    span = {2: 64, 3: 32}[span_mode]
    # PTX prints 64-bit immediates signed
    consts = {int(c) % 2 ** 64 for c in re.findall(r"(-?\b\d{18,20})\b", res.ptx)}
    assert (span_mode << 62) | ((8 * span >> 4) << 32) | (1 << 16) in consts, consts
    a, b = arrays["a"].astype(np.float64), arrays["b"].astype(np.float64)
    assert np.array_equal(arrays["c"], a @ b)


CHAINED = """
@launch(reqntid = (128, 1, 1))
kernel chained(a: Array[f16, 2], b: Array[f16, 2], v: Array[f16, 2], c: Array[f32, 2]) {
    let s = load(a, index = (0, 0), shape = (64, 64)) @ load(b, index = (0, 0), shape = (64, 64));
    // s's accumulator layout is the A fragment of the next product: A from registers
    let p = astype(s * 0.125, f16);
    store(c, index = (0, 0), tile = p @ load(v, index = (0, 0), shape = (64, 128)));
}
"""


def test_a_from_registers():
    a, b = operands((64, 64), (64, 64))
    _, v = operands((1, 1), (64, 128), seed=5)
    arrays = {"a": a, "b": b, "v": v, "c": np.full((64, 128), np.nan, np.float32)}
    res, _ = run(CHAINED, "chained", arrays, (1,))
    # the second product's A is four 32-bit registers, B a descriptor (MN-major: trans 1)
    assert re.search(r"m64n128k16\.f32\.f16\.f16 \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, "
                     r"%rd\d+, %p\d+, 1, 1, 1;", res.ptx)
    p = (a.astype(np.float64) @ b.astype(np.float64) * 0.125).astype(np.float16)  # exact
    want = p.astype(np.float64) @ v.astype(np.float64)
    assert np.all(np.abs(arrays["c"] - want) <= product_bound(p, v))
