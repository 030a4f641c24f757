"""mbarrier: init, arrive (tokens and phases), try_wait/test_wait spin loops, cp.async arrive."""

import numpy as np
import pytest

from emu_support import kernel_ptx
from tilelang.emulator.errors import EmulatorError

PIPE = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, buf;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra READY;
  mbarrier.init.shared.b64 [%r2], 1;
READY:
  bar.sync 0;
  setp.lt.u32 %p2, %r1, 32;
  @%p2 bra PRODUCER;
  // consumers spin on the barrier's phase 0
WAIT:
  mbarrier.{wait}.shared.b64 %p3, [%r2], 0;
  @!%p3 bra WAIT;
  sub.s32 %r4, %r1, 32;
  shl.b32 %r5, %r4, 2;
  add.s32 %r6, %r3, %r5;
  ld.shared.u32 %r7, [%r6];
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
PRODUCER:
  // laid out after the consumers: they reach their wait loop first
  shl.b32 %r8, %r1, 2;
  add.s32 %r9, %r3, %r8;
  mad.lo.s32 %r10, %r1, 5, 3;
  st.shared.u32 [%r9], %r10;
  bar.warp.sync -1;
  {arrive}
  ret;
"""

PRE = ".shared .align 8 .b8 bar[8];\n.shared .align 4 .b8 buf[128];\n"


@pytest.mark.parametrize("wait", ["try_wait.parity", "test_wait.parity"])
def test_mbarrier_producer_consumer(hw, wait):
    arrive = "@%p1 bra SKIP;\n  mbarrier.arrive.shared.b64 _, [%r2];\nSKIP:"
    ptx = kernel_ptx(PIPE.replace("{wait}", wait).replace("{arrive}", arrive), nparams=1,
                     prelude=PRE)
    p = hw.dev.malloc(4 * 32)
    rep = hw.run(ptx, (3,), (64,), [p])
    assert np.array_equal(hw.dev.from_device(p, (32,), np.uint32), np.arange(32) * 5 + 3)
    assert rep.instructions["mbarrier.arrive.shared.b64"] == 3


def test_mbarrier_never_arrived_is_no_progress(hw):
    # the consumers spin on a phase no thread will complete: a hang on a GPU, reported as such
    ptx = kernel_ptx(PIPE.replace("{wait}", "try_wait.parity").replace("{arrive}", ""),
                     nparams=1, prelude=PRE)
    with pytest.raises(EmulatorError, match=r"no progress: 32 thread\(s\) spin in the loop at "
                       r"PTX lines \d+-\d+"):
        hw.run(ptx, (1,), (64,), [hw.dev.malloc(128)])


def test_mbarrier_tokens_and_phases(hw):
    # 48 threads arrive on a barrier expecting 32: phase 0 completes, phase 1 does not
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra R;
  mbarrier.init.shared.b64 [%r2], 32;
R:
  bar.sync 0;
  mbarrier.arrive.shared.b64 %rd5, [%r2];
  mbarrier.test_wait.shared.b64 %p2, [%r2], %rd5;
  shr.u64 %rd6, %rd5, 63;
  cvt.u32.u64 %r3, %rd6;
  selp.u32 %r4, 2, 0, %p2;
  or.b32 %r5, %r3, %r4;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r5;
  ret;
"""
    ptx = kernel_ptx(body, nparams=1, prelude=PRE)
    p = hw.dev.malloc(4 * 48)
    hw.run(ptx, (1,), (48,), [p])
    got = hw.dev.from_device(p, (48,), np.uint32)
    # threads 0..31 arrived in phase 0 (complete: bit 1 set), 32..47 in phase 1 (pending)
    assert np.array_equal(got, np.where(np.arange(48) < 32, 2, 1))


def test_cp_async_mbarrier_arrive_noinc(hw, rng):
    body = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd4, [k_p1];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, buf;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra R;
  mbarrier.init.shared.b64 [%r2], 32;
R:
  bar.sync 0;
  shl.b32 %r4, %r1, 2;
  add.s32 %r5, %r3, %r4;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd5, %rd4, %rd2;
  cp.async.ca.shared.global [%r5], [%rd5], 4;
  cp.async.mbarrier.arrive.noinc.shared.b64 [%r2];
W:
  mbarrier.try_wait.parity.shared.b64 %p2, [%r2], 0;
  @!%p2 bra W;
  xor.b32 %r6, %r4, 4;
  add.s32 %r7, %r3, %r6;
  ld.shared.u32 %r8, [%r7];
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r8;
  ret;
"""
    ptx = kernel_ptx(body, nparams=2, prelude=PRE)
    x = rng.integers(0, 1000, 32).astype(np.uint32)
    d = hw.dev
    po, px = d.malloc(128), d.to_device(x)
    hw.run(ptx, (1,), (32,), [po, px])
    assert np.array_equal(d.from_device(po, (32,), np.uint32), x[np.arange(32) ^ 1])


def test_blocks_whose_shared_size_is_not_a_multiple_of_8(hw):
    # 12 bytes a block (an mbarrier, then a word): every block of the batch still has its
    # 8-byte object aligned (blocks sit 16 bytes apart in the emulator's array), and an
    # access past the 12 declared bytes still faults
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r5, %ctaid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra READY;
  mbarrier.init.shared.b64 [bar], 32;
  st.shared.u32 [word], %r5;
READY:
  bar.sync 0;
  mbarrier.arrive.shared.b64 %rd2, [bar];
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p3, [bar], 0;
  @!%p3 bra WAIT;
  ld.shared.u32 %r6, [word];
  mad.lo.s32 %r7, %r5, 32, %r1;
  mul.wide.u32 %rd3, %r7, 4;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r6;
  ret;
"""
    pre = ".shared .align 8 .b64 bar;\n.shared .align 4 .b32 word;\n"
    out = hw.dev.malloc(4 * 3 * 32)
    hw.run(kernel_ptx(body, nparams=1, prelude=pre), (3,), (32,), [out])
    got = hw.dev.from_device(out, (3, 32), np.uint32)
    assert np.array_equal(got, np.repeat(np.arange(3, dtype=np.uint32)[:, None], 32, 1))
    bad = body.replace("ld.shared.u32 %r6, [word];", "ld.shared.u32 %r6, [word+4];")
    with pytest.raises(EmulatorError, match=r"out-of-bounds shared access of 4 bytes \(block "
                       r"has 12 bytes of shared memory\)"):
        hw.run(kernel_ptx(bad, nparams=1, prelude=pre), (3,), (32,), [out])
