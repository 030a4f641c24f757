"""The shared-memory race check (EmulatorDevice(race_check=True)): pairs of accesses to the
same word by different warps with no barrier of the whole block between them."""

import numpy as np
import pytest

from emu_support import kernel_ptx
from tilelang.emulator import EmulatorDevice, SharedMemoryRace

# 64 threads = 2 warps. Thread t (warp w = t / 32) writes word t of `buf` with {first},
# then {sync}, then reads word (t + 32) % 64, i.e. the word the other warp wrote, with {second}.
BODY = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r2, buf;
  shl.b32 %r3, %r1, 2;
  add.s32 %r4, %r2, %r3;
  add.s32 %r5, %r1, 32;
  and.b32 %r5, %r5, 63;
  shl.b32 %r6, %r5, 2;
  add.s32 %r7, %r2, %r6;
  {first}
  {sync}
  {second}
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r10;
  ret;
"""


def run(first, sync, second, race_check=True, prelude=""):
    ptx = kernel_ptx(BODY.format(first=first, sync=sync, second=second), nparams=1,
                     prelude=".shared .align 16 .b8 buf[1024];\n" + prelude)
    dev = EmulatorDevice(race_check=race_check)
    out = dev.malloc(4 * 64)
    return dev.launch(dev.load_module(ptx).get_function("k"), (2,), (64,), [out])


WRITE = "st.shared.u32 [%r4], %r1;"
READ_OTHER = "ld.shared.u32 %r10, [%r7];"


def test_read_after_write_without_barrier():
    with pytest.raises(SharedMemoryRace, match=r"warp 0 reads a word that warp 1 wrote"):
        run(WRITE, "", READ_OTHER)


def test_barrier_orders_them():
    rep = run(WRITE, "bar.sync 0;", READ_OTHER)
    assert rep.race_check == "checked: no shared-memory race"


def test_off_by_default():
    rep = run(WRITE, "", READ_OTHER, race_check=False)
    assert rep.race_check == "not checked: race_check is off"


def test_write_after_read_without_barrier():
    # the pipeline-stage bug: a buffer refilled while another warp may still read it
    with pytest.raises(SharedMemoryRace, match=r"warp 0 writes a word that warp 1 read"):
        run("bar.sync 0;\n  ld.shared.u32 %r10, [%r7];", "", "st.shared.u32 [%r4], %r1;")


def test_same_warp_needs_no_barrier():
    rep = run(WRITE, "", "ld.shared.u32 %r10, [%r4];\n  st.shared.u32 [%r4], %r10;")
    assert rep.race_check.startswith("checked")


def test_two_warps_writing_one_word_in_one_instruction():
    with pytest.raises(SharedMemoryRace, match="writes a word that another warp writes"):
        run("and.b32 %r8, %r1, 31;\n  shl.b32 %r8, %r8, 2;\n  add.s32 %r8, %r2, %r8;\n"
            "  st.shared.u32 [%r8], %r1;", "", "")


def test_cp_async_into_a_buffer_another_warp_reads():
    # warp 1 reads word t (of warp 0) ... then warp 0 refills it by cp.async: the copy may
    # land at once, so this is a race even though the copy lands only at the wait
    first = "ld.shared.u32 %r10, [%r7];"
    second = ("ld.param.u64 %rd5, [k_p0];\n  mul.wide.u32 %rd6, %r1, 4;\n"
              "  add.s64 %rd7, %rd5, %rd6;\n"
              "  cp.async.ca.shared.global [%r4], [%rd7], 4;\n  cp.async.wait_all;")
    with pytest.raises(SharedMemoryRace, match="writes a word that warp . read"):
        run(first, "", second)
    assert run(first, "bar.sync 0;", second).race_check.startswith("checked")


def test_cp_async_landing_read_by_another_warp_before_the_barrier():
    first = ("ld.param.u64 %rd5, [k_p0];\n  mul.wide.u32 %rd6, %r1, 4;\n"
             "  add.s64 %rd7, %rd5, %rd6;\n"
             "  cp.async.ca.shared.global [%r4], [%rd7], 4;\n  cp.async.commit_group;\n"
             "  bar.sync 0;\n  cp.async.wait_group 0;")       # waits after the barrier: bug
    with pytest.raises(SharedMemoryRace, match="reads a word that warp . wrote"):
        run(first, "", READ_OTHER)
    ok = first.replace("  bar.sync 0;\n  cp.async.wait_group 0;",
                       "  cp.async.wait_group 0;\n  bar.sync 0;")
    assert run(ok, "", READ_OTHER).race_check.startswith("checked")


def test_ldmatrix_of_rows_another_warp_wrote():
    # 64 threads write 16 bytes each (1 KiB); warp 1 reads rows 0-31 (warp 0's) by ldmatrix
    first = ("shl.b32 %r11, %r1, 4;\n  add.s32 %r12, %r2, %r11;\n"
             "  st.shared.v4.u32 [%r12], {%r1, %r1, %r1, %r1};")
    second = ("and.b32 %r13, %r1, 31;\n  shl.b32 %r13, %r13, 4;\n  add.s32 %r13, %r2, %r13;\n"
              "  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r10, %r14, %r15, %r16}, [%r13];")
    with pytest.raises(SharedMemoryRace, match="warp 1 reads a word that warp 0 wrote"):
        run(first, "", second)
    assert run(first, "bar.sync 0;", second).race_check.startswith("checked")


def test_mbarrier_kernels_are_not_checked():
    rep = run(WRITE, "mov.u32 %r20, mb;\n  mbarrier.init.shared.b64 [%r20], 64;\n  bar.sync 0;",
              READ_OTHER, prelude=".shared .align 8 .b8 mb[8];\n")
    assert rep.race_check == "not checked: the kernel synchronizes through mbarriers"
