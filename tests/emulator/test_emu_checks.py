"""The checks a GPU would not give: memory faults, barrier/warp divergence, launch refusals,
malformed PTX."""

import numpy as np
import pytest

from emu_support import HEADER, kernel_ptx
from tilelang.emulator.errors import (BarrierDivergence, DeviceAssertion, EmulatorError,
                                      LaunchRefused, MemoryFault, NoProgress, PTXParseError,
                                      WarpDivergence)

STORE_AT_TID = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mad.lo.s32 %r3, %r2, 64, %r1;
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
"""


def test_out_of_bounds_global_store_names_everything(hw):
    p = hw.dev.malloc(4 * 100)                  # one block and a half
    with pytest.raises(MemoryFault) as ei:
        hw.run(kernel_ptx(STORE_AT_TID, nparams=1), (2,), (64,), [p])
    e = ei.value
    assert e.kernel == "k" and e.block == (1, 0, 0) and e.thread == (36, 0, 0)
    assert e.address == int(p) + 400
    assert e.line == kernel_ptx(STORE_AT_TID, nparams=1).splitlines().index(
        "  st.global.u32 [%rd3], %r1;") + 1
    assert "out-of-bounds global" in str(e) and "PTX line" in str(e)


def test_misaligned_global_load(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  add.s64 %rd1, %rd1, 2;
  ld.global.u32 %r1, [%rd1];
  ret;
"""
    p = hw.dev.malloc(64)
    with pytest.raises(MemoryFault, match="misaligned"):
        hw.run(kernel_ptx(body, nparams=1), (1,), (32,), [p])


def test_use_after_free_faults(hw):
    p = hw.dev.malloc(4 * 64)
    hw.dev.free(p)
    with pytest.raises(MemoryFault):
        hw.run(kernel_ptx(STORE_AT_TID, nparams=1), (1,), (64,), [p])


def test_shared_out_of_bounds_and_misaligned(hw):
    pre = ".shared .align 4 .b8 buf[128];\n"
    body = """
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, buf;
  mad.lo.s32 %r3, %r1, 4, %r2;
  st.shared.u32 [%r3], %r1;
  ret;
"""
    hw.run(kernel_ptx(body, nparams=0, prelude=pre), (1,), (32,), [])
    with pytest.raises(MemoryFault, match="shared") as ei:
        hw.run(kernel_ptx(body, nparams=0, prelude=pre), (1,), (64,), [])
    assert ei.value.thread == (32, 0, 0)
    mis = body.replace("mad.lo.s32 %r3, %r1, 4, %r2;", "mad.lo.s32 %r3, %r1, 2, %r2;")
    with pytest.raises(MemoryFault, match="misaligned shared"):
        hw.run(kernel_ptx(mis, nparams=0, prelude=pre), (1,), (32,), [])


def test_dynamic_shared_memory_bounds(hw):
    pre = ".extern .shared .align 16 .b8 dyn[];\n"
    body = """
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, dyn;
  mad.lo.s32 %r3, %r1, 4, %r2;
  st.shared.u32 [%r3], %r1;
  mov.u32 %r4, %dynamic_smem_size;
  ret;
"""
    ptx = kernel_ptx(body, nparams=0, prelude=pre)
    hw.run(ptx, (1,), (32,), [], shared_mem=128)
    with pytest.raises(MemoryFault):
        hw.run(ptx, (1,), (32,), [], shared_mem=64)


def test_divergent_barrier_is_an_error(hw):
    # threads >= 16 pass an extra barrier: the two groups wait at different barriers forever
    body = """
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra SKIP;
  bar.sync 0;
SKIP:
  bar.sync 0;
  ret;
"""
    ptx = kernel_ptx(body, nparams=0)
    with pytest.raises(BarrierDivergence) as ei:
        hw.run(ptx, (1,), (64,), [])
    lines = [i + 1 for i, l in enumerate(ptx.splitlines()) if l.strip() == "bar.sync 0;"]
    assert f"PTX lines {lines[0]}, {lines[1]}" in str(ei.value)
    assert ei.value.block == (0, 0, 0)


def test_barrier_waits_for_threads_in_code_laid_out_later(hw):
    # LLVM may move a rarely taken block after the barrier; the threads taking it reach the
    # barrier later in PC order, and the barrier must wait for them (as the GPU does)
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, 1;
  setp.eq.u32 %p1, %r1, 5;
  @%p1 bra COLD;
JOIN:
  mov.u32 %r3, sh;
  shl.b32 %r4, %r1, 2;
  add.s32 %r5, %r3, %r4;
  st.shared.u32 [%r5], %r2;
  bar.sync 0;
  xor.b32 %r6, %r4, 4;
  add.s32 %r7, %r3, %r6;
  ld.shared.u32 %r8, [%r7];
  shfl.sync.idx.b32 %r9, %r8, 4, 31, -1;
  add.s32 %r10, %r8, %r9;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r10;
  ret;
COLD:
  mov.u32 %r2, 100;
  bra.uni JOIN;
"""
    ptx = kernel_ptx(body, nparams=1, prelude=".shared .align 4 .b8 sh[256];\n")
    p = hw.dev.malloc(4 * 64)
    hw.run(ptx, (1,), (64,), [p])
    t = np.arange(64)
    v = np.where(t == 5, 100, 1)
    nb = v[t ^ 1]
    exp = nb + nb[(t // 32) * 32 + 4]
    assert np.array_equal(hw.dev.from_device(p, (64,), np.uint32), exp)


def test_barrier_after_early_exit_of_some_threads_is_fine(hw):
    body = """
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra DONE;
  bar.sync 0;
DONE:
  ret;
""".replace("@%p1 bra DONE;", "@%p1 exit;")
    hw.run(kernel_ptx(body, nparams=0), (1,), (64,), [])


def test_shfl_on_diverged_warp_is_an_error(hw):
    body = """
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 8;
  @%p1 bra SKIP;
  shfl.sync.idx.b32 %r2, %r1, 0, 31, -1;
SKIP:
  ret;
"""
    with pytest.raises(WarpDivergence) as ei:
        hw.run(kernel_ptx(body, nparams=0), (1,), (32,), [])
    assert "lane(s) [0, 1" in str(ei.value)
    # the same shuffle with a member mask naming only the active lanes is legal
    ok = body.replace("31, -1;", "31, 0xFFFFFF00;")
    hw.run(kernel_ptx(ok, nparams=0), (1,), (32,), [])


def test_mma_on_diverged_warp_is_an_error(hw):
    body = """
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 8;
  @%p1 bra SKIP;
  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1,%f2,%f3,%f4}, {%r2,%r3,%r4,%r5}, {%r6,%r7}, {%f5,%f6,%f7,%f8};
SKIP:
  ret;
"""
    with pytest.raises(WarpDivergence):
        hw.run(kernel_ptx(body, nparams=0), (1,), (32,), [])


@pytest.mark.parametrize("directive,block,ok", [
    (".reqntid 64, 1, 1", (64, 1, 1), True),
    (".reqntid 64, 1, 1", (32, 2, 1), False),
    (".maxntid 128, 1, 1", (128, 1, 1), True),
    (".maxntid 128, 1, 1", (16, 16, 1), False),
])
def test_launch_bounds_refused_like_the_driver(hw, directive, block, ok):
    ptx = kernel_ptx("  ret;", nparams=0, directives="\n" + directive)
    if ok:
        hw.run(ptx, (1,), block, [])
    else:
        with pytest.raises(LaunchRefused, match=directive.split()[0]):
            hw.run(ptx, (1,), block, [])


def test_grid_not_divisible_by_cluster_refused(hw):
    ptx = kernel_ptx("  ret;", nparams=0)
    hw.run(ptx, (4, 2), (32,), [], cluster=(2, 1, 1))
    with pytest.raises(LaunchRefused, match="not divisible"):
        hw.run(ptx, (3, 2), (32,), [], cluster=(2, 1, 1))


def test_cluster_directive_mismatch_and_block_limits(hw):
    ptx = kernel_ptx("  ret;", nparams=0, directives="\n.reqnctapercluster 2, 1, 1")
    hw.run(ptx, (4,), (32,), [])                 # implicit: the compiled-in cluster shape
    with pytest.raises(LaunchRefused, match="reqnctapercluster"):
        hw.run(ptx, (4,), (32,), [], cluster=(4, 1, 1))
    with pytest.raises(LaunchRefused, match="exceeds"):
        hw.run(kernel_ptx("  ret;", nparams=0), (1,), (2048,), [])
    with pytest.raises(LaunchRefused, match="arguments"):
        hw.run(kernel_ptx("  ret;", nparams=2), (1,), (32,), [1])


def test_trap_and_step_limit(hw):
    with pytest.raises(DeviceAssertion, match="trap"):
        hw.run(kernel_ptx("  trap;\n  ret;", nparams=0), (1,), (32,), [])
    loop = "L:\n  bra.uni L;\n  ret;"             # an empty loop: a hang, found as such
    with pytest.raises(NoProgress, match=r"32 thread\(s\) spin in the loop at PTX line 16,"):
        hw.run(kernel_ptx(loop, nparams=0), (1,), (32,), [], max_steps=1000)
    count = "L:\n  add.u32 %r1, %r1, 1;\n  bra.uni L;\n  ret;"    # progress, forever
    with pytest.raises(EmulatorError, match="did not finish in 1000 steps"):
        hw.run(kernel_ptx(count, nparams=0), (1,), (32,), [], max_steps=1000)


@pytest.mark.parametrize("body,pattern", [
    ("  frobnicate.u32 %r1, %r2;\n  ret;", "unknown or unsupported instruction 'frobnicate.u32'"),
    ("  add.u32 %r1, %zz9, 1;\n  ret;", "undefined register %zz9"),
    ("  bra.uni NOWHERE;\n  ret;", "undefined label NOWHERE"),
    ("  add.u32 %r1, %r2 1;\n  ret;", "expected"),
    ("  ld.global.u32 %r1, [undefined_sym];\n  ret;", "undefined symbol"),
])
def test_malformed_ptx_names_the_line(hw, body, pattern):
    ptx = kernel_ptx(body, nparams=0)
    line = next(i + 1 for i, l in enumerate(ptx.splitlines()) if l == body.splitlines()[0])
    with pytest.raises(PTXParseError) as ei:
        hw.dev.load_module(ptx).get_function("k")
    assert pattern in str(ei.value)
    assert ei.value.line == line
    assert str(ei.value).startswith(f"line {line}:")


NAMED = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, buf;
  setp.lt.u32 %p1, %r1, 64;
  @%p1 bra PRODUCER;
  // consumers (warps 2 and 3): wait for the producers, read their data
  bar.sync 1, 128;
  sub.s32 %r3, %r1, 64;
  shl.b32 %r4, %r3, 2;
  add.s32 %r5, %r2, %r4;
  ld.shared.u32 %r6, [%r5];
  mul.wide.u32 %rd2, %r3, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r6;
  ret;
PRODUCER:
  // laid out after the consumers, so they reach their barrier first
  shl.b32 %r7, %r1, 2;
  add.s32 %r8, %r2, %r7;
  mad.lo.s32 %r9, %r1, 3, 7;
  st.shared.u32 [%r8], %r9;
  {arrive}
  ret;
"""


def test_named_barrier_producer_consumer(hw):
    ptx = kernel_ptx(NAMED.replace("{arrive}", "bar.arrive 1, 128;"), nparams=1,
                     prelude=".shared .align 4 .b8 buf[256];\n")
    p = hw.dev.malloc(4 * 64)
    hw.run(ptx, (2,), (128,), [p])
    assert np.array_equal(hw.dev.from_device(p, (64,), np.uint32), np.arange(64) * 3 + 7)


def test_named_barrier_that_never_fills_is_a_deadlock(hw):
    ptx = kernel_ptx(NAMED.replace("{arrive}", ""), nparams=1,
                     prelude=".shared .align 4 .b8 buf[256];\n")
    p = hw.dev.malloc(4 * 64)
    with pytest.raises(BarrierDivergence, match="named barrier 1 has 64 arrivals"):
        hw.run(ptx, (1,), (128,), [p])


def test_named_barrier_completed_in_step_starts_from_zero(hw):
    # warp 1 arrives at barrier 1 (count 64) and exits; warp 0, alone, completes it; a second
    # bar.sync 1, 64 of warp 0 alone can never fill (an arrival left over from the first
    # completion would let it pass)
    body = """
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 32;
  @%p1 bra W0;
  bar.arrive 1, 64;
  ret;
W0:
  bar.sync 1, 64;
  bar.sync 1, 64;
  ret;
"""
    with pytest.raises(BarrierDivergence, match="named barrier 1 has 32 arrivals"):
        hw.run(kernel_ptx(body, nparams=1), (1,), (64,), [hw.dev.malloc(16)])
