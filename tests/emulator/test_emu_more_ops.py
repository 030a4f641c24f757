"""Smaller instruction families: fences, lop3, copysign, testp, cnot, mul24, bfind, bar.red,
elect/match, stmatrix and mma with f16 accumulators."""

import numpy as np

from emu_support import kernel_ptx
from test_emu_tensor import a_pos_f16, b_pos_f16, c_pos, fragments, run_mma


def u32(rng, n=256):
    return rng.integers(0, 2**32, n, dtype=np.int64).astype(np.uint32)


def test_fences_are_ordering_noops(hw, rng):
    a = u32(rng)
    op = ("fence.acq_rel.gpu;\n  membar.gl;\n  fence.proxy.async;\n  membar.cta;\n"
          "  mov.b32 {d}, {a};")
    assert np.array_equal(hw.elementwise(op, [a], np.uint32), a)


def test_lop3_copysign_testp_cnot(hw, rng):
    a, b, c = u32(rng), u32(rng), u32(rng)
    got = hw.elementwise("lop3.b32 {d}, {a}, {b}, {c}, 0x96;", [a, b, c], np.uint32)
    assert np.array_equal(got, a ^ b ^ c)                 # 0xF0 ^ 0xCC ^ 0xAA = 0x96
    got = hw.elementwise("lop3.b32 {d}, {a}, {b}, {c}, 0xE8;", [a, b, c], np.uint32)
    assert np.array_equal(got, (a & b) | (a & c) | (b & c))    # majority
    x = (rng.standard_normal(256) * 10).astype(np.float32)
    y = rng.standard_normal(256).astype(np.float32)
    got = hw.elementwise("copysign.f32 {d}, {a}, {b};", [y, x], np.float32)
    assert np.array_equal(got, np.copysign(x, y))
    z = np.array([1.0, np.inf, np.nan, -np.inf, 0.0, 1e-40, -2.0, np.nan] * 32, np.float32)
    got = hw.elementwise("testp.finite.f32 {d}, {a};", [z], None, out_pred=True)
    assert np.array_equal(got, np.isfinite(z).astype(np.uint32))
    got = hw.elementwise("testp.subnormal.f32 {d}, {a};", [z], None, out_pred=True)
    assert np.array_equal(got, ((z != 0) & (np.abs(z) < np.finfo(np.float32).tiny)
                                & np.isfinite(z)).astype(np.uint32))
    k = (a % 3).astype(np.uint32)
    assert np.array_equal(hw.elementwise("cnot.b32 {d}, {a};", [k], np.uint32),
                          (k == 0).astype(np.uint32))


def test_mul24_and_bfind(hw, rng):
    a = rng.integers(0, 2**24, 256).astype(np.uint32)
    b = rng.integers(0, 2**24, 256).astype(np.uint32)
    got = hw.elementwise("mul24.lo.u32 {d}, {a}, {b};", [a, b], np.uint32)
    assert np.array_equal(got, (a.astype(np.uint64) * b & 0xFFFFFFFF).astype(np.uint32))
    x = u32(rng) >> rng.integers(0, 32, 256).astype(np.uint32)
    x[0] = 0
    exp = np.array([int(v).bit_length() - 1 if v else 0xFFFFFFFF for v in x], np.uint32)
    assert np.array_equal(hw.elementwise("bfind.u32 {d}, {a};", [x], np.uint32), exp)


def test_bar_red_popc_and_or(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mul.lo.s32 %r3, %r2, 7;
  setp.lt.u32 %p1, %r1, %r3;            // block b: 7*b threads vote true
  bar.red.popc.u32 %r4, 0, %p1;
  setp.eq.u32 %p2, %r1, 5;
  bar.red.or.pred %p3, 0, %p2;
  selp.u32 %r5, 1000, 0, %p3;
  add.s32 %r6, %r4, %r5;
  mad.lo.s32 %r7, %r2, 64, %r1;
  mul.wide.u32 %rd2, %r7, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
"""
    p = hw.dev.malloc(4 * 64 * 4)
    hw.run(kernel_ptx(body, nparams=1), (4,), (64,), [p])
    got = hw.dev.from_device(p, (4, 64), np.uint32)
    assert np.array_equal(got, np.repeat((np.arange(4) * 7 + 1000)[:, None], 64, 1))


def test_elect_and_match(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, 4;
  @%p1 bra REST;
  bra.uni OUT;
REST:
  elect.sync %r2|%p2, 0xFFFFFFF0;
  and.b32 %r3, %r1, 3;
  match.any.sync.b32 %r4, %r3, 0xFFFFFFF0;
  selp.u32 %r5, 0x100000, 0, %p2;
  add.s32 %r6, %r4, %r5;
  add.s32 %r6, %r6, %r2;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
OUT:
  ret;
"""
    p = hw.dev.malloc(4 * 32)
    hw.dev.memset(p, 0, 128)
    hw.run(kernel_ptx(body, nparams=1), (1,), (32,), [p])
    got = hw.dev.from_device(p, (32,), np.uint32)
    for lane in range(4, 32):
        same = sum(1 << j for j in range(4, 32) if j % 4 == lane % 4)
        assert got[lane] == same + (0x100000 if lane == 4 else 0) + 4


def test_stmatrix_inverts_ldmatrix(hw, rng):
    body = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.v4.u32 {%r20, %r21, %r22, %r23}, [%rd4];
  mov.u32 %r2, smem;
  shl.b32 %r3, %r1, 4;
  add.s32 %r4, %r2, %r3;
  stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%r4], {%r20, %r21, %r22, %r23};
  bar.sync 0;
  ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r30, %r31, %r32, %r33}, [%r4];
  add.s64 %rd5, %rd1, %rd3;
  st.global.v4.u32 [%rd5], {%r30, %r31, %r32, %r33};
  ret;
"""
    ptx = kernel_ptx(body, nparams=2, prelude=".shared .align 16 .b8 smem[512];\n")
    x = rng.integers(0, 2**32, 128, dtype=np.int64).astype(np.uint32)
    d = hw.dev
    px, po = d.to_device(x), d.malloc(512)
    hw.run(ptx, (1,), (32,), [po, px])
    assert np.array_equal(d.from_device(po, (128,), np.uint32), x)


def test_mma_f16_accumulator(hw, rng):
    A = rng.integers(-4, 4, (16, 16)).astype(np.float16)
    B = rng.integers(-4, 4, (16, 8)).astype(np.float16)
    C = rng.integers(-4, 4, (16, 8)).astype(np.float16)
    Aw = fragments(A.view(np.uint16), a_pos_f16, 8, 16)
    Bw = fragments(B.view(np.uint16), b_pos_f16, 4, 16)
    Cw = np.zeros((32, 4), np.uint32)
    Cw[:, :2] = fragments(C.view(np.uint16), c_pos, 4, 16)
    mma = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d}, {a}, {b}, {c};"
    mma = mma.replace("{d}", "{{%r40,%r41}}").replace("{c}", "{{%r30,%r31}}")
    out, _ = run_mma(hw, mma, 4, 2, Aw, Bw, Cw)
    D = np.zeros((16, 8), np.float16)
    for lane in range(32):
        for i in range(4):
            word = int(out[lane, i // 2])
            D[c_pos(lane, i)] = np.uint16((word >> (16 * (i % 2))) & 0xFFFF).view(np.float16)
    assert np.array_equal(D, (A.astype(np.float32) @ B.astype(np.float32) + C).astype(np.float16))
