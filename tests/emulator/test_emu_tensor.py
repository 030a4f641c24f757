"""mma.sync, ldmatrix and cp.async against an independent per-lane NumPy formulation of the
PTX ISA fragment tables (written out case by case as the ISA text states them)."""

import numpy as np
import pytest

from emu_support import kernel_ptx
from test_emu_float import bf16_bits_ref


def a_pos_f16(lane, i):         # m16n8k16 .f16/.bf16 A, element i of 8
    g, t = lane >> 2, lane % 4
    row = g if (i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) if i < 4 else t * 2 + (i & 1) + 8
    return row, col


def b_pos_f16(lane, i):         # m16n8k16 B, element i of 4
    g, t = lane >> 2, lane % 4
    row = t * 2 + (i & 1) if i < 2 else t * 2 + (i & 1) + 8
    return row, g


def c_pos(lane, i):             # 16x8 accumulator, element i of 4
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def a_pos_tf32(lane, i):        # m16n8k8 .tf32 A, element i of 4
    g, t = lane >> 2, lane % 4
    row = g if i in (0, 2) else g + 8
    col = t if i in (0, 1) else t + 4
    return row, col


def b_pos_tf32(lane, i):
    g, t = lane >> 2, lane % 4
    return (t if i == 0 else t + 4), g


def a_pos_s8(lane, i):          # m16n8k32 .s8 A, element i of 16
    g, t = lane >> 2, lane % 4
    row = g if (i < 4 or 8 <= i < 12) else g + 8
    col = t * 4 + (i & 3) if i < 8 else t * 4 + (i & 3) + 16
    return row, col


def b_pos_s8(lane, i):          # element i of 8
    g, t = lane >> 2, lane % 4
    row = t * 4 + (i & 3) if i < 4 else t * 4 + (i & 3) + 16
    return row, g


def fragments(mat, pos, nelem, bits, nwarps=1):
    """Pack mat elements (as raw unsigned ints of `bits`) into per-lane 32-bit words."""
    per = 32 // bits
    words = np.zeros((32, nelem // per), np.uint32)
    for lane in range(32):
        for i in range(nelem):
            r, c = pos(lane, i)
            words[lane, i // per] |= np.uint32(int(mat[r, c]) << (bits * (i % per)))
    return np.tile(words, (nwarps, 1))


MMA_BODY = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  ld.param.u64 %rd3, [k_p2];
  ld.param.u64 %rd4, [k_p3];
{loads}
  {mma}
{stores}
  ret;
"""


def run_mma(hw, mma, na, nb, A_words, B_words, C_words, nwarps=1):
    loads = []
    for name, ptr, n, base in (("a", "%rd2", na, 10), ("b", "%rd3", nb, 20), ("c", "%rd4", 4, 30)):
        loads.append(f"  mul.wide.u32 %rd{base}, %r1, {4 * n};\n  add.s64 %rd{base + 1}, {ptr}, "
                     f"%rd{base};")
        for i in range(n):
            loads.append(f"  ld.global.b32 %r{base + i}, [%rd{base + 1}+{4 * i}];")
    stores = ["  mul.wide.u32 %rd40, %r1, 16;\n  add.s64 %rd41, %rd1, %rd40;"]
    for i in range(4):
        stores.append(f"  st.global.b32 [%rd41+{4 * i}], %r{40 + i};")
    regs = lambda base, n: "{" + ",".join(f"%r{base + i}" for i in range(n)) + "}"
    text = mma.format(d=regs(40, 4), a=regs(10, na), b=regs(20, nb), c=regs(30, 4))
    body = MMA_BODY.format(loads="\n".join(loads), mma=text, stores="\n".join(stores))
    d = hw.dev
    pa, pb, pc = d.to_device(A_words), d.to_device(B_words), d.to_device(C_words)
    po = d.malloc(16 * 32 * nwarps)
    rep = hw.run(kernel_ptx(body, nparams=4), (1,), (32 * nwarps,), [po, pa, pb, pc])
    return d.from_device(po, (32 * nwarps, 4), np.uint32), rep


def unfrag_c(words, nwarps=1):
    out = np.zeros((nwarps, 16, 8), np.uint32)
    for w in range(nwarps):
        for lane in range(32):
            for i in range(4):
                out[(w,) + c_pos(lane, i)] = words[32 * w + lane, i]
    return out


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_mma_m16n8k16_half_to_f32(hw, rng, kind):
    A = rng.integers(-8, 8, (16, 16)).astype(np.float32) / 4
    B = rng.integers(-8, 8, (16, 8)).astype(np.float32) / 4
    C = rng.standard_normal((16, 8)).astype(np.float32)
    enc = (lambda m: m.astype(np.float16).view(np.uint16)) if kind == "f16" else \
        (lambda m: bf16_bits_ref(m.ravel()).reshape(m.shape))
    Aw = fragments(enc(A), a_pos_f16, 8, 16, 2)
    Bw = fragments(enc(B), b_pos_f16, 4, 16, 2)
    Cw = fragments(C.view(np.uint32), c_pos, 4, 32, 2)
    mma = f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{d}}, {{a}}, {{b}}, {{c}};"
    out, rep = run_mma(hw, mma, 4, 2, Aw, Bw, Cw, nwarps=2)
    D = unfrag_c(out, 2).view(np.float32)
    exp = (A.astype(np.float64) @ B + C).astype(np.float32)
    assert np.allclose(D[0], exp, rtol=1e-6, atol=1e-6) and np.array_equal(D[0], D[1])
    assert rep.instructions[mma.split()[0]] == 64


def test_mma_m16n8k8_tf32(hw, rng):
    A = rng.standard_normal((16, 8)).astype(np.float32)
    B = rng.standard_normal((8, 8)).astype(np.float32)
    C = np.zeros((16, 8), np.float32)
    Aw = fragments(A.view(np.uint32), a_pos_tf32, 4, 32)
    Bw = fragments(B.view(np.uint32), b_pos_tf32, 2, 32)
    Cw = fragments(C.view(np.uint32), c_pos, 4, 32)
    out, _ = run_mma(hw, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d}, {a}, {b}, {c};",
                     4, 2, Aw, Bw, Cw)
    D = unfrag_c(out).view(np.float32)[0]
    trunc = lambda m: (m.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    exp = trunc(A).astype(np.float64) @ trunc(B)
    assert np.allclose(D, exp, rtol=1e-5, atol=1e-5)
    assert not np.allclose(D, A.astype(np.float64) @ B, rtol=1e-7, atol=0)


def test_mma_m16n8k32_s8(hw, rng):
    A = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    B = rng.integers(-128, 128, (32, 8)).astype(np.int8)
    C = rng.integers(-1000, 1000, (16, 8)).astype(np.int32)
    Aw = fragments(A.view(np.uint8), a_pos_s8, 16, 8)
    Bw = fragments(B.view(np.uint8), b_pos_s8, 8, 8)
    Cw = fragments(C.view(np.uint32), c_pos, 4, 32)
    out, _ = run_mma(hw, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {d}, {a}, {b}, {c};",
                     4, 2, Aw, Bw, Cw)
    D = unfrag_c(out).view(np.int32)[0]
    assert np.array_equal(D, A.astype(np.int32) @ B.astype(np.int32) + C)


LDM = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  ld.param.u64 %rd3, [k_p2];
  // copy the 4 matrices (512 bytes) into shared: 16 bytes per thread
  mov.u32 %r2, smem;
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd5, %rd2, %rd4;
  ld.global.v4.u32 {%r3, %r4, %r5, %r6}, [%rd5];
  shl.b32 %r7, %r1, 4;
  add.s32 %r8, %r2, %r7;
  st.shared.v4.u32 [%r8], {%r3, %r4, %r5, %r6};
  bar.sync 0;
  // this lane's row address (a permutation of rows, given by the host)
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd3, %rd6;
  ld.global.u32 %r9, [%rd7];
  add.s32 %r10, %r2, %r9;
  {ldm}
  mul.wide.u32 %rd8, %r1, 16;
  add.s64 %rd9, %rd1, %rd8;
  st.global.v4.u32 [%rd9], {%r20, %r21, %r22, %r23};
  ret;
"""


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix(hw, rng, num, trans):
    data = rng.integers(0, 2**16, 256).astype(np.uint16)        # 32 rows of 8 halves
    slot = rng.permutation(32)                                   # row (lane) → storage row
    store = np.zeros((32, 8), np.uint16)
    store[slot] = data.reshape(32, 8)
    offs = (slot * 16).astype(np.uint32)                        # lane i gives row i%8 of mat i//8
    regs = ",".join(f"%r{20 + i}" for i in range(num))
    t = ".trans" if trans else ""
    ldm = f"ldmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16 {{{regs}}}, [%r10];"
    ptx = kernel_ptx(LDM.replace("{ldm}", ldm), nparams=3,
                     prelude=".shared .align 16 .b8 smem[512];\n")
    d = hw.dev
    po, pd, pa = d.malloc(32 * 16), d.to_device(store), d.to_device(offs)
    d.memset(po, 0, 32 * 16)
    hw.run(ptx, (1,), (32,), [po, pd, pa])
    out = d.from_device(po, (32, 4), np.uint32)
    mats = data.reshape(4, 8, 8)
    for lane in range(32):
        for i in range(num):
            m = mats[i].T if trans else mats[i]
            lo, hi = m[lane // 4, 2 * (lane % 4)], m[lane // 4, 2 * (lane % 4) + 1]
            assert out[lane, i] == (int(hi) << 16 | int(lo)), (lane, i)


def test_cp_async_with_zero_fill(hw, rng):
    body = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  mov.u32 %r2, buf;
  shl.b32 %r3, %r1, 4;
  add.s32 %r4, %r2, %r3;
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd2, %rd3;
  and.b32 %r5, %r1, 15;            // src-size: 0..15 bytes, then zero fill
  cp.async.cg.shared.global [%r4], [%rd4], 16, %r5;
  cp.async.commit_group;
  cp.async.wait_group 0;
  bar.sync 0;
  ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r4];
  add.s64 %rd5, %rd1, %rd3;
  st.global.v4.u32 [%rd5], {%r10, %r11, %r12, %r13};
  cp.async.ca.shared.global [%r4], [%rd4], 4;
  cp.async.wait_all;
  ret;
"""
    ptx = kernel_ptx(body, nparams=2, prelude=".shared .align 16 .b8 buf[1024];\n")
    src = rng.integers(1, 256, 64 * 16).astype(np.uint8)
    d = hw.dev
    ps, po = d.to_device(src), d.malloc(64 * 16)
    hw.run(ptx, (1,), (64,), [po, ps])
    out = d.from_device(po, (64, 16), np.uint8)
    exp = src.reshape(64, 16).copy()
    for t in range(64):
        exp[t, t % 16:] = 0
    assert np.array_equal(out, exp)
