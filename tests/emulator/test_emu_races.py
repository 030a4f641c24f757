"""The shared-memory race check (EmulatorDevice(race_check=True)): pairs of accesses to the
same byte by different agents (warps, TMA copies, in-flight wgmma) that nothing orders:
no barrier, no mbarrier phase between them; and the global race check's byte granularity."""

import re

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
    with pytest.raises(SharedMemoryRace, match=r"warp 0 reads shared memory that warp 1 wrote"):
        run(WRITE, "", READ_OTHER)


def test_barrier_orders_them():
    rep = run(WRITE, "bar.sync 0;", READ_OTHER)
    assert rep.race_check == "checked: no shared-memory race"


def test_off_by_default():
    rep = run(WRITE, "", READ_OTHER, race_check=False)
    assert rep.race_check == "not checked: race_check is off"


def test_write_after_read_without_barrier():
    # the pipeline-stage bug: a buffer refilled while another warp may still read it
    with pytest.raises(SharedMemoryRace, match=r"warp 0 writes shared memory that warp 1 read"):
        run("bar.sync 0;\n  ld.shared.u32 %r10, [%r7];", "", "st.shared.u32 [%r4], %r1;")


def test_same_warp_needs_no_barrier():
    rep = run(WRITE, "", "ld.shared.u32 %r10, [%r4];\n  st.shared.u32 [%r4], %r10;")
    assert rep.race_check.startswith("checked")


def test_two_warps_writing_one_word_in_one_instruction():
    with pytest.raises(SharedMemoryRace, match="writes shared memory that another warp "
                       "writes in the same instruction"):
        run("and.b32 %r8, %r1, 31;\n  shl.b32 %r8, %r8, 2;\n  add.s32 %r8, %r2, %r8;\n"
            "  st.shared.u32 [%r8], %r1;", "", "")


def test_cp_async_into_a_buffer_another_warp_reads():
    # warp 1 reads word t (of warp 0) ... then warp 0 refills it by cp.async: the copy may
    # land at once, so this is a race even though the copy lands only at the wait
    first = "ld.shared.u32 %r10, [%r7];"
    second = ("ld.param.u64 %rd5, [k_p0];\n  mul.wide.u32 %rd6, %r1, 4;\n"
              "  add.s64 %rd7, %rd5, %rd6;\n"
              "  cp.async.ca.shared.global [%r4], [%rd7], 4;\n  cp.async.wait_all;")
    with pytest.raises(SharedMemoryRace, match="writes shared memory that warp . read"):
        run(first, "", second)
    assert run(first, "bar.sync 0;", second).race_check.startswith("checked")


def test_cp_async_landing_read_by_another_warp_before_the_barrier():
    first = ("ld.param.u64 %rd5, [k_p0];\n  mul.wide.u32 %rd6, %r1, 4;\n"
             "  add.s64 %rd7, %rd5, %rd6;\n"
             "  cp.async.ca.shared.global [%r4], [%rd7], 4;\n  cp.async.commit_group;\n"
             "  bar.sync 0;\n  cp.async.wait_group 0;")       # waits after the barrier: bug
    with pytest.raises(SharedMemoryRace, match="reads shared memory that warp . wrote"):
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
    with pytest.raises(SharedMemoryRace, match="warp 1 reads shared memory that warp 0 wrote"):
        run(first, "", second)
    assert run(first, "bar.sync 0;", second).race_check.startswith("checked")


def test_halves_of_one_word_by_two_warps_are_no_race():
    # lane l of warp w stores 2 bytes at 4 l + 2 w: the warps share every word, not a byte
    # (an f16 tile row split between warps); shifted by one byte they overlap
    half = ("and.b32 %r8, %r1, 31;\n  shl.b32 %r8, %r8, 2;\n  shr.u32 %r9, %r1, 5;\n"
            "  shl.b32 %r9, %r9, {shift};\n  add.s32 %r8, %r8, %r9;\n  add.s32 %r8, %r2, %r8;\n"
            "  cvt.u16.u32 %h1, %r1;\n  st.shared.u16 [%r8], %h1;")
    read = "ld.shared.u16 %h2, [%r8];"          # each thread reads its own two bytes back
    assert run(half.format(shift=1), "", read).race_check == "checked: no shared-memory race"
    # shift 5: lane l of warp 1 writes where lane l + 8 of warp 0 did
    with pytest.raises(SharedMemoryRace, match="warp . writes shared memory that another "
                       "warp writes in the same instruction"):
        run(half.format(shift=5), "", read)


def test_a_byte_overlap_between_two_warps_is_a_race():
    # warp 0 stores 4 bytes at 4 l, warp 1 one byte at 4 l + 3: they share one byte
    first = ("and.b32 %r8, %r1, 31;\n  shl.b32 %r8, %r8, 2;\n  add.s32 %r8, %r2, %r8;\n"
             "  setp.lt.u32 %p1, %r1, 32;\n  @%p1 st.shared.u32 [%r8], %r1;\n"
             "  cvt.u16.u32 %h1, %r1;\n  @!%p1 st.shared.u8 [%r8+{k}], %h1;")
    with pytest.raises(SharedMemoryRace, match="warp 1 writes shared memory that warp 0 wrote"):
        run(first.format(k=3), "", "")
    # at 4 l + 4 it is the next lane's word's first byte, written by warp 0 too: a race; the
    # bytes just past warp 0's 128 are not
    with pytest.raises(SharedMemoryRace):
        run(first.format(k=4), "", "")
    assert run(first.format(k=128), "", "").race_check.startswith("checked")


# warp 0 writes word t, then arrives on the mbarrier `mb` (32 arrivals complete a phase);
# warp 1 waits for that phase ({wait}), then reads word t - 32 (warp 0's)
MBAR = """
  mov.u32 %r20, mb;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared.b64 [%r20], 32;
  bar.sync 0;
  setp.lt.u32 %p2, %r1, 32;
  @!%p2 bra WAITER;
  {producer}
  bra DONE;
WAITER:
  {wait}
  ld.shared.u32 %r10, [%r7];
DONE:
"""
WAIT = ("mbarrier.try_wait.parity.shared.b64 %p3, [%r20], 0;\n  @!%p3 bra WAITER;")
WRITE_ARRIVE = "st.shared.u32 [%r4], %r1;\n  mbarrier.arrive.shared.b64 %rd10, [%r20];"


def run_mbar(producer, wait=WAIT):
    return run(MBAR.format(producer=producer, wait=wait), "", "",
               prelude=".shared .align 8 .b8 mb[8];\n")


def test_an_mbarrier_phase_orders_the_arrivals_before_the_waiters():
    assert run_mbar(WRITE_ARRIVE).race_check == "checked: no shared-memory race"


def test_reading_without_waiting_for_the_phase_is_a_race():
    with pytest.raises(SharedMemoryRace, match="warp 1 reads shared memory that warp 0 wrote"):
        run_mbar(WRITE_ARRIVE, wait="")


def test_a_write_after_the_arrive_is_not_ordered():
    late = "mbarrier.arrive.shared.b64 %rd10, [%r20];\n  st.shared.u32 [%r4], %r1;"
    with pytest.raises(SharedMemoryRace, match="warp 1 reads shared memory that warp 0 wrote"):
        run_mbar(late)


# thread 0 announces 256 bytes and copies them from global memory into `buf` by a bulk copy
# completing on `mb` (count 1); warp 1 waits for the phase ({wait}) and reads
TMA = ("mov.u32 %r20, mb;\n  ld.param.u64 %rd20, [k_p0];\n  setp.eq.u32 %p4, %r1, 0;\n"
       "  @!%p4 bra NOTMA;\n  mbarrier.arrive.expect_tx.shared.b64 %rd10, [%r20], 256;\n"
       "  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd20], "
       "256, [%r20];\nNOTMA:")


def run_tma(before, wait=WAIT, after=""):
    body = MBAR.replace("{producer}", "").replace("bar.sync 0;\n", "bar.sync 0;\n  {pre}\n")
    body = body.replace("setp.eq.u32 %p1, %r1, 0;\n  @%p1 mbarrier.init.shared.b64 [%r20], 32;",
                        "setp.eq.u32 %p1, %r1, 0;\n  @%p1 mbarrier.init.shared.b64 [%r20], 1;")
    body = body.replace("DONE:\n", "DONE:\n  " + after + "\n")
    return run(body.format(pre=before + "\n  " + TMA, wait=wait), "", "",
               prelude=".shared .align 8 .b8 mb[8];\n")


def test_tma_data_is_read_after_its_phase_completes():
    assert run_tma("").race_check == "checked: no shared-memory race"


def test_tma_data_read_without_waiting_is_a_race():
    with pytest.raises(SharedMemoryRace, match=r"warp 1 reads shared memory that a TMA copy "
                       r"wrote \(PTX line \d+\)"):
        run_tma("", wait="")


def test_tma_refill_of_a_buffer_another_warp_still_reads_is_a_race():
    # warp 1 reads buf, then (no barrier, no mbarrier) thread 0 copies into it
    with pytest.raises(SharedMemoryRace, match=r"the TMA copy at PTX line \d+ writes shared "
                       r"memory that warp 1 read"):
        run_tma("@!%p4 ld.shared.u32 %r11, [%r2];")
    assert run_tma("@!%p4 ld.shared.u32 %r11, [%r2];\n  bar.sync 0;").race_check \
        == "checked: no shared-memory race"


def test_a_block_barrier_does_not_order_a_tma_copy():
    # thread 0 copies into buf; after a bar.sync (but no wait on the mbarrier) every thread
    # reads its word: the copy may still be writing (the async proxy ignores bar.sync)
    first = ("mov.u32 %r20, mb;\n  setp.eq.u32 %p1, %r1, 0;\n"
             "  @%p1 mbarrier.init.shared.b64 [%r20], 1;\n  bar.sync 0;\n  " + TMA)
    with pytest.raises(SharedMemoryRace, match="warp 0 reads shared memory that a TMA copy "
                       "wrote"):
        run(first, "bar.sync 0;", "ld.shared.u32 %r10, [%r4];",
            prelude=".shared .align 8 .b8 mb[8];\n")
    # waiting for the phase first orders it
    wait = "WAIT:\n  mbarrier.try_wait.parity.shared.b64 %p3, [%r20], 0;\n  @!%p3 bra WAIT;"
    rep = run(first, "bar.sync 0;\n  " + wait, "ld.shared.u32 %r10, [%r4];",
              prelude=".shared .align 8 .b8 mb[8];\n")
    assert rep.race_check == "checked: no shared-memory race"


def test_distributed_shared_memory_is_not_checked():
    rep = run(WRITE, "bar.sync 0;", "ld.shared::cluster.u32 %r10, [%r7];")
    assert rep.race_check == "not checked: the kernel accesses distributed shared memory"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_matmul_example_with_f16_halves_split_between_warps(arch):
    # examples/matmul.tile without its cluster, 64 x 64 x 32 tiles, K = 20: the zero-padded
    # f16 tiles are stored element by element, and two warps write the two halves of shared
    # words (st.shared.b16): no race, as every byte has one writer
    import pathlib

    import tilelang
    from tilelang.runtime.emulator_backend import EmulatorBackend
    src = (pathlib.Path(__file__).parents[2] / "examples" / "matmul.tile").read_text()
    # its launch on every target but sm_90a, without the cluster
    src = re.sub(r"^@launch\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)$",
                 "@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168))", src,
                 count=1, flags=re.M)
    assert "cluster =" not in src.split("kernel matmul")[0]
    be = EmulatorBackend()
    be.device.race_check = True
    reports = []
    launch = be.device.launch
    be.device.launch = lambda *a, **k: reports.append(launch(*a, **k)) or reports[-1]
    mod = tilelang.compile(src, arch=arch, defines={"BM": 64, "BN": 64, "BK": 32},
                           backend=be, cache=False)
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (130, 20)).astype(np.float16)
    b = rng.integers(-4, 5, (20, 70)).astype(np.float16)
    c = tilelang.to_device(np.full((130, 70), np.nan, np.float32), backend=be)
    mod.matmul[(3, 2)](tilelang.to_device(a, backend=be), tilelang.to_device(b, backend=be), c)
    assert np.array_equal(np.asarray(c), a.astype(np.float64) @ b.astype(np.float64))
    assert [r.race_check for r in reports] == ["checked: no shared-memory race"]
    assert any(op.startswith("st.shared.b16") for r in reports for op in r.instructions)


def test_global_race_check_is_byte_granular():
    # block b, lane l stores 2 bytes at 4 l + {off} b (block 0, then block 1): halves of one
    # word (no race), or the same 2 bytes (two blocks' plain stores, nothing between: a race)
    body = ("  mov.u32 %r1, %tid.x;\n  mov.u32 %r2, %ctaid.x;\n  ld.param.u64 %rd1, [k_p0];\n"
            "  mul.lo.u32 %r3, %r2, {off};\n  mad.lo.u32 %r3, %r1, 4, %r3;\n"
            "  cvt.u64.u32 %rd2, %r3;\n  add.s64 %rd3, %rd1, %rd2;\n  cvt.u16.u32 %h1, %r1;\n"
            "  setp.eq.u32 %p1, %r2, 0;\n  @%p1 st.global.u16 [%rd3], %h1;\n"
            "  @!%p1 st.global.u16 [%rd3], %h1;\n  ret;")          # block 0 first, then 1

    def launch(off, text=body):
        dev = EmulatorDevice(global_race_check=True)
        fn = dev.load_module(kernel_ptx(text.replace("{off}", str(off)), nparams=1)) \
            .get_function("k")
        return dev.launch(fn, (2,), (32,), [dev.malloc(256)])
    assert launch(2).global_race_check == "checked: no global-memory race between blocks"
    from tilelang.emulator.errors import GlobalMemoryRace
    with pytest.raises(GlobalMemoryRace, match=r"this block writes a word that block "
                       r"\(0, 0, 0\) wrote"):
        launch(0)
    # both blocks' stores in one step of the lockstep execution: a race too
    one = body.replace("  setp.eq.u32 %p1, %r2, 0;\n  @%p1 st.global.u16 [%rd3], %h1;\n"
                       "  @!%p1 ", "  ")
    assert one.count("st.global") == 1
    assert launch(2, one).global_race_check.startswith("checked")
    with pytest.raises(GlobalMemoryRace):
        launch(0, one)


# -- write-write pairs: a race only where the values differ ----------------------------------
SAME_WORD = "and.b32 %r8, %r1, 31;\n  shl.b32 %r8, %r8, 2;\n  add.s32 %r8, %r2, %r8;\n"


def test_replicated_zero_fill_in_one_instruction_is_benign():
    # both warps store 0 to the same 32 words in one instruction (how a replicated layout
    # stores, e.g. a zero fill): memory ends the same in any order, so no race
    rep = run(SAME_WORD + "  mov.u32 %r9, 0;\n  st.shared.u32 [%r8], %r9;", "bar.sync 0;",
              "ld.shared.u32 %r10, [%r8];")
    assert rep.race_check == "checked: no shared-memory race"
    # the same with one lane of warp 1 storing 1 instead: a real conflict
    with pytest.raises(SharedMemoryRace, match=r"warp 0 writes shared memory that another "
                       r"warp writes in the same instruction.*thread \(5, 0, 0\), address 0x14"):
        run(SAME_WORD + "  setp.eq.u32 %p2, %r1, 37;\n  selp.u32 %r9, 1, 0, %p2;\n"
            "  st.shared.u32 [%r8], %r9;", "bar.sync 0;", "")


def test_rewriting_the_value_another_warp_left_is_benign():
    # warp 0 stores 7 to words 0-31, then warp 1 stores to the same words with no barrier:
    # the same value changes nothing; another value is a race
    first = SAME_WORD + ("  setp.lt.u32 %p1, %r1, 32;\n  mov.u32 %r9, 7;\n"
                         "  @%p1 st.shared.u32 [%r8], %r9;\n")
    same = "@!%p1 st.shared.u32 [%r8], %r9;"
    assert run(first, "", same).race_check == "checked: no shared-memory race"
    with pytest.raises(SharedMemoryRace, match="warp 1 writes shared memory that warp 0 wrote"):
        run(first, "", "add.u32 %r9, %r9, 1;\n  @!%p1 st.shared.u32 [%r8], %r9;")


def test_replicated_cp_async_of_the_same_bytes_is_benign():
    # both warps copy the same global words into the same shared words
    copy = (SAME_WORD + "  ld.param.u64 %rd5, [k_p0];\n  cvt.u64.u32 %rd6, %r8;\n"
            "  and.b64 %rd6, %rd6, 127;\n  add.s64 %rd7, %rd5, %rd6;\n"
            "  cp.async.ca.shared.global [%r8], [%rd7], 4;\n  cp.async.wait_all;")
    assert run(copy, "bar.sync 0;", "ld.shared.u32 %r10, [%r8];").race_check == \
        "checked: no shared-memory race"
