"""wgmma (sm_90a): descriptors, canonical layouts and swizzles, fragment layout, the async
protocol (commit/wait) and the warp-group convergence checks, against NumPy."""

import numpy as np
import pytest

from tilelang.emulator.device import EmulatorDevice
from tilelang.emulator.errors import ExecutionError, PTXParseError, WarpDivergence
from tilelang.emulator.fp8 import decode as fp8_decode, encode as fp8_encode
from tilelang.emulator.ops_wgmma import decode_descriptor, encode_descriptor

from emu_support import place

SMEM = 49152


def _ptx(N, types="f32.f16.f16", k=16, a_regs=False, tail="1, 1, 0, 0", dtype_regs="f32",
         block_check="", before_wait="", wait="0", extra="", nacc=None):
    nacc = nacc or (N // 2 if dtype_regs == "f32" else N // 4)
    acc = ", ".join(f"%f{i}" for i in range(nacc)) if dtype_regs == "f32" else \
        ", ".join(f"%q{i}" for i in range(nacc))
    init = "\n".join(f"  mov.b32 {'%f' if dtype_regs == 'f32' else '%q'}{i}, %r40;"
                     for i in range(nacc))
    stores = "\n".join(f"  st.global.b32 [%rd10+{4 * i}], {'%f' if dtype_regs == 'f32' else '%q'}"
                       f"{i};" for i in range(nacc))
    a_op = "{%r50, %r51, %r52, %r53}" if a_regs else "%rd3"
    load_a = ""
    if a_regs:      # A fragment words from global: areg[tid*4 + j]
        load_a = "\n".join(["  ld.param.u64 %rd20, [k_areg];", "  mul.wide.u32 %rd21, %r2, 16;",
                            "  add.s64 %rd20, %rd20, %rd21;"] +
                           [f"  ld.global.b32 %r{50 + j}, [%rd20+{4 * j}];" for j in range(4)])
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_src, .param .u64 k_out, .param .u32 k_nwords,
    .param .u64 k_adesc, .param .u64 k_bdesc, .param .u32 k_scaled, .param .u32 k_init,
    .param .u64 k_areg)
{{
  .reg .pred %p<8>;
  .reg .b32 %r<64>;
  .reg .b64 %rd<32>;
  .reg .f32 %f<{max(nacc, 1)}>;
  .reg .b32 %q<{max(nacc, 1)}>;
  .shared .align 1024 .b8 smem[{SMEM}];
  ld.param.u64 %rd1, [k_src];
  ld.param.u64 %rd2, [k_out];
  ld.param.u32 %r1, [k_nwords];
  ld.param.u64 %rd3, [k_adesc];
  ld.param.u64 %rd4, [k_bdesc];
  ld.param.u32 %r41, [k_scaled];
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
  bar.sync 0;
  fence.proxy.async.shared::cta;
  shr.u32 %r8, %r5, 4;
  cvt.u64.u32 %rd7, %r8;
  add.s64 %rd3, %rd3, %rd7;
  add.s64 %rd4, %rd4, %rd7;
{load_a}
{init}
{block_check}
  setp.ne.u32 %p2, %r41, 0;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n{N}k{k}.{types} {{{acc}}}, {a_op}, %rd4, %p2{", " + tail if tail else ""};
{extra}
  wgmma.commit_group.sync.aligned;
{before_wait}
  wgmma.wait_group.sync.aligned {wait};
  mul.wide.u32 %rd9, %r2, {4 * nacc};
  add.s64 %rd10, %rd2, %rd9;
{stores}
  ret;
}}
"""


def fragment(out_words, N, nregs_per_thread):
    """(128 threads, N/2) accumulator values -> the 64 x N matrix (PTX ISA figure for
    wgmma D: row = 16*warp + lane/4 + 8*(i/2 % 2), col = 8*(i/4) + 2*(lane%4) + i%2)."""
    D = np.zeros((64, N), out_words.dtype)
    for t in range(128):
        w, lane = t // 32, t % 32
        for i in range(N // 2):
            D[16 * w + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2] = \
                out_words[t, i]
    return D


def _run(ptx, img, adesc, bdesc, nacc, scaled=0, init=0.0, areg=None, block=128,
         out_dtype=np.float32):
    dev = EmulatorDevice()
    mod = dev.load_module(ptx)
    fn = mod.get_function("k")
    src = dev.to_device(img.view(np.uint32))
    out = dev.malloc(max(block, 128) * nacc * 4)
    ar = dev.to_device(areg if areg is not None else np.zeros(128 * 4, np.uint32))
    init_bits = np.float32(init).view(np.uint32)
    dev.launch(fn, (1, 1, 1), (block, 1, 1),
               [src, out, np.uint32(img.size // 4), np.uint64(adesc), np.uint64(bdesc),
                np.uint32(scaled), np.uint32(init_bits), ar])
    return dev.from_device(out, (128, nacc), out_dtype)


LAYOUT_CASES = [  # (swizzle, k_major A, k_major B)
    (0, True, True), (32, True, True), (64, True, True), (128, True, True),
    (0, False, False), (32, False, True), (64, True, False), (128, False, False),
]


@pytest.mark.parametrize("sw,ka,kb", LAYOUT_CASES)
def test_wgmma_f16_layouts(sw, ka, kb):
    rng = np.random.default_rng(sw + 2 * ka + kb)
    N, K = 64, 16
    A = rng.standard_normal((64, K)).astype(np.float16)
    B = rng.standard_normal((N, K)).astype(np.float16)     # B[n, k]
    img = np.zeros(SMEM, np.uint8)

    def layout(mat, base, k_major):
        if k_major:
            if sw == 0:
                lbo, sbo = 128, 256             # core matrices: K-neighbours 128 B apart
            else:
                lbo, sbo = 16, 8 * sw
        else:
            if sw == 0:
                lbo, sbo = mat.shape[0] // 8 * 128, 128
            else:
                lbo, sbo = 8 * sw, 8 * sw * (mat.shape[0] * 2 // sw)
        place(img, base, mat, 2, k_major, sw, lbo, sbo)
        return encode_descriptor(base, lbo, sbo, sw)

    ad = layout(A, 0, ka)
    bd = layout(B, 8192, kb)
    tail = f"1, 1, {0 if ka else 1}, {0 if kb else 1}"
    out = _run(_ptx(N, tail=tail), img, ad, bd, N // 2)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    np.testing.assert_allclose(fragment(out, N, N // 2), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("N", [8, 24, 256])
def test_wgmma_n_and_accumulate_and_negate(N):
    rng = np.random.default_rng(N)
    A = rng.standard_normal((64, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, A, 2, True, 128, 16, 1024)
    place(img, 8192, B, 2, True, 128, 16, 1024)
    ad, bd = encode_descriptor(0, 16, 1024, 128), encode_descriptor(8192, 16, 1024, 128)
    out = _run(_ptx(N, tail="-1, 1, 0, 0"), img, ad, bd, N // 2, scaled=1, init=2.5)
    ref = 2.5 - A.astype(np.float64) @ B.astype(np.float64).T
    np.testing.assert_allclose(fragment(out, N, N // 2), ref, rtol=1e-5, atol=1e-5)
    out0 = _run(_ptx(N, tail="1, -1, 0, 0"), img, ad, bd, N // 2, scaled=0, init=2.5)
    np.testing.assert_allclose(fragment(out0, N, N // 2), ref - 2.5, rtol=1e-5, atol=1e-5)


def test_wgmma_bf16_and_f16_accumulator():
    rng = np.random.default_rng(7)
    N = 32
    A = rng.standard_normal((64, 16)).astype(np.float32)
    B = rng.standard_normal((N, 16)).astype(np.float32)
    Ab = (A.view(np.uint32) >> 16).astype(np.uint16)          # truncated to bf16
    Bb = (B.view(np.uint32) >> 16).astype(np.uint16)
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, Ab, 2, True, 64, 16, 512)
    place(img, 8192, Bb, 2, True, 64, 16, 512)
    ad, bd = encode_descriptor(0, 16, 512, 64), encode_descriptor(8192, 16, 512, 64)
    out = _run(_ptx(N, types="f32.bf16.bf16"), img, ad, bd, N // 2)
    fa = (Ab.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    fb = (Bb.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    np.testing.assert_allclose(fragment(out, N, N // 2), fa @ fb.T, rtol=1e-5, atol=1e-5)
    # f16 accumulators: N/4 registers, two halves each
    Ah, Bh = A.astype(np.float16), B.astype(np.float16)
    place(img, 0, Ah, 2, True, 64, 16, 512)
    place(img, 8192, Bh, 2, True, 64, 16, 512)
    ptx = _ptx(N, types="f16.f16.f16", dtype_regs="b32")
    words = _run(ptx, img, ad, bd, N // 4, out_dtype=np.uint32)
    halves = np.stack([words & 0xFFFF, words >> 16], -1).reshape(128, N // 2)
    D = fragment(halves.astype(np.uint16).view(np.float16).astype(np.float64), N, N // 2)
    ref = (Ah.astype(np.float64) @ Bh.astype(np.float64).T).astype(np.float16)
    np.testing.assert_allclose(D, ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("ta,tb", [("e4m3", "e4m3"), ("e5m2", "e4m3")])
def test_wgmma_fp8(ta, tb):
    rng = np.random.default_rng(3)
    N, K = 16, 32
    a8 = fp8_encode(rng.standard_normal((64, K)), ta)
    b8 = fp8_encode(rng.standard_normal((N, K)), tb)
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, a8.astype(np.uint8), 1, True, 128, 16, 1024)
    place(img, 8192, b8.astype(np.uint8), 1, True, 128, 16, 1024)
    ad, bd = encode_descriptor(0, 16, 1024, 128), encode_descriptor(8192, 16, 1024, 128)
    out = _run(_ptx(N, types=f"f32.{ta}.{tb}", k=32, tail="1, 1"), img, ad, bd, N // 2)
    ref = fp8_decode(a8, ta).astype(np.float64) @ fp8_decode(b8, tb).astype(np.float64).T
    np.testing.assert_allclose(fragment(out, N, N // 2), ref, rtol=1e-5, atol=1e-5)


def test_wgmma_a_from_registers():
    rng = np.random.default_rng(11)
    N = 16
    A = rng.standard_normal((64, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    place(img, 8192, B, 2, False, 32, 512, 256)        # B MN-major, 32-byte swizzle
    bd = encode_descriptor(8192, 512, 256, 32)
    # the mma.m16n8k16 A fragment per warp (PTX ISA): a0,a1: (g, 2t..), a2,a3: (g+8, 2t..),
    # a4,a5: (g, 2t+8..), a6,a7: (g+8, 2t+8..)
    bits = A.view(np.uint16)
    areg = np.zeros((128, 4), np.uint32)
    for t in range(128):
        w, lane = t // 32, t % 32
        g, q = lane // 4, lane % 4
        for j in range(4):
            r = 16 * w + g + 8 * (j % 2)
            c = 2 * q + 8 * (j // 2)
            areg[t, j] = int(bits[r, c]) | (int(bits[r, c + 1]) << 16)
    out = _run(_ptx(N, a_regs=True, tail="1, 1, 1"), img, 0, bd, N // 2,
               areg=areg.reshape(-1))
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    np.testing.assert_allclose(fragment(out, N, N // 2), ref, rtol=1e-5, atol=1e-5)


def test_descriptor_fields_roundtrip():
    d = encode_descriptor(0x3a50, 0x120, 0x400, 64, 0)
    f = decode_descriptor(d)
    assert f == {"start": 0x3a50, "lbo": 0x120, "sbo": 0x400, "base_offset": 0, "swizzle": 64}
    # bit positions of the PTX ISA: start 0-13, LBO 16-29, SBO 32-45, base 49-51, swizzle 62-63
    raw = (0x3a5) | (0x12 << 16) | (0x40 << 32) | (3 << 49) | (1 << 62)
    assert decode_descriptor(raw) == {"start": 0x3a50, "lbo": 0x120, "sbo": 0x400,
                                      "base_offset": 3, "swizzle": 128}


def _simple_case(N=8):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((64, 16)).astype(np.float16)
    B = rng.standard_normal((N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, A, 2, True, 128, 16, 1024)
    place(img, 8192, B, 2, True, 128, 16, 1024)
    return img, encode_descriptor(0, 16, 1024, 128), encode_descriptor(8192, 16, 1024, 128)


def test_read_before_wait_is_an_error():
    img, ad, bd = _simple_case()
    ptx = _ptx(8, before_wait="  add.f32 %f9, %f2, %f3;", nacc=4)
    ptx = ptx.replace(".reg .f32 %f<4>", ".reg .f32 %f<16>")
    with pytest.raises(ExecutionError, match=r"reads accumulator register %f2 of the "
                       r"wgmma.mma_async at PTX line \d+ before a wgmma.wait_group"):
        _run(ptx, img, ad, bd, 4)


def test_wait_group_one_leaves_the_newest_group_pending():
    img, ad, bd = _simple_case()
    # a second mma_async in its own group; wait_group 1 lands the first only, and reading the
    # second's accumulators (%f0 again) before a wait covering it is an error
    extra = ("  wgmma.commit_group.sync.aligned;\n"
             "  wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, %rd3, "
             "%rd4, %p2, 1, 1, 0, 0;")
    ptx = _ptx(8, extra=extra, wait="1")
    with pytest.raises(ExecutionError, match="reads accumulator register %f0"):
        _run(ptx, img, ad, bd, 4)
    ok = _run(_ptx(8, extra=extra, wait="0"), img, ad, bd, 4, scaled=1)
    A = img[:2048].view(np.float16)   # not used: compare against one product, doubled
    del A
    single = _run(_ptx(8), img, ad, bd, 4)
    np.testing.assert_allclose(ok, 2 * single, rtol=1e-6)


def test_warp_group_not_converged():
    img, ad, bd = _simple_case()
    skip = "  setp.eq.u32 %p3, %r2, 127;\n  @%p3 bra SKIP;"
    ptx = _ptx(8, block_check=skip).replace("  ret;\n}", "  ret;\nSKIP:\n  ret;\n}")
    with pytest.raises(WarpDivergence, match="warp group not converged: 127 of its 128"):
        _run(ptx, img, ad, bd, 4)
    with pytest.raises(WarpDivergence, match="not a multiple of 128"):
        _run(_ptx(8), img, ad, bd, 4, block=96)


def test_wgmma_decode_errors():
    dev = EmulatorDevice()
    bad = _ptx(8).replace("m64n8k16", "m64n12k16")
    with pytest.raises(PTXParseError, match="N must be a multiple of 8"):
        dev.load_module(bad).get_function("k")
    with pytest.raises(PTXParseError, match="needs the arch-specific target sm_90a"):
        dev.load_module(_ptx(8).replace("sm_90a", "sm_90")).get_function("k")
    with pytest.raises(PTXParseError, match="the accumulator needs 4 registers"):
        dev.load_module(_ptx(8, nacc=3)).get_function("k")


def test_wgmma_tf32_and_int8():
    rng = np.random.default_rng(5)
    N = 16
    # tf32 (k8, 4-byte elements): the tensor core ignores the low 13 mantissa bits
    A = rng.standard_normal((64, 8)).astype(np.float32)
    B = rng.standard_normal((N, 8)).astype(np.float32)
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, A, 4, True, 32, 16, 256)
    place(img, 8192, B, 4, True, 32, 16, 256)
    ad, bd = encode_descriptor(0, 16, 256, 32), encode_descriptor(8192, 16, 256, 32)
    out = _run(_ptx(N, types="f32.tf32.tf32", k=8, tail="1, 1"), img, ad, bd, N // 2)
    trunc = lambda m: (m.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    ref = trunc(A).astype(np.float64) @ trunc(B).astype(np.float64).T
    np.testing.assert_allclose(fragment(out, N, N // 2), ref, rtol=1e-6, atol=1e-6)
    # s8 x u8 -> s32 (k32), accumulating onto 7
    A8 = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    B8 = rng.integers(0, 256, (N, 32)).astype(np.uint8)
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, A8.view(np.uint8), 1, True, 0, 128, 256)
    place(img, 8192, B8, 1, True, 0, 128, 256)
    ad, bd = encode_descriptor(0, 128, 256), encode_descriptor(8192, 128, 256)
    init = np.int32(7).view(np.float32)
    out = _run(_ptx(N, types="s32.s8.u8", k=32, tail=""), img, ad, bd, N // 2, scaled=1,
               init=init, out_dtype=np.int32)
    ref = A8.astype(np.int64) @ B8.astype(np.int64).T + 7
    np.testing.assert_array_equal(fragment(out, N, N // 2), ref)


def test_each_warp_group_waits_for_its_own_mma():
    # two warp groups issue together; warp group 1 waits (laid out first), warp group 0 then
    # reads its accumulator without waiting: its result is still pending
    img, ad, bd = _simple_case()
    split = ("  setp.lt.u32 %p4, %r2, 128;\n  @%p4 bra WG0;\n"
             "  wgmma.wait_group.sync.aligned 0;\n  ret;\nWG0:\n  cvt.rzi.s32.f32 %r60, %f1;")
    ptx = _ptx(8, before_wait=split)
    with pytest.raises(ExecutionError, match="cvt.rzi.s32.f32 reads accumulator register %f1 "
                       r"of the wgmma.mma_async at PTX line \d+") as e:
        _run(ptx, img, ad, bd, 4, block=256)
    assert e.value.thread == (0, 0, 0)


def test_race_check_sees_wgmma_operands():
    from tilelang.emulator.errors import SharedMemoryRace
    img, ad, bd = _simple_case()
    # warp 1 overwrites a word of A while the mma_async reading it is in flight
    clobber = ("  setp.eq.u32 %p5, %r2, 32;\n  mov.u32 %r61, 0;\n"
               "  @%p5 st.shared.u32 [%r5], %r61;")
    dev = EmulatorDevice(race_check=True)
    ptx = _ptx(8, extra=clobber)

    def launch(text):
        fn = dev.load_module(text).get_function("k")
        return dev.launch(fn, (1, 1, 1), (128, 1, 1),
                          [dev.to_device(img.view(np.uint32)), dev.malloc(128 * 16),
                           np.uint32(img.size // 4), np.uint64(ad), np.uint64(bd), np.uint32(0),
                           np.uint32(0), dev.to_device(np.zeros(512, np.uint32))])
    with pytest.raises(SharedMemoryRace, match="warp 1 writes shared memory that the "
                       "in-flight wgmma of warp group 0 read"):
        launch(ptx)
    # after the wait (which warp 1 executes too) the operands are free again: the
    # same store is no race
    after = _ptx(8).replace("  ret;\n}", clobber + "\n  ret;\n}")
    assert launch(after).race_check == "checked: no shared-memory race"


def test_missing_proxy_fence_is_reported():
    img, ad, bd = _simple_case()
    ptx = _ptx(8).replace("  fence.proxy.async.shared::cta;\n", "")
    with pytest.raises(ExecutionError, match=r"wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
                       r"\(operand B\) reads shared memory written at PTX line \d+ through the "
                       r"generic proxy with no fence.proxy.async in between"):
        _run(ptx, img, ad, bd, 4)


def test_wgmma_int8_satfinite_clamps():
    N = 8
    A8 = np.full((64, 32), -128, np.int8)
    B8 = np.full((N, 32), -128, np.int8)            # 32 * 2^14 = 2^19 per step
    img = np.zeros(SMEM, np.uint8)
    place(img, 0, A8.view(np.uint8), 1, True, 0, 128, 256)
    place(img, 8192, B8.view(np.uint8), 1, True, 0, 128, 256)
    ad, bd = encode_descriptor(0, 128, 256), encode_descriptor(8192, 128, 256)
    init = np.int32(2**31 - 2**18).view(np.float32)
    for form, want in (("s32.s8.s8", -(2**31) + 2**18), ("satfinite.s32.s8.s8", 2**31 - 1)):
        ptx = _ptx(N, types="s32.s8.s8", k=32, tail="").replace(
            "m64n8k32.s32.s8.s8", f"m64n8k32.{form}")
        out = _run(ptx, img, ad, bd, N // 2, scaled=1, init=init, out_dtype=np.int32)
        assert (out == want).all(), form


def test_integer_wgmma_takes_no_scale_immediates():
    # the PTX ISA's integer form is `d, a-desc, b-desc, scale-d` (no imm-scale-a/b): the form
    # Triton emits for int8 dot on sm_90; the floating-point form's immediates are refused
    dev = EmulatorDevice()
    dev.load_module(_ptx(8, types="s32.s8.s8", k=32, tail="")).get_function("k")
    with pytest.raises(PTXParseError, match=r"expected 4 operands \(d, a, b, scale-d\), found 6"):
        dev.load_module(_ptx(8, types="s32.u8.s8", k=32, tail="1, 1")).get_function("k")
    with pytest.raises(PTXParseError, match=r"expected 6 operands \(d, a, b, scale-d, "
                       r"imm-scale-a, imm-scale-b\), found 4"):
        dev.load_module(_ptx(8, types="f32.e4m3.e4m3", k=32, tail="")).get_function("k")


# register moves of the accumulator before the wait (LLVM unpacks Triton's f16 accumulators so):
# the copies hold the result once the wait covers the mma_async, as ptxas makes them
MOVES = ("  mov.b32 %r56, %f0;\n  mov.b32 %r57, %f1;\n  mov.b64 %rd28, {%f2, %f3};\n"
         "  mov.b64 {%r58, %r59}, %rd28;\n")


def test_moves_of_a_pending_accumulator_hold_the_result_after_the_wait():
    img, ad, bd = _simple_case()
    want = _run(_ptx(8), img, ad, bd, 4)
    ptx = _ptx(8, before_wait=MOVES)
    for i in range(4):                       # store the copies instead of the accumulator
        ptx = ptx.replace(f"st.global.b32 [%rd10+{4 * i}], %f{i};",
                          f"st.global.b32 [%rd10+{4 * i}], %r{56 + i};")
    assert "%r59;" in ptx
    got = _run(ptx, img, ad, bd, 4)
    assert np.array_equal(got, want) and np.abs(want).sum() > 0


def test_other_reads_of_a_moved_accumulator_before_the_wait_are_errors():
    img, ad, bd = _simple_case()
    ptx = _ptx(8, before_wait=MOVES + "  add.u32 %r61, %r58, 1;")
    with pytest.raises(ExecutionError, match=r"add.u32 reads accumulator register %r58 of the "
                       r"wgmma.mma_async at PTX line \d+ before a wgmma.wait_group"):
        _run(ptx, img, ad, bd, 4)
