"""tcgen05 and tensor memory (sm_100a): the instruction descriptor, the sm_100 matrix
descriptor with the canonical layouts and swizzles, the M = 128 data path, tcgen05.ld/st/cp/
shift, allocation, and the asynchronous completion through tcgen05.commit, against NumPy and
the PTX ISA's rules."""

import re

import numpy as np
import pytest

from tilelang.emulator.device import EmulatorDevice
from tilelang.emulator.errors import ExecutionError, PTXParseError
from tilelang.emulator.fp8 import decode as fp8_decode, encode as fp8_encode
from tilelang.emulator.smem_matrix import decode_descriptor_sm100, encode_descriptor_sm100

from emu_support import place

SMEM = 49152
NCOLS = 256


def idesc(a, b, N, d=1, M=128, neg_a=0, neg_b=0, a_mn=0, b_mn=0, sat=0, extra=0):
    """The instruction descriptor as the PTX ISA's table lays it out (written here, not taken
    from the emulator): saturate bit 3, D type 4-5, A/B types 7-9/10-12, negate 13/14,
    MN-major 15/16, N >> 3 at 17-22, M >> 4 at 24-28."""
    return (sat << 3) | (d << 4) | (a << 7) | (b << 10) | (neg_a << 13) | (neg_b << 14) | \
        (a_mn << 15) | (b_mn << 16) | ((N >> 3) << 17) | ((M >> 4) << 24) | extra


def _ptx(N, kind="f16", mma_tail="%p2", before_wait="", after_ld="", alloc=NCOLS,
         dealloc=True, target="sm_100a", mma_count=1, prologue=""):
    chunks, c = [], 0
    while c < N:                        # .num is a power of 2 up to 128
        n = 1 << (min(128, N - c).bit_length() - 1)
        chunks.append((c, n))
        c += n
    nreg = chunks[0][1]
    regs = ", ".join(f"%v{i}" for i in range(nreg))
    init = "\n".join(f"  mov.b32 %v{i}, %r40;" for i in range(nreg))
    body = []
    for c, n in chunks:
        rl = ", ".join(f"%v{i}" for i in range(n))
        body.append(f"  tcgen05.st.sync.aligned.32x32b.x{n}.b32 [%r21+{c}], {{{rl}}};")
    st_init = "\n".join(body)
    loads = []
    for c, n in chunks:
        rl = ", ".join(f"%v{i}" for i in range(n))
        loads.append(f"  tcgen05.ld.sync.aligned.32x32b.x{n}.b32 {{{rl}}}, [%r21+{c}];")
        loads.append("  tcgen05.wait::ld.sync.aligned;")
        loads += [f"  st.global.b32 [%rd10+{4 * (c + i)}], %v{i};" for i in range(n)]
    mmas = "\n".join(f"  @%p4 tcgen05.mma.cta_group::1.kind::{kind} [%r20], %rd3, %rd4, %r42, "
                     f"{mma_tail};" for _ in range(mma_count))
    free = "  @%p5 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, {};".format(alloc) \
        if dealloc else ""
    return f""".version 8.7
.target {target}
.address_size 64
.visible .entry k(.param .u64 k_src, .param .u64 k_out, .param .u32 k_nwords,
    .param .u64 k_adesc, .param .u64 k_bdesc, .param .u32 k_idesc, .param .u32 k_enable,
    .param .u32 k_init)
{{
  .reg .pred %p<8>;
  .reg .b32 %r<64>;
  .reg .b64 %rd<32>;
  .reg .b32 %v<{nreg}>;
  .shared .align 1024 .b8 smem[{SMEM}];
  .shared .align 8 .b64 bar;
  .shared .align 8 .b64 taddr;         // (a multiple of 8 bytes in all: see the report)
  ld.param.u64 %rd1, [k_src];
  ld.param.u64 %rd2, [k_out];
  ld.param.u32 %r1, [k_nwords];
  ld.param.u64 %rd3, [k_adesc];
  ld.param.u64 %rd4, [k_bdesc];
  ld.param.u32 %r42, [k_idesc];
  ld.param.u32 %r41, [k_enable];
  ld.param.u32 %r40, [k_init];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %r2;
  mov.u32 %r5, smem;
LOOP:
  setp.ge.u32 %p1, %r3, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd5, %r3, 4;
  add.s64 %rd6, %rd1, %rd5;
  ld.global.u32 %r4, [%rd6];
  shl.b32 %r6, %r3, 2;
  add.s32 %r7, %r5, %r6;
  st.shared.u32 [%r7], %r4;
  add.s32 %r3, %r3, %ntid.x;
  bra LOOP;
DONE:
  setp.eq.u32 %p4, %r2, 0;
  setp.lt.u32 %p5, %r2, 32;
  @%p4 mbarrier.init.shared::cta.b64 [bar], 1;
  @%p5 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [taddr], {alloc};
{prologue}
  bar.sync 0;
  ld.shared.b32 %r20, [taddr];
  shr.u32 %r22, %r2, 5;
  and.b32 %r22, %r22, 3;
  shl.b32 %r22, %r22, 21;
  add.s32 %r21, %r20, %r22;
{init}
{st_init}
  tcgen05.wait::st.sync.aligned;
  fence.proxy.async.shared::cta;
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  shr.u32 %r8, %r5, 4;
  cvt.u64.u32 %rd7, %r8;
  add.s64 %rd3, %rd3, %rd7;
  add.s64 %rd4, %rd4, %rd7;
  setp.ne.u32 %p2, %r41, 0;
{mmas}
  @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
{before_wait}
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  tcgen05.fence::after_thread_sync;
  mul.wide.u32 %rd9, %r2, {4 * N};
  add.s64 %rd10, %rd2, %rd9;
{chr(10).join(loads)}
{after_ld}
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
{free}
  ret;
}}
"""


def _run(ptx, img, adesc, bdesc, desc, N, enable=0, init=0, out_dtype=np.float32,
         race_check=False):
    dev = EmulatorDevice(race_check=race_check)
    fn = dev.load_module(ptx).get_function("k")
    src = dev.to_device(img.view(np.uint32))
    out = dev.malloc(128 * N * 4)
    dev.launch(fn, (1, 1, 1), (128, 1, 1),
               [src, out, np.uint32(img.size // 4), np.uint64(adesc), np.uint64(bdesc),
                np.uint32(desc), np.uint32(enable), np.uint32(init)])
    return dev.from_device(out, (128, N), out_dtype)


def layout(img, mat, base, esize, k_major, sw):
    """Place `mat` (rows x K) at `base` in a canonical layout (test_emu_wgmma's `place`,
    from the PTX ISA's table); returns its sm_100 descriptor."""
    rows, K = mat.shape
    if k_major:                 # core matrices of 8 rows x 16 B; the second K half at LBO
        lbo, sbo = (128 * (rows // 8), 128) if sw == 0 else (16, 8 * sw)
    elif sw == 0:               # 16-byte MN chunks 128 B apart, K groups of 8 at LBO
        lbo, sbo = 128 * (rows * esize // 16), 128
    else:                       # MN atoms of sw bytes x 8 K at LBO, K groups of 8 at SBO
        lbo, sbo = 8 * sw * max(K // 8, 1), 8 * sw
    place(img, base, mat, esize, k_major, sw, lbo, sbo)
    return encode_descriptor_sm100(base, lbo, sbo, sw)


B_BASE = 16384
F16, BF16, TF32 = 0, 1, 2


def product(kind, A, B, esize, a_code, b_code, N, sw=128, ka=True, kb=True, enable=0, init=0,
            out_dtype=np.float32, **kw):
    """D (128 x N) of one tcgen05.mma through the kernel above."""
    img = np.zeros(SMEM, np.uint8)
    ad = layout(img, A, 0, esize, ka, sw)
    bd = layout(img, B, B_BASE, esize, kb, sw)
    d = idesc(a_code, b_code, N, a_mn=int(not ka), b_mn=int(not kb),
              d=2 if kind == "i8" else 1, **kw)
    return _run(_ptx(N, kind=kind), img, ad, bd, d, N, enable, init, out_dtype)


@pytest.mark.parametrize("sw,ka,kb", [(0, True, True), (32, True, True), (64, True, False),
                                      (128, True, False), (0, False, False),
                                      (128, False, True), (32, False, False)])
def test_f16_layouts_and_swizzles(sw, ka, kb):
    rng = np.random.default_rng(sw + 2 * ka + kb)
    N = 64
    A = rng.standard_normal((128, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)          # B[n, k]
    D = product("f16", A, B, 2, F16, F16, N, sw, ka, kb)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    np.testing.assert_allclose(D, ref, rtol=1e-6, atol=1e-6)


def test_m64_rows_sit_in_the_first_16_lanes_of_each_warp():
    # D row 16w + i in lane 32w + i (i < 16): each warp's tcgen05.ld.32x32b reads its slab
    rng = np.random.default_rng(64)
    N = 24
    A = rng.standard_normal((64, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    init = np.float32(-7.0).view(np.uint32)
    D = product("f16", A, B, 2, F16, F16, N, enable=1, init=init, M=64)
    rows = np.array([32 * (r // 16) + r % 16 for r in range(64)])
    ref = A.astype(np.float64) @ B.astype(np.float64).T - 7.0
    np.testing.assert_allclose(D[rows], ref, rtol=1e-6, atol=1e-6)
    untouched = np.setdiff1d(np.arange(128), rows)
    assert np.all(D[untouched] == -7.0)


@pytest.mark.parametrize("N", [16, 48, 256])
def test_n_accumulate_negate_and_scale_input(N):
    rng = np.random.default_rng(N)
    A = rng.standard_normal((128, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    ab = A.astype(np.float64) @ B.astype(np.float64).T
    init = np.float32(2.5).view(np.uint32)
    D = product("f16", A, B, 2, F16, F16, N, enable=1, init=init, neg_a=1)
    np.testing.assert_allclose(D, 2.5 - ab, rtol=1e-6, atol=1e-6)
    D0 = product("f16", A, B, 2, F16, F16, N, enable=0, init=init, neg_b=1)
    np.testing.assert_allclose(D0, -ab, rtol=1e-6, atol=1e-6)


def test_scale_input_d_and_disabled_output_lanes():
    rng = np.random.default_rng(5)
    N = 32
    A = rng.standard_normal((128, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, A, 0, 2, True, 128), layout(img, B, B_BASE, 2, True, 128)
    # D = A B + D * 2^-3 on lanes whose bit of {r50..r53} is clear; lanes 1, 40, 127 keep D
    pro = "\n".join(["  mov.b32 %r50, 2;", "  mov.b32 %r51, 256;", "  mov.b32 %r52, 0;",
                      "  mov.b32 %r53, 2147483648;"])
    ptx = _ptx(N, mma_tail="{%r50, %r51, %r52, %r53}, %p2, 3", prologue=pro)
    D = _run(ptx, img, ad, bd, idesc(F16, F16, N), N, 1, np.float32(8.0).view(np.uint32))
    ref = A.astype(np.float64) @ B.astype(np.float64).T + 1.0
    kept = [1, 40, 127]
    ref[kept] = 8.0
    np.testing.assert_allclose(D, ref, rtol=1e-6, atol=1e-6)


def test_bf16_tf32_and_fp8_kinds():
    rng = np.random.default_rng(9)
    N = 32
    X = rng.standard_normal((128, 16)).astype(np.float32)
    Y = rng.standard_normal((N, 16)).astype(np.float32)
    xb, yb = (X.view(np.uint32) >> 16).astype(np.uint16), (Y.view(np.uint32) >> 16).astype(
        np.uint16)
    fb = lambda h: (h.astype(np.uint32) << 16).view(np.float32).astype(np.float64)  # noqa
    D = product("f16", xb, yb, 2, BF16, BF16, N)
    np.testing.assert_allclose(D, fb(xb) @ fb(yb).T, rtol=1e-6, atol=1e-6)
    # tf32: 8 K elements of 4 bytes; the low 13 bits of each f32 are not used
    Xt, Yt = X[:, :8].copy(), Y[:, :8].copy()
    trunc = lambda m: (m.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa
    D = product("tf32", Xt, Yt, 4, TF32, TF32, N, sw=64, kb=False)
    ref = trunc(Xt).astype(np.float64) @ trunc(Yt).astype(np.float64).T
    np.testing.assert_allclose(D, ref, rtol=1e-6, atol=1e-6)
    # f8f6f4 with e5m2 A and e4m3 B (type codes 1 and 0), 32 K elements
    a8 = fp8_encode(rng.standard_normal((128, 32)), "e5m2")
    b8 = fp8_encode(rng.standard_normal((N, 32)), "e4m3")
    D = product("f8f6f4", a8.astype(np.uint8), b8.astype(np.uint8), 1, 1, 0, N, ka=False)
    ref = fp8_decode(a8, "e5m2").astype(np.float64) @ fp8_decode(b8, "e4m3").astype(
        np.float64).T
    np.testing.assert_allclose(D, ref, rtol=1e-6, atol=1e-6)


def test_i8_kinds_wrap_and_saturate():
    rng = np.random.default_rng(4)
    N = 16
    A = rng.integers(0, 256, (128, 32)).astype(np.uint8)        # u8 A (code 0)
    B = rng.integers(-128, 128, (N, 32)).astype(np.int8)        # s8 B (code 1)
    ref = A.astype(np.int64) @ B.astype(np.int64).T
    D = product("i8", A, B.view(np.uint8), 1, 0, 1, N, out_dtype=np.int32)
    assert np.array_equal(D.astype(np.int64), ref)
    big = np.int32(2 ** 31 - 5).view(np.uint32)                 # accumulate past the top
    Dw = product("i8", A, B.view(np.uint8), 1, 0, 1, N, enable=1, init=big,
                 out_dtype=np.int32)
    total = ref + (2 ** 31 - 5)
    assert np.array_equal(Dw.astype(np.int64), (total + 2 ** 31) % 2 ** 32 - 2 ** 31)
    Ds = product("i8", A, B.view(np.uint8), 1, 0, 1, N, enable=1, init=big, sat=1,
                 out_dtype=np.int32)
    assert np.array_equal(Ds.astype(np.int64), np.clip(total, -2 ** 31, 2 ** 31 - 1))


def test_chained_mmas_complete_in_issue_order():
    rng = np.random.default_rng(1)
    N = 16
    A = rng.standard_normal((128, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, A, 0, 2, True, 128), layout(img, B, B_BASE, 2, True, 128)
    D = _run(_ptx(N, mma_tail="1", mma_count=3), img, ad, bd, idesc(F16, F16, N), N, 0,
             np.float32(1.0).view(np.uint32))
    np.testing.assert_allclose(D, 1 + 3 * (A.astype(np.float64) @ B.astype(np.float64).T),
                               rtol=1e-6, atol=1e-6)


def test_triton_descriptor_constants_decode_as_the_isa_says():
    # Triton 3.9's sm_100 kernels OR 0x40004040 into the high word: version 0b001 (bit 46),
    # SBO 1024 (64 << 4), layout type 2 (bits 61-63: the 128-byte swizzle)
    f = decode_descriptor_sm100((0x40004040 << 32) | (0x200 << 16) | 0x40)
    assert (f["version"], f["sbo"], f["swizzle"], f["layout"]) == (1, 1024, 128, 2)
    assert (f["start"], f["lbo"]) == (0x400, 0x2000)
    for sw, code in ((0, 0), (32, 6), (64, 4), (128, 2)):
        assert encode_descriptor_sm100(0, 16, 1024, sw) >> 61 == code


def test_reading_the_accumulator_before_the_commit_completes_is_an_error():
    N = 16
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.zeros((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.zeros((N, 16), np.float16), B_BASE, 2, True, 128)
    early = "  tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r60}, [%r21];"
    with pytest.raises(ExecutionError, match=r"tcgen05.ld.sync.aligned.32x32b.x1.b32 reads "
                       r"tensor memory \(lane 0, column 0\) that the asynchronous tcgen05 "
                       r"operation at PTX line \d+ has not finished writing: wait on the "
                       r"mbarrier of its tcgen05.commit first"):
        _run(_ptx(N, before_wait=early), img, ad, bd, idesc(F16, F16, N), N)


@pytest.mark.parametrize("change,message", [
    ({"alloc": 48}, r"48 columns; the count must be a power of 2 from 32 to 512"),
    ({"dealloc": False}, r"a CTA exited with 256 tensor memory column\(s\) still allocated"),
    ({"prologue": "  @%p5 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
                  "  @%p5 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [taddr], 32;"},
     r"tcgen05.alloc.* after the CTA's tcgen05.relinquish_alloc_permit"),
    ({"alloc": 32}, r"tensor memory column 32 is not allocated"),
    ({"after_ld": "  tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r60}, [%r20];"},
     r"warp 1 of the CTA reaches tensor memory lanes 32..63; the address names lane 0"),
])
def test_allocation_and_access_errors(change, message):
    N = 64
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.zeros((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.zeros((N, 16), np.float16), B_BASE, 2, True, 128)
    with pytest.raises(ExecutionError, match=message):
        _run(_ptx(N, **change), img, ad, bd, idesc(F16, F16, N), N)


@pytest.mark.parametrize("desc,message", [
    (idesc(F16, F16, 64, M=32), r"M = 32: cta_group::1 takes M = 64 or 128"),
    (idesc(F16, F16, 0, M=64), r"N = 0: M = 64 takes N from 8 to 256 in steps of 8"),
    (idesc(F16, F16, 24), r"N = 24: M = 128 takes N from 16 to 256 in steps of 16"),
    (idesc(F16, BF16, 64), r".kind::f16 multiplies matching types, not f16 x bf16"),
    (idesc(F16, F16, 64, extra=4), r"bit 2 \(sparsity\) set in a dense tcgen05.mma"),
    (idesc(F16, F16, 64, d=0), r"D type f16: the emulator supports f32 accumulators"),
    (idesc(F16, F16, 64, sat=1), r"bit 3 \(saturate\) applies to .kind::i8 only"),
    (idesc(TF32, TF32, 64), r"A/B type codes 2/2 are not types of .kind::f16"),
])
def test_instruction_descriptor_errors(desc, message):
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.zeros((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.zeros((64, 16), np.float16), B_BASE, 2, True, 128)
    with pytest.raises(ExecutionError, match=r"instruction descriptor 0x[0-9a-f]{8}: " + message):
        _run(_ptx(64), img, ad, bd, desc, 64)


def test_matrix_descriptor_errors():
    img = np.zeros(SMEM, np.uint8)
    ad = layout(img, np.zeros((128, 16), np.float16), 0, 2, True, 128)
    bd = layout(img, np.zeros((64, 16), np.float16), B_BASE, 2, True, 128)
    with pytest.raises(ExecutionError, match=r"B descriptor 0x[0-9a-f]{16}: bits 46-48 must "
                       r"be 0b001 \(found 0b000\)"):
        _run(_ptx(64), img, ad, bd & ~(1 << 46), idesc(F16, F16, 64), 64)
    with pytest.raises(ExecutionError, match=r"A descriptor layout type 1 \(bits 61-63\) is "
                       r"reserved or not supported"):
        _run(_ptx(64), img, (ad & ~(7 << 61)) | (1 << 61), bd, idesc(F16, F16, 64), 64)


def test_tcgen05_needs_an_sm_100a_family_target():
    for target, why in (("sm_90a", r"needs sm_100 or newer"),
                        ("sm_100", r"needs the arch-specific target sm_100a"),
                        ("sm_120a", r"sm_12x has no tcgen05")):
        with pytest.raises(PTXParseError, match=why):
            EmulatorDevice().load_module(_ptx(16, target=target)).get_function("k")


def test_inval_while_a_commit_is_still_to_arrive():
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.zeros((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.zeros((16, 16), np.float16), B_BASE, 2, True, 128)
    with pytest.raises(ExecutionError, match=r"mbarrier.inval while the tcgen05.commit at PTX "
                       r"line \d+ is still to arrive on it"):
        _run(_ptx(16, before_wait="  @%p4 mbarrier.inval.shared::cta.b64 [bar];"), img, ad, bd,
             idesc(F16, F16, 16), 16)


def test_race_check_passes_the_protocol():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((128, 16)).astype(np.float16)
    B = rng.standard_normal((16, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, A, 0, 2, True, 128), layout(img, B, B_BASE, 2, True, 128)
    D = _run(_ptx(16), img, ad, bd, idesc(F16, F16, 16), 16, race_check=True)
    np.testing.assert_allclose(D, A.astype(np.float64) @ B.astype(np.float64).T, rtol=1e-6,
                               atol=1e-6)


def test_missing_proxy_fence_is_reported():
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.ones((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.ones((16, 16), np.float16), B_BASE, 2, True, 128)
    ptx = _ptx(16).replace("  fence.proxy.async.shared::cta;\n", "")
    with pytest.raises(ExecutionError, match=r"tcgen05.mma.cta_group::1.kind::f16 \(operand "
                       r"A\) reads shared memory written at PTX line \d+ through the generic "
                       r"proxy"):
        _run(ptx, img, ad, bd, idesc(F16, F16, 16), 16)


def _cp_ptx(form, shift=False):
    return f""".version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 k_src, .param .u64 k_out, .param .u32 k_nwords,
    .param .u64 k_sdesc)
{{
  .reg .pred %p<8>;
  .reg .b32 %r<64>;
  .reg .b64 %rd<32>;
  .shared .align 1024 .b8 smem[8192];
  .shared .align 8 .b64 bar;
  .shared .align 8 .b64 taddr;
  ld.param.u64 %rd1, [k_src];
  ld.param.u64 %rd2, [k_out];
  ld.param.u32 %r1, [k_nwords];
  ld.param.u64 %rd3, [k_sdesc];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %r2;
  mov.u32 %r5, smem;
LOOP:
  setp.ge.u32 %p1, %r3, %r1;
  @%p1 bra DONE;
  mul.wide.u32 %rd5, %r3, 4;
  add.s64 %rd6, %rd1, %rd5;
  ld.global.u32 %r4, [%rd6];
  shl.b32 %r6, %r3, 2;
  add.s32 %r7, %r5, %r6;
  st.shared.u32 [%r7], %r4;
  add.s32 %r3, %r3, %ntid.x;
  bra LOOP;
DONE:
  setp.eq.u32 %p4, %r2, 0;
  setp.lt.u32 %p5, %r2, 32;
  @%p4 mbarrier.init.shared::cta.b64 [bar], 1;
  @%p5 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [taddr], 32;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  ld.shared.b32 %r20, [taddr];
  shr.u32 %r22, %r2, 5;
  and.b32 %r22, %r22, 3;
  shl.b32 %r22, %r22, 21;
  add.s32 %r21, %r20, %r22;
  shr.u32 %r8, %r5, 4;
  cvt.u64.u32 %rd7, %r8;
  add.s64 %rd3, %rd3, %rd7;
  @%p4 tcgen05.cp.cta_group::1.{form} [%r20], %rd3;
  {"@%p4 tcgen05.shift.cta_group::1.down [%r20];" if shift else ""}
  @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  tcgen05.ld.sync.aligned.32x32b.x8.b32 {{%r30, %r31, %r32, %r33, %r34, %r35, %r36, %r37}}, [%r21];
  tcgen05.wait::ld.sync.aligned;
  mul.wide.u32 %rd9, %r2, 32;
  add.s64 %rd10, %rd2, %rd9;
  st.global.v4.b32 [%rd10], {{%r30, %r31, %r32, %r33}};
  st.global.v4.b32 [%rd10+16], {{%r34, %r35, %r36, %r37}};
  bar.sync 0;
  @%p5 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
  ret;
}}
"""


@pytest.mark.parametrize("form,rows,nbytes,shift", [
    ("128x256b", 128, 32, False), ("128x128b", 128, 16, False),
    ("32x128b.warpx4", 32, 16, False), ("128x256b", 128, 32, True),
    ("128x128b", 128, 16, True)])
def test_cp_from_shared_memory_and_shift_down(form, rows, nbytes, shift):
    rng = np.random.default_rng(rows + nbytes)
    M = rng.integers(0, 2 ** 32, (rows, nbytes // 4), dtype=np.uint64).astype(np.uint32)
    img = np.zeros(8192, np.uint8)
    # K-major, no swizzle: 8-row core matrices of 16 bytes; the second 16 bytes at LBO
    lbo, sbo = 128 * (rows // 8), 128
    place(img, 0, M.view(np.uint8).reshape(rows, nbytes), 1, True, 0, lbo, sbo)
    dev = EmulatorDevice()
    fn = dev.load_module(_cp_ptx(form, shift)).get_function("k")
    out = dev.malloc(128 * 32)
    dev.memset(out, 0, 128 * 32)
    dev.launch(fn, (1, 1, 1), (128, 1, 1), [dev.to_device(img.view(np.uint32)), out,
                                            np.uint32(2048),
                                            np.uint64(encode_descriptor_sm100(0, lbo, sbo))])
    got = dev.from_device(out, (128, 8), np.uint32)[:, :nbytes // 4]
    want = np.tile(M, (128 // rows, 1))          # .warpx4: every warp's 32 lanes get the rows
    if shift:                                    # lanes 1..31 take lanes 0..30 (256 bits)
        want[1:32, :8] = M[0:31, :8]
    assert np.array_equal(got, want)


def test_race_check_sees_the_operands_read_until_the_commit_completes():
    # warp 1 overwrites A while the MMA may still read it: only the commit's mbarrier orders
    # the reads before later writes
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.ones((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.ones((16, 16), np.float16), B_BASE, 2, True, 128)
    early = "  setp.eq.u32 %p6, %r2, 32;\n  @%p6 st.shared.u32 [smem], %r1;"
    from tilelang.emulator.errors import SharedMemoryRace
    with pytest.raises(SharedMemoryRace, match=r"warp 1 writes shared memory that the "
                       r"in-flight tcgen05 operation of warp group 0 read, and nothing orders"):
        _run(_ptx(16, before_wait=early), img, ad, bd, idesc(F16, F16, 16), 16,
             race_check=True)
    late = "  setp.eq.u32 %p6, %r2, 32;\n  @%p6 st.shared.u32 [smem], %r1;"
    D = _run(_ptx(16, after_ld=late), img, ad, bd, idesc(F16, F16, 16), 16, race_check=True)
    assert np.all(D == 16.0)


def test_a_from_tensor_memory():
    # A staged by tcgen05.st: row i in lane i, its 32 bytes of K in 8 cells, lowest byte first
    rng = np.random.default_rng(12)
    N = 16
    A = rng.standard_normal((128, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    bd = layout(img, B, B_BASE, 2, True, 128)
    words = A.view(np.uint32)                                      # (128, 8)
    img[40960:40960 + words.nbytes] = words.view(np.uint8).reshape(-1)
    # each thread reads its row's 8 words from shared memory and stores them at column 128
    pro = "\n".join(["  mul.lo.u32 %r54, %r2, 32;", "  add.s32 %r54, %r54, 40960;",
                     "  add.s32 %r54, %r54, %r5;"] +
                    [f"  ld.shared.u32 %r{44 + j}, [%r54+{4 * j}];" for j in range(8)])
    ptx = _ptx(N, prologue="").replace(
        "  tcgen05.wait::st.sync.aligned;",
        pro + "\n  tcgen05.st.sync.aligned.32x32b.x8.b32 [%r21+128], {%r44, %r45, %r46, "
        "%r47, %r48, %r49, %r50, %r51};\n  tcgen05.wait::st.sync.aligned;")
    ptx = ptx.replace("tcgen05.mma.cta_group::1.kind::f16 [%r20], %rd3,",
                      "tcgen05.mma.cta_group::1.kind::f16 [%r20], [%r55],")
    ptx = ptx.replace("  setp.ne.u32 %p2, %r41, 0;", "  setp.ne.u32 %p2, %r41, 0;\n"
                      "  add.s32 %r55, %r20, 128;")
    D = _run(ptx, img, 0, bd, idesc(F16, F16, N), N)
    np.testing.assert_allclose(D, A.astype(np.float64) @ B.astype(np.float64).T, rtol=1e-6,
                               atol=1e-6)


def test_pack_and_unpack_16b():
    # st.unpack::16b: register j's halves to columns 2j, 2j + 1 (low 16 bits, upper zeroed);
    # ld.pack::16b gathers them back, and a plain ld shows the cells
    words = np.arange(128 * 2, dtype=np.uint32).reshape(128, 2) * np.uint32(0x00010003) + \
        np.uint32(0x12340000)
    img = np.zeros(SMEM, np.uint8)
    img[40960:40960 + words.nbytes] = words.view(np.uint8).reshape(-1)
    pro = "\n".join(["  mul.lo.u32 %r54, %r2, 8;", "  add.s32 %r54, %r54, 40960;",
                     "  add.s32 %r54, %r54, %r5;", "  ld.shared.u32 %r44, [%r54];",
                     "  ld.shared.u32 %r45, [%r54+4];"])
    ptx = _ptx(16).replace(
        "  tcgen05.wait::st.sync.aligned;",
        pro + "\n  tcgen05.st.sync.aligned.32x32b.x2.unpack::16b.b32 [%r21+64], {%r44, %r45};"
        "\n  tcgen05.wait::st.sync.aligned;"
        "\n  tcgen05.ld.sync.aligned.32x32b.x2.pack::16b.b32 {%r46, %r47}, [%r21+64];"
        "\n  tcgen05.ld.sync.aligned.32x32b.x4.b32 {%r48, %r49, %r50, %r51}, [%r21+64];"
        "\n  tcgen05.wait::ld.sync.aligned;"
        "\n  mul.wide.u32 %rd20, %r2, 24;\n  ld.param.u64 %rd21, [k_out];"
        "\n  add.s64 %rd21, %rd21, %rd20;"
        "\n  st.global.v2.u32 [%rd21], {%r46, %r47};"
        "\n  st.global.v2.u32 [%rd21+8], {%r48, %r49};"
        "\n  st.global.v2.u32 [%rd21+16], {%r50, %r51};\n  bar.sync 0;"
        "\n  @%p5 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 256;\n  ret;")
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function("k")
    out = dev.malloc(128 * 24)
    dev.launch(fn, (1, 1, 1), (128, 1, 1),
               [dev.to_device(img.view(np.uint32)), out, np.uint32(img.size // 4), np.uint64(0),
                np.uint64(0), np.uint32(0), np.uint32(0), np.uint32(0)])
    got = dev.from_device(out, (128, 6), np.uint32)
    assert np.array_equal(got[:, :2], words)
    halves = np.stack([words & 0xFFFF, words >> 16], -1).reshape(128, 4)
    assert np.array_equal(got[:, 2:], halves)


def test_a_commit_covers_the_operations_an_earlier_commit_covered():
    # the MMA is committed to a second mbarrier nobody waits for, then an empty commit goes
    # to `bar`: PTX's commit tracks every earlier tcgen05 operation of the thread, so seeing
    # `bar`'s phase orders the MMA's operand reads before warp 1's later write
    img = np.zeros(SMEM, np.uint8)
    ad, bd = layout(img, np.ones((128, 16), np.float16), 0, 2, True, 128), \
        layout(img, np.ones((16, 16), np.float16), B_BASE, 2, True, 128)
    other = f"  add.u32 %r60, %r5, {SMEM - 8};\n  @%p4 mbarrier.init.shared::cta.b64 [%r60], 1;"
    tail = "%p2;\n  @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 " \
           "[%r60]"
    late = "  setp.eq.u32 %p6, %r2, 32;\n  @%p6 st.shared.u32 [smem], %r1;"
    ptx = _ptx(16, mma_tail=tail, prologue=other, after_ld=late)
    assert ptx.count("tcgen05.commit") == 2
    D = _run(ptx, img, ad, bd, idesc(F16, F16, 16), 16, race_check=True)
    assert np.all(D == 16.0)
