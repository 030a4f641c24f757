"""Instructions counted three ways (tilelang/emulator/counters.py), with known answers.

- executed thread-instructions (`total_instructions`): active threads whose guard is true;
- issued thread-instructions (`total_issued_threads`): active threads, whatever the guard;
- issued warp-instructions (`total_issued`): once per warp with an active thread there.

Each kernel below is small enough to count by hand; the expected figures are worked out in the
comments, per block, from the code's shape (not from a run).
"""

import numpy as np
import pytest

from emu_support import kernel_ptx

STORE_R3 = """
  ld.param.u64 %rd1, [k_p0];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
"""

# r3 = tid + 7 behind a branch on tid >= 1000, which no thread of these launches takes
BRANCH_NOT_TAKEN = """
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, 1000;
  @%p1 bra SKIP;
  add.u32 %r3, %r1, 7;
SKIP:
""" + STORE_R3 + "  ret;\n"


def launch(hw, body, grid, block, nout):
    out = hw.dev.malloc(4 * nout)
    rep = hw.run(kernel_ptx(body, nparams=1), (grid,), (block,), [out])
    return rep, hw.dev.from_device(out, (nout,), np.uint32)


def counts(rep):
    return rep.total_instructions, rep.total_issued_threads, rep.total_issued


def test_predicated_off_instructions_are_issued(hw):
    body = """
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 40;
  @%p1 add.u32 %r3, %r1, 1;
  setp.gt.u32 %p2, %r1, 1000;
  @%p2 add.u32 %r4, %r1, 2;
""" + STORE_R3.replace("st.global", "@%p1 st.global") + "  ret;\n"
    rep, got = launch(hw, body, 2, 64, 64)
    # 10 instructions, 2 warps: 20 warp-instructions and 640 thread-instructions issued per
    # block; executed: 64 x 7 + 40 (add, st under %p1) + 0 (add under %p2, false everywhere)
    assert counts(rep) == (2 * 528, 2 * 640, 2 * 20)
    assert rep.instructions["add.u32"] == 2 * 40
    assert rep.issued["add.u32"] == 2 * 4 and rep.issued_threads["add.u32"] == 2 * 128
    assert rep.issued["st.global.u32"] == 2 * 2
    assert got[:40].tolist() == list(range(1, 41))


@pytest.mark.parametrize("block", [64, 48])
def test_branch_not_taken_costs_an_issue_per_warp(hw, block):
    body = BRANCH_NOT_TAKEN
    rep, got = launch(hw, body, 3, block, block)
    # 9 instructions, all reached by every thread; the branch executes for none
    nwarps = 2                      # 64 = 2 full warps; 48 = a full warp and one of 16
    assert counts(rep) == (3 * 8 * block, 3 * 9 * block, 3 * 9 * nwarps)
    assert "bra" not in rep.instructions
    assert rep.issued["bra"] == 3 * nwarps and rep.issued_threads["bra"] == 3 * block
    assert np.array_equal(got, np.arange(block) + 7)


DIVERGE = """
  mov.u32 %r1, %tid.x;
  {split}
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra EVEN;
  add.u32 %r3, %r1, 100;
  mul.lo.u32 %r3, %r3, 3;
  bra.uni JOIN;
EVEN:
  add.u32 %r3, %r1, 200;
JOIN:
""" + STORE_R3 + "  ret;\n"


@pytest.mark.parametrize("block", [64, 48])
def test_divergence_inside_warps_issues_both_paths_in_every_warp(hw, block):
    rep, got = launch(hw, DIVERGE.format(split="and.b32 %r2, %r1, 1;"), 2, block, block)
    # even lanes: add (1 instruction); odd lanes: add, mul, bra (3); both in every warp.
    # 9 instructions run by all, 4 by half the threads; the branch executes for the evens.
    half = block // 2
    issued_threads = 9 * block + 4 * half
    executed = 8 * block + half + 4 * half
    assert counts(rep) == (2 * executed, 2 * issued_threads, 2 * 13 * 2)
    t = np.arange(block)
    assert np.array_equal(got, np.where(t % 2 == 0, t + 200, (t + 100) * 3))


@pytest.mark.parametrize("block,second", [(64, 32), (48, 16)])
def test_divergence_between_warps_issues_each_path_in_its_warps(hw, block, second):
    rep, got = launch(hw, DIVERGE.format(split="shr.u32 %r2, %r1, 5;"), 2, block, block)
    # warp 0 takes EVEN (1 instruction), warp 1 (`second` threads) the other path (3):
    # 9 x 2 + 1 + 3 = 22 warp-instructions per block
    issued_threads = 9 * block + 32 + 3 * second
    executed = 8 * block + 32 + 32 + 3 * second      # the branch executes for warp 0
    assert counts(rep) == (2 * executed, 2 * issued_threads, 2 * 22)
    t = np.arange(block)
    assert np.array_equal(got, np.where(t < 32, t + 200, (t + 100) * 3))


@pytest.mark.parametrize("limit,warps_after", [(40, 2), (32, 1), (64, 2)])
def test_exited_threads_are_not_issued(hw, limit, warps_after):
    body = f"""
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, {limit};
  @%p1 exit;
  add.u32 %r3, %r1, 5;
""" + STORE_R3 + "  ret;\n"
    rep, got = launch(hw, body, 3, 64, 64)
    # 3 instructions by all 64 threads (2 warps), then 6 by the `limit` threads left
    executed = 2 * 64 + (64 - limit) + 6 * limit
    issued_threads = 3 * 64 + 6 * limit
    assert counts(rep) == (3 * executed, 3 * issued_threads, 3 * (3 * 2 + 6 * warps_after))
    assert rep.issued["exit"] == 3 * 2
    assert np.array_equal(got[:limit], np.arange(limit) + 5)


def test_loop_trip_count_per_warp(hw):
    body = """
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  add.u32 %r2, %r2, 1;
  mov.u32 %r3, 0;
LOOP:
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p1, %r3, %r2;
  @%p1 bra LOOP;
""" + STORE_R3 + "  ret;\n"
    rep, got = launch(hw, body, 2, 96, 96)
    # warp w runs the 3-instruction body w + 1 times (1 + 2 + 3 = 6 warp-passes); 4
    # instructions before it and 5 after are run once by all 3 warps. The back edge is
    # taken 0, 1 and 2 times by the 32 threads of warps 0, 1, 2.
    warps = 4 * 3 + 3 * 6 + 5 * 3
    issued_threads = 9 * 96 + 3 * 32 * 6
    executed = 9 * 96 + 2 * 32 * 6 + 32 * 3
    assert counts(rep) == (2 * executed, 2 * issued_threads, 2 * warps)
    assert rep.issued["bra"] == 2 * 6
    assert np.array_equal(got, np.arange(96) // 32 + 1)


def test_batches_of_different_sizes_are_counted_per_batch(hw, monkeypatch):
    # a last batch smaller than the others: its uniform steps count its own threads / warps
    import tilelang.emulator.device as device
    monkeypatch.setattr(device, "BATCH_THREADS", 128)
    body = """
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, 1000;
  @%p1 add.u32 %r1, %r1, 1;
  add.u32 %r3, %r1, 7;
""" + STORE_R3 + "  ret;\n"
    rep, got = launch(hw, body, 5, 64, 64)        # batches of 2, 2 and 1 blocks
    assert counts(rep) == (5 * 8 * 64, 5 * 9 * 64, 5 * 9 * 2)
    assert np.array_equal(got, np.arange(64) + 7)


def test_report_lists_issued_counts(hw):
    body = BRANCH_NOT_TAKEN
    rep, _ = launch(hw, body, 1, 32, 32)
    text = str(rep)
    assert "thread-instructions: 256 executed, 288 issued; warp-instructions issued: 9" in text
    assert any(line.split() == ["bra", "0", "executed", "1", "warp-issued"]
               for line in text.splitlines())
