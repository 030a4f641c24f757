"""The emulator judges Blackwell PTX it did not see being written: Triton 3.9's tutorial
matmul compiled for sm_100a.

`fixtures/triton_matmul{,_bf16,_tf32,_i8,_e4m3}_sm100.ptx` are what Triton produced for the
kernel of benchmarks/triton_ref/gen_matmul_ptx.py (`--arch 100`, 128 x 128 x 64 tiles, 32 for
tf32, 4 warps, 3 stages; JSON beside each): the accumulator lives in tensor memory
(`tcgen05.alloc`, zeroed by `tcgen05.st.32x32b.x128`), one elected thread issues
`tcgen05.mma.cta_group::1.kind::{f16,tf32,i8,f8f6f4}` (M = 128, N = 128) on 128-byte-swizzled
shared-memory descriptors (A K-major, B MN-major) fed by cp.async, `tcgen05.commit` arrives on
an mbarrier that every thread polls inside an inline-asm block with its own `waitLoop:` label,
and the epilogue reads the accumulator with `tcgen05.ld.32x32b.x128`. If our reading of the
instruction descriptor, the sm_100 matrix descriptor, the TMEM data path of M = 128 or the
32x32b shape were wrong, these would disagree with NumPy.
"""

import json
import math
import pathlib
import re

import numpy as np
import pytest

from tilelang.emulator import EmulatorDevice

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
KIND = {"f16": "kind::f16", "bf16": "kind::f16", "tf32": "kind::tf32", "i8": "kind::i8",
        "e4m3": "kind::f8f6f4"}


def _load(dtype, stem=None):
    stem = stem or ("triton_matmul_sm100" if dtype == "f16" else f"triton_matmul_{dtype}_sm100")
    return (FIXTURES / f"{stem}.ptx").read_text(), \
        json.loads((FIXTURES / f"{stem}.json").read_text())


def operands(dtype, rng, M, N, K):
    """(A, B as stored, A, B as the tensor core sees them: float64 or int64)."""
    import ml_dtypes
    if dtype in ("f16", "bf16"):
        t = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
        A = rng.standard_normal((M, K)).astype(t)
        B = rng.standard_normal((K, N)).astype(t)
        return A.view(np.uint16), B.view(np.uint16), A.astype(np.float64), B.astype(np.float64)
    if dtype == "tf32":
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        # the kernel passes f32 bits: the tensor core ignores the low 13 bits of each
        trunc = lambda m: (m.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa
        return A, B, trunc(A).astype(np.float64), trunc(B).astype(np.float64)
    if dtype == "i8":
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        return A, B, A.astype(np.int64), B.astype(np.int64)
    A = (rng.integers(-8, 9, (M, K)) / 2).astype(ml_dtypes.float8_e4m3fn)
    B = rng.integers(-8, 9, (K, N)).astype(ml_dtypes.float8_e4m3fn)
    return A.view(np.uint8), B.view(np.uint8), A.astype(np.float64), B.astype(np.float64)


def run(dtype, M, N, K, seed=0, stem=None):
    ptx, info = _load(dtype, stem)
    assert info["target"] == "sm_100" and ".target sm_100a" in ptx
    assert f"tcgen05.mma.cta_group::1.{KIND[dtype]}" in ptx
    rng = np.random.default_rng(seed)
    A, B, a, b = operands(dtype, rng, M, N, K)
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pa, pb, pc = dev.to_device(A), dev.to_device(B), dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)                    # NaN: every element must be written
    BM, BN = info["constexprs"]["BM"], info["constexprs"]["BN"]
    grid = (math.ceil(M / BM) * math.ceil(N / BN), 1, 1)
    args = [pa, pb, pc] + [np.int32(v) for v in (M, N, K, K, N, N)] + [0, 0]
    rep = dev.launch(fn, grid, tuple(info["block"]), args, shared_mem=info["shared_bytes"])
    # the cp.async ring and the tensor-core reads in flight pass the check
    assert rep.race_check == "checked: no shared-memory race"
    out = np.int32 if dtype == "i8" else np.float32
    return a, b, dev.from_device(pc, (M, N), out), rep, info


def check(dtype, a, b, C):
    if dtype == "i8":                                  # exact integer products
        assert np.array_equal(C.astype(np.int64), a @ b)
        return
    if dtype == "e4m3":                                # small multiples of 1/2: exact in f32
        assert np.array_equal(C.astype(np.float64), a @ b)
        return
    # products exact in f64; at most one f32 rounding per instruction's K step (the emulator
    # rounds once per mma; the hardware may round more often within the same bound)
    k_step = {"f16": 16, "bf16": 16, "tf32": 8}[dtype]
    bound = math.ceil(a.shape[1] / k_step) * 2.0 ** -23 * (np.abs(a) @ np.abs(b))
    err = np.abs(C.astype(np.float64) - a @ b)
    assert np.all(err <= bound), float((err / bound).max())


@pytest.mark.parametrize("shape", [(256, 256, 192), (127, 208, 80)], ids=["square", "ragged"])
def test_f16_matmul_against_numpy(shape):
    a, b, C, rep, info = run("f16", *shape, seed=sum(shape))
    check("f16", a, b, C)
    M, N, K = shape
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    # one elected thread per CTA issues 4 k16 MMAs per 64-wide K tile
    assert rep.instructions["tcgen05.mma.cta_group::1.kind::f16"] == \
        tiles * 4 * math.ceil(K / 64)
    assert rep.instructions["tcgen05.ld.sync.aligned.32x32b.x128.b32"] == tiles * 128


@pytest.mark.parametrize("dtype", ["bf16", "tf32", "i8", "e4m3"])
def test_other_kinds_ragged_against_numpy(dtype):
    M, N, K = 127, 208, 80             # a partial tile in every dimension
    a, b, C, _, _ = run(dtype, M, N, K, seed=7)
    check(dtype, a, b, C)


@pytest.mark.parametrize("shape", [(64, 64, 64), (127, 208, 80)], ids=["one-tile", "ragged"])
def test_m64_tiles_and_the_16x32bx2_epilogue(shape):
    """BM = BN = 64: `tcgen05.mma` with M = 64 (idesc M field 4) and the accumulator moved by
    `tcgen05.st/ld.16x32bx2.x32` with immHalfSplitoff 32. The PTX ISA's figures of that data
    path are not in the text we read; this kernel, written by Triton for the hardware, is what
    fixes our reading (rows 16w.. in lanes 32w..32w+15; the two half-warps read the same 16
    lanes, the second 32 columns on): a wrong composition would scatter rows or columns."""
    ptx, info = _load("f16", "triton_matmul_64x64_sm100")
    assert "tcgen05.ld.sync.aligned.16x32bx2.x32.b32" in ptx and info["constexprs"]["BM"] == 64
    a, b, C, _, _ = run("f16", *shape, seed=5, stem="triton_matmul_64x64_sm100")
    check("f16", a, b, C)


def test_labels_of_two_inline_asm_blocks_are_apart():
    # both mbarrier waits are `{ .reg .pred complete; waitLoop: ... @!complete bra.uni
    # waitLoop; }`: each branch must stay in its own block
    ptx, _ = _load("f16")
    assert ptx.count("waitLoop:") >= 2


@pytest.mark.parametrize("shape", [(128, 128, 192), (100, 72, 136)], ids=["square", "ragged"])
def test_tma_fed_tcgen05_matmul(shape):
    """Tensor descriptors (gen_tma_matmul_ptx.py --arch 100): `cp.async.bulk.tensor` loads
    completing on mbarriers feed `tcgen05.mma` (128-byte swizzle), the commit's mbarrier frees
    each stage, and C leaves through a TMA store from shared memory."""
    from test_emu_triton_hopper import _bound, run_tma
    ptx = (FIXTURES / "triton_tma_matmul_sm100.ptx").read_text()
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx and "cp.async.bulk.tensor.2d" in ptx
    a, b, C, rep, BK = run_tma(*shape, seed=sum(shape), stem="triton_tma_matmul_sm100",
                               product="tcgen05.mma.cta_group::1.kind::f16")
    assert np.all(np.abs(C - a @ b) <= _bound(a, b))


@pytest.mark.parametrize("shape", [(128, 128, 192), (100, 72, 136)], ids=["square", "ragged"])
def test_tma_fed_mma_sync_matmul_sm120a(shape):
    """Consumer Blackwell (gen_tma_matmul_ptx.py --arch 120): the same descriptors' TMA loads
    into 128-byte-swizzled buffers, read by `ldmatrix` (`.trans` for B) into `mma.sync`: the
    judge of the emulator's reading for Tile's own sm_120a rings
    (tests/codegen/lower/tensorcore/test_sm120a.py)."""
    from test_emu_triton_hopper import _bound, run_tma
    ptx = (FIXTURES / "triton_tma_matmul_sm120.ptx").read_text()
    assert ".target sm_120a" in ptx and "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx
    a, b, C, rep, BK = run_tma(*shape, seed=sum(shape), stem="triton_tma_matmul_sm120",
                               product="mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert np.all(np.abs(C - a @ b) <= _bound(a, b))


def _scaled_launch(stem, A_bytes, sa, B_bytes, sb, M, N, K, edit=None):
    ptx = (FIXTURES / f"{stem}.ptx").read_text()
    if edit is not None:
        ptx = edit(ptx)
    info = json.loads((FIXTURES / f"{stem}.json").read_text())
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pc = dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)
    c = info["constexprs"]
    rep = dev.launch(fn, (M // c["BM"], N // c["BN"], 1), tuple(info["block"]),
                     [dev.to_device(A_bytes), dev.to_device(sa), dev.to_device(B_bytes),
                      dev.to_device(sb), pc, np.int32(M), np.int32(N), np.int32(K), 0, 0],
                     shared_mem=info["shared_bytes"])
    assert rep.race_check == "checked: no shared-memory race"
    return ptx, dev.from_device(pc, (M, N), np.float32).astype(np.float64)


def _scaled_reference(A, sa, B, sb):
    a = A * np.repeat(2.0 ** (sa.astype(np.float64) - 127), 32, axis=1)
    b = B * np.repeat(2.0 ** (sb.astype(np.float64) - 127), 32, axis=1).T
    # exact products; one f32 rounding per 32-element scale block at most
    return a @ b, A.shape[1] / 32 * 2.0 ** -23 * (np.abs(a) @ np.abs(b))


@pytest.mark.parametrize("shape", [(128, 64, 128), (256, 128, 256)], ids=["one-tile", "four"])
def test_scales_stored_with_unpack_16b(shape):
    """BK = 64: two scale bytes per row a tile, stored by `tcgen05.st.32x32b.xN.unpack::16b`
    (register j's halves into columns 2j and 2j + 1, low 16 bits each)."""
    import ml_dtypes
    M, N, K = shape
    rng = np.random.default_rng(K + 1)
    A = (rng.integers(-8, 9, (M, K)) / 2).astype(ml_dtypes.float8_e4m3fn)
    B = (rng.integers(-8, 9, (K, N)) / 4).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(117, 137, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(117, 137, (N, K // 32)).astype(np.uint8)
    ptx, C = _scaled_launch("triton_scaled_matmul_bk64_sm100", A.view(np.uint8), sa,
                            B.view(np.uint8), sb, M, N, K)
    assert "tcgen05.st.sync.aligned.32x32b.x2.unpack::16b.b32" in ptx
    ref, bound = _scaled_reference(A.astype(np.float64), sa, B.astype(np.float64), sb)
    assert np.all(np.abs(C - ref) <= bound)


@pytest.mark.parametrize("shape", [(128, 64, 256), (256, 128, 512)], ids=["one-tile", "four"])
def test_block_scaled_mxfp4_matmul(shape):
    """MXFP4 (gen_scaled_matmul_ptx.py --fmt e2m1): operands packed two e2m1 a byte by the
    runtime's `pack_f4e2m1` (the even K index in bits 0-3), `tcgen05.mma...kind::mxf4.
    block_scale.block32` reading them through shared-memory descriptors, K = 64 and two
    ue8m0 scales per row each step. A nibble order or scale pairing misread scrambles the
    products."""
    from tilelang.runtime.mx_formats import pack_f4e2m1
    M, N, K = shape
    rng = np.random.default_rng(M + K)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    A = rng.choice(np.concatenate([grid, -grid]), (M, K))
    B = rng.choice(np.concatenate([grid, -grid]), (K, N))
    sa = rng.integers(117, 137, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(117, 137, (N, K // 32)).astype(np.uint8)
    b_bytes = np.ascontiguousarray(pack_f4e2m1(B.T).T)          # [K/2, N], pairs along K
    ptx, C = _scaled_launch("triton_scaled_matmul_e2m1_sm100", pack_f4e2m1(A), sa, b_bytes,
                            sb, M, N, K)
    assert "kind::mxf4.block_scale.block32" in ptx
    ref, bound = _scaled_reference(A, sa, B, sb)
    assert np.all(np.abs(C - ref) <= bound)


@pytest.mark.parametrize("shape", [(128, 64, 256), (256, 128, 512)], ids=["one-tile", "four"])
def test_block_scaled_mxfp8_matmul(shape):
    """`tl.dot_scaled` with e4m3 operands and ue8m0 scales per 32 K (gen_scaled_matmul_ptx.py):
    A and both scale tiles are staged in tensor memory by `tcgen05.st`, the product is
    `tcgen05.mma...kind::mxf8f6f4.block_scale.block32` with A from tensor memory. The scale
    layout this fixes (rows 32c + i in lane i of column c, the idesc's scale byte picking the
    K step) and A's (row i in lane i, K bytes along the columns) are not in the ISA's text:
    a wrong reading scales rows by wrong powers of two."""
    import ml_dtypes
    ptx = (FIXTURES / "triton_scaled_matmul_sm100.ptx").read_text()
    info = json.loads((FIXTURES / "triton_scaled_matmul_sm100.json").read_text())
    assert "kind::mxf8f6f4.block_scale.block32 [ %r" in ptx
    M, N, K = shape
    rng = np.random.default_rng(M + N)
    A = (rng.integers(-8, 9, (M, K)) / 2).astype(ml_dtypes.float8_e4m3fn)
    B = (rng.integers(-8, 9, (K, N)) / 4).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(117, 137, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(117, 137, (N, K // 32)).astype(np.uint8)
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pc = dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)
    c = info["constexprs"]
    rep = dev.launch(fn, (M // c["BM"], N // c["BN"], 1), tuple(info["block"]),
                     [dev.to_device(A.view(np.uint8)), dev.to_device(sa),
                      dev.to_device(B.view(np.uint8)), dev.to_device(sb), pc,
                      np.int32(M), np.int32(N), np.int32(K), 0, 0],
                     shared_mem=info["shared_bytes"])
    assert rep.race_check == "checked: no shared-memory race"
    C = dev.from_device(pc, (M, N), np.float32).astype(np.float64)
    ref, bound = _scaled_reference(A.astype(np.float64), sa, B.astype(np.float64), sb)
    assert np.all(np.abs(C - ref) <= bound)


@pytest.mark.parametrize("shape", [(128, 64, 256), (256, 128, 512)], ids=["one-tile", "four"])
def test_block_scaled_mma_sync_sm120a(shape):
    """Consumer Blackwell (sm_120a, no tcgen05): the same MXFP8 `tl.dot_scaled` becomes
    `mma.sync.aligned.m16n8k32...kind::mxf8f6f4.block_scale.scale_vec::1X` with the scales in
    registers ({byte-id, thread-id} pick the byte and the half quad): a misread lane or byte
    scales rows by wrong powers of two."""
    import ml_dtypes
    M, N, K = shape
    rng = np.random.default_rng(M + 3 * N)
    A = (rng.integers(-8, 9, (M, K)) / 2).astype(ml_dtypes.float8_e4m3fn)
    B = (rng.integers(-8, 9, (K, N)) / 4).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(117, 137, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(117, 137, (N, K // 32)).astype(np.uint8)
    ptx, C = _scaled_launch("triton_scaled_matmul_sm120", A.view(np.uint8), sa,
                            B.view(np.uint8), sb, M, N, K)
    assert ".target sm_120a" in ptx and "block_scale.scale_vec::1X" in ptx
    ref, bound = _scaled_reference(A.astype(np.float64), sa, B.astype(np.float64), sb)
    assert np.all(np.abs(C - ref) <= bound)


@pytest.mark.parametrize("shape", [(128, 64, 256), (256, 128, 512)], ids=["one-tile", "four"])
def test_block_scaled_mxfp4_mma_sync_sm120a(shape):
    """MXFP4 on sm_120a: `mma.sync.aligned.m16n8k64...kind::mxf4nvf4.block_scale.
    scale_vec::2X...e2m1.e2m1.f32.ue8m0`: the e2m1 A and B fragments (eight values a
    register, the lowest nibble first) and two scale bytes per row and column each step."""
    from tilelang.runtime.mx_formats import pack_f4e2m1
    M, N, K = shape
    rng = np.random.default_rng(M + 5 * N)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    A = rng.choice(np.concatenate([grid, -grid]), (M, K))
    B = rng.choice(np.concatenate([grid, -grid]), (K, N))
    sa = rng.integers(117, 137, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(117, 137, (N, K // 32)).astype(np.uint8)
    ptx, C = _scaled_launch("triton_scaled_matmul_e2m1_sm120", pack_f4e2m1(A), sa,
                            np.ascontiguousarray(pack_f4e2m1(B.T).T), sb, M, N, K)
    assert "m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X" in ptx
    ref, bound = _scaled_reference(A, sa, B, sb)
    assert np.all(np.abs(C - ref) <= bound)


def test_attention_forward_with_s_and_o_in_tensor_memory():
    """Triton's FlashAttention-style forward for sm_100a (gen_attention_ptx.py --arch 100
    --block-m 128): S = Q K^T and O accumulate in tensor memory, the online softmax reads S
    with tcgen05.ld and rescales O in place with tcgen05.st between the products, with the
    packed `add/mul.f32x2` and three-source `max.f32` of sm_100."""
    import math as m
    ptx = (FIXTURES / "triton_attention_causal_sm100.ptx").read_text()
    info = json.loads((FIXTURES / "triton_attention_causal_sm100.json").read_text())
    assert "mul.f32x2" in ptx and re.search(r"max\.f32\s+%r\d+, %r\d+, %r\d+, %r\d+;", ptx)
    BH, n, D = 2, 200, info["constexprs"]["HEAD_DIM"]
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
    s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    # P is rounded to f16 before P @ V (relative 2^-11) and the output is f16
    np.testing.assert_allclose(out, ref, atol=3e-3, rtol=0)



def _nvfp4_operands(M, N, K, seed):
    """NVFP4 operands: e2m1 values (every code but -0, so a misread nibble shows), and f8e4m3
    scales, one per 16 of K, spanning 2^-9 .. 448 (subnormal scales included), as the bytes
    the kernel reads: a [M, K/2], b [K/2, N] packed along K, a_scale [M, K/16], b_scale
    [N, K/16] (Triton's orientation for B's scales)."""
    import ml_dtypes
    from tilelang.runtime.mx_formats import pack_f4e2m1
    rng = np.random.default_rng(seed)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    A = rng.choice(np.concatenate([grid, -grid[1:]]), (M, K))
    B = rng.choice(np.concatenate([grid, -grid[1:]]), (K, N))
    codes = np.arange(1, 0x7F)                          # every positive e4m3 (no 0, no NaN)
    sa = rng.choice(codes, (M, K // 16)).astype(np.uint8)
    sb = rng.choice(codes, (N, K // 16)).astype(np.uint8)
    val = lambda c: c.view(ml_dtypes.float8_e4m3fn).astype(np.float64)  # noqa: E731
    a = A * np.repeat(val(sa), 16, axis=1)
    b = B * np.repeat(val(sb), 16, axis=1).T
    return (pack_f4e2m1(A), sa, np.ascontiguousarray(pack_f4e2m1(B.T).T), sb), a, b


@pytest.mark.parametrize("stem,form", [
    ("triton_scaled_matmul_nvfp4_sm100", "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale."
                                         "block16"),
    ("triton_scaled_matmul_nvfp4_bk64_sm100", "tcgen05.mma.cta_group::1.kind::mxf4nvf4."
                                              "block_scale.block16"),
    ("triton_scaled_matmul_nvfp4_sm120", "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4."
                                         "block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3")],
    ids=["sm100a", "sm100a-bk64", "sm120a"])
@pytest.mark.parametrize("shape", [(128, 64, 128), (256, 128, 384)], ids=["one-tile", "six"])
def test_block_scaled_nvfp4_matmul(stem, form, shape):
    """NVFP4 (gen_scaled_matmul_ptx.py --fmt e2m1 --scale e4m3): Triton 3.9's `tl.dot_scaled`
    with f8e4m3 scales per 16 of K. sm_100a stages the scales in tensor memory (four bytes a
    cell, one per 16 of K, the idesc's scale type bit 23 clear for ue4m3); sm_120a passes them
    in registers, all four bytes of a word (byte-id 0). A scale read from the wrong byte, lane
    or format scales 16 products by a different e4m3 value; every product here is exact in
    f64 and the f32 sum is within one rounding per 16 terms."""
    M, N, K = shape
    (A8, sa, B8, sb), a, b = _nvfp4_operands(M, N, K, seed=M + N + K)
    ptx, C = _scaled_launch(stem, A8, sa, B8, sb, M, N, K)
    assert form in ptx
    ref = a @ b
    bound = K / 16 * 2.0 ** -23 * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(C - ref) <= bound)


@pytest.mark.parametrize("stem,old,new,error,message", [
    ("triton_scaled_matmul_nvfp4_sm100", "block_scale.block16", "block_scale.block32",
     "ExecutionError", r"instruction descriptor 0x08100480: bit 23: ue4m3 scales \(0\) are for "
                       r"\.kind::mxf4nvf4 with 16-element blocks"),
    ("triton_scaled_matmul_nvfp4_sm100", "mov.b32 \t%r444, 135267456;",
     f"mov.b32 \t%r444, {135267456 | 2 << 29};", "ExecutionError",
     r"scale byte fields 2/0 \(bits 29-30 / 4-5\): with 4 scales a row each instruction they "
     r"are 0"),
    ("triton_scaled_matmul_nvfp4_sm120", "%r299, { 0, 0 }", "%r299, { 2, 0 }", "PTXParseError",
     r"byte-id is 0 and thread-id 0 or 1"),
    ("triton_scaled_matmul_nvfp4_sm120", "scale_vec::4X", "scale_vec::2X", "PTXParseError",
     r"scale_vec::4X \(e2m1, \.ue4m3 or \.ue8m0\)"),
], ids=["ue4m3-block32", "scale-byte-2", "byte-id-2", "ue4m3-2X"])
def test_nvfp4_forms_the_isa_refuses(stem, old, new, error, message):
    """The scale forms the PTX ISA does not have are errors naming the field, not products
    with wrong scales: ue4m3 needs 16-element blocks, and four scales a row fill the whole
    32-bit scale word (byte 0)."""
    from tilelang.emulator import errors
    (A8, sa, B8, sb), _, _ = _nvfp4_operands(128, 64, 128, seed=1)
    assert old in (FIXTURES / f"{stem}.ptx").read_text()
    with pytest.raises(getattr(errors, error), match=message):
        _scaled_launch(stem, A8, sa, B8, sb, 128, 64, 128,
                       edit=lambda t: t.replace(old, new))
