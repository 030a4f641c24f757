"""The emulated world (tilelang/emulator/world.py) on hand-written PTX: every rank's blocks of
one launch run together, each block reads its rank's parameters and sees its per-device
%ctaid, a flag set by another rank releases a spinning block, and a world where every rank
only waits is a NoProgress error naming each rank's waiting line."""

from __future__ import annotations

import numpy as np
import pytest

from emu_support import kernel_ptx
from tilelang.emulator.errors import EmulatorError, LaunchRefused, NoProgress
from tilelang.emulator.world import EmulatedWorld

# out[ctaid] = param1 * 100 + ctaid (out = param0, u32 elements), by thread 0 of each block
WRITE = kernel_ptx("""
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  cvt.u32.u64 %r2, %rd2;
  mov.u32 %r3, %ctaid.x;
  mad.lo.u32 %r4, %r2, 100, %r3;
  mul.wide.u32 %rd3, %r3, 4;
  add.u64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r4;
DONE:
  ret;""", nparams=2)

# rank r (param1) waits until flag[0] of its own memory (param0) is nonzero, then sets the
# flag of the next rank (param2 holds its address): a ring that rank 0's host flag starts
RING = kernel_ptx("""
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p2];
WAIT:
  ld.acquire.sys.global.b32 %r2, [%rd1];
  setp.eq.u32 %p2, %r2, 0;
  @%p2 bra WAIT;
  st.release.sys.global.b32 [%rd2], 1;
DONE:
  ret;""", nparams=3)


def _u32(world, r, n):
    p = world.malloc(r, 4 * n)
    world.device.memcpy_htod(p, np.zeros(n, np.uint32))
    return p


def test_each_rank_reads_its_parameters_and_its_own_ctaid():
    w = EmulatedWorld(3)
    outs = [_u32(w, r, 4) for r in range(3)]
    fn = w.load_module(WRITE).get_function("k")
    w.launch(fn, (4, 1, 1), (32, 1, 1), [[outs[r], 7 + r] for r in range(3)])
    for r in range(3):
        got = w.device.from_device(outs[r], (4,), np.uint32)
        assert got.tolist() == [(7 + r) * 100 + b for b in range(4)]


@pytest.mark.parametrize("n", [2, 5, 8])
def test_a_ring_of_flags_completes_in_any_rank_order(n):
    w = EmulatedWorld(n)
    flags = [_u32(w, r, 1) for r in range(n)]
    fn = w.load_module(RING).get_function("k")
    # the ring starts at the last rank, so that rank 0 (scheduled first) has to wait
    w.device.memcpy_htod(flags[n - 1], np.ones(1, np.uint32))
    w.launch(fn, (1, 1, 1), (32, 1, 1),
             [[flags[r], r, flags[(r + 1) % n]] for r in range(n)])
    assert all(w.device.from_device(f, (1,), np.uint32)[0] == 1 for f in flags)


def test_every_rank_waiting_is_no_progress_with_each_ranks_line():
    w = EmulatedWorld(2)
    flags = [_u32(w, r, 1) for r in range(2)]
    fn = w.load_module(RING).get_function("k")
    with pytest.raises(NoProgress) as e:
        w.launch(fn, (1, 1, 1), (32, 1, 1),
                 [[flags[r], r, flags[(r + 1) % 2]] for r in range(2)])
    msg = str(e.value)
    assert msg.startswith("rank 0: no progress: 2 thread(s) spin in the loop at PTX lines")
    assert "; rank 0 waits at PTX line 26; rank 1 waits at PTX line 26. On a GPU" in msg


def test_refusals():
    with pytest.raises(EmulatorError, match=r"an emulated world has 2 to 8 ranks, not 9"):
        EmulatedWorld(9)
    w = EmulatedWorld(2)
    fn = w.load_module(WRITE).get_function("k")
    with pytest.raises(LaunchRefused, match=r"1 argument lists for a world of 2 ranks"):
        w.launch(fn, (1, 1, 1), (32, 1, 1), [[0, 0]])
    with pytest.raises(LaunchRefused, match=r"at most 65536 threads"):
        w.launch(fn, (64, 1, 1), (1024, 1, 1), [[0, 0], [0, 0]])
