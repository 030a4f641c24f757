"""The race check follows tcgen05's asynchronous completion (emulator/tmemrace.py, races.py):
hand-written sm_100a kernels (test_emu_tcgen05's one-product kernel, edited) with and without
each synchronization step — the commit's mbarrier wait before reading the accumulator,
tcgen05.wait::ld before the cells are overwritten, tcgen05.wait::st before a product reads
them, and (in the strict mode) the thread-sync fences — each failing without it and passing
with it; and the compiler's tcgen05 kernels on sm_100a (the ring, the warp-specialized ring,
the CTA pair) pass the strict mode."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.emulator import TensorMemoryRace
from tilelang.emulator.errors import SharedMemoryRace

from test_emu_tcgen05 import B_BASE, F16, SMEM, _ptx, _run, idesc, layout

N = 16
WAIT_LD = "  tcgen05.wait::ld.sync.aligned;\n"
WAIT_ST = "  tcgen05.wait::st.sync.aligned;\n"
# after the loads: a second product into the same accumulator (enable-input-d false), waited
# for by every thread before the dealloc
AGAIN = """  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  @%p4 tcgen05.mma.cta_group::1.kind::f16 [%r20], %rd3, %rd4, %r42, %p2;
  @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
WAIT2:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 1;
  @!%p3 bra WAIT2;
  tcgen05.fence::after_thread_sync;"""


def _operands():
    rng = np.random.default_rng(5)
    A = rng.integers(-3, 4, (128, 16)).astype(np.float16)
    B = rng.integers(-3, 4, (N, 16)).astype(np.float16)
    img = np.zeros(SMEM, np.uint8)
    return img, layout(img, A, 0, 2, True, 128), layout(img, B, B_BASE, 2, True, 128), \
        A.astype(np.float64) @ B.astype(np.float64).T


def _go(ptx, race_check=True, enable=0):
    img, ad, bd, ref = _operands()
    D = _run(ptx, img, ad, bd, idesc(F16, F16, N), N, enable=enable, race_check=race_check)
    return D, ref


def _one_waiter():
    """Only warp 0 waits for the product; warps 1-3 learn it from an atomic flag (atomics
    order nothing for the check, as a relaxed flag orders nothing on a GPU)."""
    ptx = _ptx(N)
    wait = ("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;\n"
            "  @!%p3 bra WAIT;\n")
    assert wait in ptx
    flagged = ("  setp.lt.u32 %p6, %r2, 32;\n  @!%p6 bra SPIN;\n" + wait +
               "  atom.shared.exch.b32 %r60, [flag], 1;\n  bra GO;\nSPIN:\n"
               "  atom.shared.or.b32 %r60, [flag], 0;\n  setp.eq.u32 %p7, %r60, 0;\n"
               "  @%p7 bra SPIN;\nGO:\n")
    return ptx.replace(wait, flagged).replace(
        "  .shared .align 8 .b64 taddr;", "  .shared .align 8 .b64 taddr;\n"
        "  .shared .align 8 .b64 flag;")


def test_the_protocol_passes_both_modes():
    for mode in (True, "strict"):
        D, ref = _go(_ptx(N), mode)
        np.testing.assert_array_equal(D, ref)


def test_reading_the_accumulator_without_the_commits_wait():
    with pytest.raises(TensorMemoryRace, match=r"tensor-memory race: warp 1's tcgen05.ld "
                       r"reads tensor memory \(lanes 32..47, column 0\) that the tcgen05 "
                       r"operation of warp group 0 wrote \(PTX line \d+\), and nothing orders "
                       r"the two \(no wait on the mbarrier of its tcgen05.commit\)"):
        _go(_one_waiter())
    D, ref = _go(_one_waiter(), race_check=False)    # the emulator's answer is right by luck
    np.testing.assert_array_equal(D, ref)


def test_overwriting_cells_without_wait_ld():
    ptx = _ptx(N, after_ld=AGAIN)
    D, _ = _go(ptx)
    np.testing.assert_array_equal(D, _operands()[3])
    assert ptx.count(WAIT_LD) == 1
    with pytest.raises(TensorMemoryRace, match=r"tensor-memory race: the tcgen05.mma writes "
                       r"tensor memory \(lanes 0..15, column 0\) that warp 0's tcgen05.ld "
                       r"read \(PTX line \d+\), and nothing orders the two \(no "
                       r"tcgen05.wait::ld of that warp before the thread sync\)"):
        _go(ptx.replace(WAIT_LD, ""))


def test_a_product_reading_cells_without_wait_st():
    ptx = _ptx(N)
    assert ptx.count(WAIT_ST) == 1
    init = np.float32(1.0).view(np.uint32)
    img, ad, bd, ref = _operands()
    D = _run(ptx, img, ad, bd, idesc(F16, F16, N), N, enable=1, init=init, race_check=True)
    np.testing.assert_array_equal(D, ref + 1.0)
    with pytest.raises(TensorMemoryRace, match=r"the tcgen05.mma writes tensor memory "
                       r"\(lanes 0..15, column 0\) that warp 0's tcgen05.st wrote \(PTX line "
                       r"\d+\), and nothing orders the two \(no tcgen05.wait::st of that warp "
                       r"before the thread sync\)"):
        _run(ptx.replace(WAIT_ST, ""), img, ad, bd, idesc(F16, F16, N), N, enable=1,
             init=init, race_check=True)


AFTER_WAIT = "  @!%p3 bra WAIT;\n  tcgen05.fence::after_thread_sync;\n"
BEFORE_SYNC = WAIT_ST + "  fence.proxy.async.shared::cta;\n  tcgen05.fence::before_thread_sync;\n"


def test_strict_mode_needs_the_fence_after_the_wait():
    ptx = _ptx(N)
    assert ptx.count(AFTER_WAIT) == 1
    bad = ptx.replace(AFTER_WAIT, "  @!%p3 bra WAIT;\n")
    D, ref = _go(bad)                                 # the default mode does not ask
    np.testing.assert_array_equal(D, ref)
    with pytest.raises(TensorMemoryRace, match=r"warp 0's tcgen05.ld reads tensor memory "
                       r"\(lanes 0..15, column 0\) that the tcgen05 operation of warp group 0 "
                       r"wrote \(PTX line \d+\), and nothing orders the two \(no wait on the "
                       r"mbarrier of its tcgen05.commit followed by "
                       r"tcgen05.fence::after_thread_sync\)"):
        _go(bad, "strict")


def test_strict_mode_needs_the_fence_before_the_barrier():
    ptx = _ptx(N)
    assert ptx.count(BEFORE_SYNC) == 1
    bad = ptx.replace(BEFORE_SYNC, WAIT_ST + "  fence.proxy.async.shared::cta;\n")
    init = np.float32(2.0).view(np.uint32)
    img, ad, bd, ref = _operands()
    D = _run(bad, img, ad, bd, idesc(F16, F16, N), N, enable=1, init=init, race_check=True)
    np.testing.assert_array_equal(D, ref + 2.0)
    with pytest.raises(TensorMemoryRace, match=r"the tcgen05.mma writes tensor memory "
                       r"\(lanes 0..15, column 0\) that warp 0's tcgen05.st wrote \(PTX line "
                       r"\d+\), and nothing orders the two \(tcgen05.wait::st came, but no "
                       r"tcgen05.fence::before_thread_sync before the thread sync\)"):
        _run(bad, img, ad, bd, idesc(F16, F16, N), N, enable=1, init=init,
             race_check="strict")


def test_a_tensor_memory_race_is_a_race():
    assert issubclass(TensorMemoryRace, SharedMemoryRace)


def test_race_check_values():
    from tilelang.emulator import EmulatorDevice
    with pytest.raises(ValueError, match="race_check must be False, True or 'strict', not "
                       "'yes'"):
        EmulatorDevice(race_check="yes")


def test_tritons_pair_kernel_is_race_free_across_its_ctas(monkeypatch):
    # the independent judge of the 2-CTA reading (test_emu_tcgen05_pair.py) under the race
    # check: its copies complete on the even CTA's mbarrier, its products read both CTAs'
    # shared memory and write both CTAs' tensor memory, its commits arrive on both CTAs
    import test_emu_tcgen05_pair as pair
    from tilelang.emulator import EmulatorDevice
    reports = []

    class Checked(EmulatorDevice):
        def __init__(self):
            super().__init__(race_check=True)

        def launch(self, *a, **k):
            reports.append(super().launch(*a, **k))
            return reports[-1]
    monkeypatch.setattr(pair, "EmulatorDevice", Checked)
    a, b = pair._operands(exact=True)
    c = pair.run(a, b)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))
    assert reports[0].race_check == "checked: no shared-memory race"


def test_strict_mode_holds_the_loaded_registers_until_wait_ld():
    # the kernel stores each loaded register to global memory after the chunk's wait::ld;
    # moving the wait after the stores reads the registers early (what LLVM does to
    # Triton's wait, which the default mode accepts)
    ptx = _ptx(N)
    stores = ptx[ptx.index(WAIT_LD) + len(WAIT_LD):ptx.index("\n\n", ptx.index(WAIT_LD))]
    assert stores.count("st.global.b32") == N
    late = ptx.replace(WAIT_LD + stores, stores + "\n" + WAIT_LD)
    D, ref = _go(late)
    np.testing.assert_array_equal(D, ref)
    with pytest.raises(TensorMemoryRace, match=r"tensor-memory race: st.global.b32 reads %v0, "
                       r"which the tcgen05.ld at PTX line \d+ writes, before the warp's "
                       r"tcgen05.wait::ld"):
        _go(late, "strict")


def test_waiting_for_a_product_never_committed_is_no_progress():
    from tilelang.emulator.errors import NoProgress
    commit = ("  @%p4 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
              "[bar];\n")
    ptx = _ptx(N)
    assert commit in ptx
    mma_line = next(i + 1 for i, text in enumerate(ptx.splitlines())
                    if "tcgen05.mma" in text)
    with pytest.raises(NoProgress, match=r"no progress: 128 thread\(s\) spin in the loop at "
                       r"PTX lines \d+-\d+, .* The tcgen05 operation\(s\) at PTX line\(s\) "
                       + str(mma_line) + r" were issued but never committed: no "
                       r"tcgen05.commit will arrive on an mbarrier for them"):
        _go(ptx.replace(commit, ""))
