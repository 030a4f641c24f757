"""cp.async: every form the tensor-core data path may emit, and the landing model (a copy
reaches shared memory when its thread waits for its group, not before)."""

import numpy as np
import pytest

from emu_support import kernel_ptx
from tilelang.emulator.errors import MemoryFault

# Thread t copies 16 bytes from src + 16 t into buf + 16 t with `{copy}`, then `{after}`
# runs and the thread's 16 bytes of buf go to out + 16 t. buf starts filled with 0xEE.
BODY = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  mov.u32 %r2, buf;
  shl.b32 %r3, %r1, 4;
  add.s32 %r4, %r2, %r3;
  mov.u32 %r30, 0xEEEEEEEE;
  st.shared.v4.u32 [%r4], {{%r30, %r30, %r30, %r30}};
  mul.wide.u32 %rd3, %r1, 16;
  add.s64 %rd4, %rd2, %rd3;
  and.b32 %r5, %r1, 15;
  setp.lt.u32 %p1, %r1, 8;
  {copy}
  {after}
  ld.shared.v4.u32 {{%r10, %r11, %r12, %r13}}, [%r4];
  add.s64 %rd5, %rd1, %rd3;
  st.global.v4.u32 [%rd5], {{%r10, %r11, %r12, %r13}};
  ret;
"""

N = 64


def run(hw, copy, after, src=None, nthreads=N):
    ptx = kernel_ptx(BODY.format(copy=copy, after=after), nparams=2,
                     prelude=".shared .align 16 .b8 buf[1024];\n")
    d = hw.dev
    if src is None:
        src = np.arange(1, 16 * N + 1, dtype=np.uint32).astype(np.uint8) | np.uint8(1)
    ps, po = d.to_device(src), d.malloc(16 * N)
    d.memset(po, 0, 16 * N)
    rep = hw.run(ptx, (1,), (nthreads,), [po, ps])
    return d.from_device(po, (N, 16), np.uint8), src.reshape(N, 16), rep


OLD = np.full(16, 0xEE, np.uint8)


def test_copy_lands_at_wait_group_not_at_issue(hw):
    out, src, _ = run(hw, "cp.async.cg.shared.global [%r4], [%rd4], 16;",
                      "cp.async.commit_group;")
    assert (out == OLD).all()                       # read before waiting: stale shared memory
    out, src, _ = run(hw, "cp.async.cg.shared.global [%r4], [%rd4], 16;",
                      "cp.async.commit_group;\n  cp.async.wait_group 0;")
    assert np.array_equal(out, src)


def test_wait_group_n_leaves_the_newest_n_groups_pending(hw):
    # group 0 copies the first 8 bytes, group 1 the last 8: wait_group 1 lands only group 0
    copy = ("cp.async.ca.shared.global [%r4], [%rd4], 8;\n  cp.async.commit_group;\n"
            "  cp.async.ca.shared.global [%r4+8], [%rd4+8], 8;\n  cp.async.commit_group;")
    out, src, _ = run(hw, copy, "cp.async.wait_group 1;")
    assert np.array_equal(out[:, :8], src[:, :8]) and (out[:, 8:] == 0xEE).all()
    out, src, _ = run(hw, copy, "cp.async.wait_group 1;\n  cp.async.wait_group 0;")
    assert np.array_equal(out, src)


def test_wait_all_lands_uncommitted_copies(hw):
    out, src, _ = run(hw, "cp.async.ca.shared.global [%r4], [%rd4], 16;", "cp.async.wait_all;")
    assert np.array_equal(out, src)
    # wait_group does not wait for copies that were never committed
    out, _, _ = run(hw, "cp.async.ca.shared.global [%r4], [%rd4], 16;",
                    "cp.async.wait_group 0;")
    assert (out == OLD).all()


@pytest.mark.parametrize("size", [4, 8, 16])
def test_ca_sizes(hw, size):
    copy = "\n  ".join(f"cp.async.ca.shared.global [%r4+{o}], [%rd4+{o}], {size};"
                       for o in range(0, 16, size))
    out, src, _ = run(hw, copy, "cp.async.wait_all;")
    assert np.array_equal(out, src)


def test_src_size_zero_fills_and_reads_only_src_size_bytes(hw):
    # thread t reads t % 16 bytes; threads with src-size 0 point far outside any allocation
    copy = ("setp.eq.u32 %p2, %r5, 0;\n"
            "  @%p2 mov.u64 %rd4, 0x10;\n"
            "  cp.async.cg.shared.global.L2::128B [%r4], [%rd4], 16, %r5;")
    out, src, rep = run(hw, copy, "cp.async.commit_group;\n  cp.async.wait_group 0;")
    exp = src.copy()
    for t in range(N):
        exp[t, t % 16:] = 0
    assert np.array_equal(out, exp)
    # global bytes counted: the src-size bytes of the copies plus the 16-byte result stores
    assert rep.global_bytes == sum(t % 16 for t in range(N)) + 16 * N


def test_src_size_beyond_cp_size_is_an_error(hw):
    from tilelang.emulator.errors import ExecutionError
    with pytest.raises(ExecutionError, match="src-size 17 exceeds cp-size 16"):
        run(hw, "mov.u32 %r6, 17;\n  cp.async.cg.shared.global [%r4], [%rd4], 16, %r6;",
            "cp.async.wait_all;")


def test_ignore_src_predicate_copies_zeros(hw):
    out, src, _ = run(hw, "cp.async.ca.shared.global [%r4], [%rd4], 16, %p1;",
                      "cp.async.wait_all;")
    assert (out[:8] == 0).all() and np.array_equal(out[8:], src[8:])


def test_cache_hint_policy_operand(hw):
    copy = ("createpolicy.fractional.L2::evict_last.b64 %rd20, 1.0;\n"
            "  cp.async.cg.shared.global.L2::cache_hint [%r4], [%rd4], 16, %r5, %rd20;\n"
            "  cp.async.ca.shared.global.L2::cache_hint.L2::256B [%r4], [%rd4], 16, %rd20;")
    out, src, _ = run(hw, copy, "cp.async.commit_group;\n  cp.async.wait_group 0;")
    assert np.array_equal(out, src)        # the second copy (full 16 bytes) lands last


def test_full_copy_out_of_bounds_still_faults(hw):
    with pytest.raises(MemoryFault, match="out-of-bounds global access of 16 bytes"):
        run(hw, "add.s64 %rd4, %rd4, 4096;\n  cp.async.cg.shared.global [%r4], [%rd4], 16;",
            "cp.async.wait_all;")


def test_bad_forms_are_load_errors(hw):
    from tilelang.emulator.errors import PTXParseError
    with pytest.raises(PTXParseError, match="cp.async.cg copies 16 bytes"):
        run(hw, "cp.async.cg.shared.global [%r4], [%rd4], 8;", "")
    with pytest.raises(PTXParseError, match="size must be 4, 8 or 16"):
        run(hw, "cp.async.ca.shared.global [%r4], [%rd4], 2;", "")


def test_mbarrier_arrive_lands_the_threads_copies(hw):
    body = BODY.format(copy="cp.async.ca.shared.global [%r4], [%rd4], 16;",
                       after="mov.u32 %r20, bar;\n"
                             "  setp.eq.u32 %p3, %r1, 0;\n"
                             "  @%p3 mbarrier.init.shared.b64 [%r20], 64;\n"
                             "  bar.sync 0;\n"
                             "  cp.async.mbarrier.arrive.noinc.shared.b64 [%r20];\n"
                             "  waitloop:\n"
                             "  mbarrier.test_wait.parity.shared.b64 %p4, [%r20], 0;\n"
                             "  @!%p4 bra waitloop;")
    ptx = kernel_ptx(body, nparams=2, prelude=".shared .align 16 .b8 buf[1024];\n"
                     ".shared .align 8 .b8 bar[8];\n")
    d = hw.dev
    src = (np.arange(16 * N) % 251 + 1).astype(np.uint8)
    ps, po = d.to_device(src), d.malloc(16 * N)
    hw.run(ptx, (1,), (N,), [po, ps])
    assert np.array_equal(d.from_device(po, (N, 16), np.uint8), src.reshape(N, 16))
