"""Whole kernels: vector add, block reduction, tiled matrix product, divergent loops (the last
three are the reference kernels of tilelang/emulator/samples.py, which the benchmark times)."""

import numpy as np

from emu_support import HEADER, kernel_ptx

from tilelang.emulator.samples import COLLATZ, MATMUL, REDUCE

GID = """
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
"""


def test_vector_add_with_bounds_guard(hw, rng):
    body = GID + """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  ld.param.u64 %rd3, [k_p2];
  ld.param.u64 %rd4, [k_p3];
  cvt.u32.u64 %r5, %rd4;
  setp.ge.u32 %p1, %r4, %r5;
  @%p1 bra DONE;
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd1, %rd5;
  add.s64 %rd7, %rd2, %rd5;
  add.s64 %rd8, %rd3, %rd5;
  ld.global.f32 %f1, [%rd7];
  ld.global.f32 %f2, [%rd8];
  add.f32 %f3, %f1, %f2;
  st.global.f32 [%rd6], %f3;
DONE:
  ret;
"""
    n = 1000
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    d = hw.dev
    pa, pb, pc = d.to_device(a), d.to_device(b), d.malloc(4 * n)
    rep = hw.run(kernel_ptx(body), ((n + 127) // 128,), (128,), [pc, pa, pb, n])
    assert np.array_equal(d.from_device(pc, (n,), np.float32), a + b)
    assert rep.instructions["add.f32"] == n




def test_block_reduction_shuffle_shared_barrier(hw, rng):
    nblk, tpb = 6, 256
    x = rng.integers(-100, 100, nblk * tpb).astype(np.float32)   # exact sums in f32
    d = hw.dev
    px, po = d.to_device(x), d.malloc(4 * nblk)
    rep = hw.run(REDUCE, (nblk,), (tpb,), [po, px], kernel="reduce")
    assert np.array_equal(d.from_device(po, (nblk,), np.float32),
                          x.reshape(nblk, tpb).sum(axis=1))
    assert rep.instructions["bar.sync"] == nblk * tpb
    assert rep.instructions["shfl.sync.bfly.b32"] == 5 * nblk * tpb




def test_tiled_shared_memory_matmul(hw, rng):
    n = 48
    a = rng.integers(-4, 4, (n, n)).astype(np.float32)
    b = rng.integers(-4, 4, (n, n)).astype(np.float32)
    d = hw.dev
    pa, pb, pc = d.to_device(a), d.to_device(b), d.malloc(4 * n * n)
    rep = hw.run(MATMUL, (n // 16, n // 16), (16, 16), [pc, pa, pb, np.uint32(n)],
                 kernel="mm")
    assert np.array_equal(d.from_device(pc, (n, n), np.float32), a @ b)
    # row-wise shared reads of As are broadcasts, Bs reads are consecutive: no conflicts
    assert rep.bank_conflicts == 0
    assert rep.shared_requests > 0




def collatz_steps(x):
    n = 0
    while x > 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        n += 1
    return n


def test_divergent_data_dependent_loops(hw, rng):
    n = 512
    x = rng.integers(1, 5000, n).astype(np.uint32)
    d = hw.dev
    px, po = d.to_device(x), d.malloc(4 * n)
    rep = hw.run(COLLATZ, (n // 64,), (64,), [po, px], kernel="collatz")
    assert np.array_equal(d.from_device(po, (n,), np.uint32),
                          np.array([collatz_steps(int(v)) for v in x], np.uint32))
    # lockstep: per-thread instruction counts are exact, not per-batch
    steps = sum(collatz_steps(int(v)) for v in x)
    assert rep.instructions["add.s32"] == steps


def test_nested_divergence_reconverges_before_barrier(hw):
    # threads split three ways, then all must meet at the barrier
    body = GID + """
  ld.param.u64 %rd1, [k_p0];
  and.b32 %r5, %r1, 3;
  mov.u32 %r6, 0;
  setp.eq.u32 %p1, %r5, 0;
  @%p1 bra A;
  setp.eq.u32 %p2, %r5, 1;
  @%p2 bra B;
  mov.u32 %r6, 30;
  bra.uni J;
A:
  mov.u32 %r6, 10;
  bra.uni J;
B:
  mov.u32 %r6, 20;
J:
  bar.sync 0;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
"""
    d = hw.dev
    po = d.malloc(4 * 128)
    hw.run(kernel_ptx(body, nparams=1), (2,), (64,), [po])
    t = np.arange(128) % 64 % 4
    assert np.array_equal(d.from_device(po, (128,), np.uint32),
                          np.select([t == 0, t == 1], [10, 20], 30).astype(np.uint32))


CALL_THEN_BARRIER = HEADER + """
.func (.param .b32 func_retval0) slow(.param .b32 slow_param_0)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  ld.param.b32 %r1, [slow_param_0];
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
L:
  add.s32 %r3, %r3, %r2;
  add.s32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, %r1;
  @%p1 bra L;
  st.param.b32 [func_retval0], %r3;
  ret;
}
.shared .align 4 .b8 vals[256];
.visible .entry k(.param .u64 k_out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [k_out];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, 0;
  setp.ge.u32 %p1, %r1, 16;
  @%p1 bra SKIP;
  {
  .param .b32 param0;
  st.param.b32 [param0], %r1;
  .param .b32 retval0;
  call.uni (retval0), slow, (param0);
  ld.param.b32 %r2, [retval0];
  }
SKIP:
  mov.u32 %r3, vals;
  shl.b32 %r4, %r1, 2;
  add.s32 %r5, %r3, %r4;
  st.shared.u32 [%r5], %r2;
  bar.sync 0;
  xor.b32 %r6, %r1, 1;
  shl.b32 %r7, %r6, 2;
  add.s32 %r8, %r3, %r7;
  ld.shared.u32 %r9, [%r8];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}
"""


def test_divergent_call_reconverges_before_barrier(hw):
    # threads 0..15 call a function with a data-dependent loop, the rest skip it; all meet at
    # the barrier (callee code lies after the kernel in PC order)
    d = hw.dev
    po = d.malloc(4 * 64)
    hw.run(CALL_THEN_BARRIER, (1,), (64,), [po])
    t = np.arange(64)
    partner = t ^ 1
    exp = np.where(partner < 16, partner * (partner - 1) // 2, 0)
    exp[partner == 0] = 0
    assert np.array_equal(d.from_device(po, (64,), np.uint32), exp.astype(np.uint32))
