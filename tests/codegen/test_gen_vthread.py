"""The virtual-thread loop of a `.maxntid` kernel (llvm/control.py): a launch with the declared
threads, which the runtime always makes, runs the body once per thread behind one uniform test
of ntid (no increment, no loop test); a smaller block still does every virtual thread's work."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import compile_kernel, run_emulated, same
from tilelang.ir import samples

N = 3000


def vadd_run(block):
    r = compile_kernel(samples.vadd())                  # `.maxntid 256`, 4 x f32 per thread
    a = np.arange(N, dtype=np.float32)
    b = np.float32(0.5) * a
    c = np.full(N, -1, np.float32)
    rep = run_emulated(r, "vadd", [a, b, c], (3, 1, 1), block=block)
    same(c, a + b)
    return rep


def test_full_launch_runs_the_body_once_without_a_loop_test():
    rep = vadd_run((256, 1, 1))
    threads = 3 * 256
    ops = rep.instructions
    # one compare of ntid per thread (`setp.gt.u32 %p, %ntid, 255`), nothing of the loop's
    # next iteration: its opaque add and its test against the virtual threads
    assert ops["setp.gt.u32"] == threads
    assert "add.u32" not in ops and "setp.lt.u32" not in ops
    assert ops["ret"] == threads


@pytest.mark.parametrize("block", [(128, 1, 1), (96, 1, 1), (7, 1, 1), (1, 1, 1)])
def test_smaller_blocks_go_round(block):
    rep = vadd_run(block)
    real = 3 * block[0]
    # every real thread takes the loop back until the 256 virtual threads are done
    assert rep.instructions["add.u32"] == 3 * 256
    assert rep.instructions["ret"] == real
